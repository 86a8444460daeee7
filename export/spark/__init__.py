"""Spark target: scoring as SQL functions of the session catalog, pure Spark SQL over arrays."""
