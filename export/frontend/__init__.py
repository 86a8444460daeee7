"""The Keras front end: model files read as data, then each layer family converted to IR nodes (base.py:
the registry; layers.py: every converter module, imported in one place; model.py: loading and the graph
walk). Knows nothing about SQL or any target."""
