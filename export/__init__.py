"""The model compiler: Keras front end → target-neutral IR → one generator per target."""
