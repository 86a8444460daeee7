"""Training: data loaders, reference models, and the distributed launcher (`nnsql spawn`)."""
