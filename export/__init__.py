"""The model compiler: Keras front end → target-neutral IR → one generator per target."""

from nnsql.short_names import entry_only

entry_only(__name__)
