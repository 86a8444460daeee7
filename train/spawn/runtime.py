"""Which Keras the workers run a script on.

Users' scripts (TF-Spawner's examples, CERN's Inclusive Classifier) call `model.fit` under
MultiWorkerMirroredStrategy, which Keras 3 cannot do (keras-team/keras#20585: "Attempt to convert a value
(PerReplica...)"); TensorFlow's legacy Keras 2 package, tf-keras, can. So workers run with
TF_USE_LEGACY_KERAS=1 (`tf.keras` is then tf-keras) unless `--keras 3` is given.
"""

from __future__ import annotations

CHOICES = ("2", "3")
DEFAULT = "2"
HELP = (
    "Keras the workers run: 2 (default) is TensorFlow's legacy tf.keras (tf-keras, TF_USE_LEGACY_KERAS=1), "
    "on which model.fit works under MultiWorkerMirroredStrategy; Keras 3's fit fails there "
    "(keras-team/keras#20585), so choose 3 only for scripts written for Keras 3 with their own training loop."
)


def environment(keras: str) -> dict[str, str]:
    """The variables that select the runtime in every worker, local process or pod."""
    if keras not in CHOICES:
        raise ValueError(f"--keras must be one of {', '.join(CHOICES)}, not {keras!r}")
    return {"TF_USE_LEGACY_KERAS": "1" if keras == "2" else "0"}


def describe(keras: str) -> str:
    return "legacy tf.keras (tf-keras, TF_USE_LEGACY_KERAS=1)" if keras == "2" else "Keras 3"
