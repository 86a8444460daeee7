"""Code generation shared by the SQL targets: the generator walking the graph with a per-target Dialect
(generator.py), the procedural generator of the PL/SQL-like targets, SQL text and formatting helpers."""
