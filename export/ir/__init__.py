"""The target-neutral intermediate representation: the graph and its nodes (graph.py), passes over it, the
lowering of layers to primitives, value layouts and the numpy reference that executes it. Knows neither
Keras nor SQL."""
