"""DuckDB target: weights in tables of the database file, scoring as schema-qualified macros."""
