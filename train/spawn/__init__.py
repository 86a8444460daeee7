"""`python -m train.spawn`: run a tf.distribute MultiWorkerMirroredStrategy script with N workers, locally
or on Kubernetes (no operator), watch it, restart the group on failure and hand back the model."""
