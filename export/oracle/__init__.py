"""Oracle target: weights as UTL_NLA_ARRAY_FLT varrays, scoring as generated PL/SQL packages."""
