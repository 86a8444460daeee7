"""PostgreSQL target: weights in float8[] tables, scoring as PL/pgSQL functions (no extension needed)."""
