"""The publishing lifecycle every target shares: prepare (compile and check), the version store, the
sample rows and the parity gate that must pass before a version is activated."""
