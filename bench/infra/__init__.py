"""`nnsql bench infra`: benchmark a training cluster through train.spawn (see __main__)."""
