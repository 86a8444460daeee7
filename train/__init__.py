"""Training: data loaders, reference models, and the distributed launcher (`nnsql spawn`)."""

from nnsql.short_names import entry_only

entry_only(__name__)
