"""The versions of a published model after its export: class names carried from one version to the next,
the gate's answer check kept with each version, and `nnsql models` (list, activate, remove)."""
