"""PostgreSQL target: weights in real[] tables, scoring as PL/pgSQL functions (no extension needed)."""
