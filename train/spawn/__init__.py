"""`nnsql spawn`: run a tf.distribute script with N workers, locally or on Kubernetes (no operator),
watch it, restart the group on failure and hand back the model.

From a script: `from nnsql.train.spawn import output_path` (where this worker saves its model). From Python
or a notebook: `from nnsql.train.spawn import run` starts the same run as the command line and returns a
handle.
"""

from __future__ import annotations

from typing import Any

from nnsql.train.spawn.output import is_chief, output_path

__all__ = ["Run", "is_chief", "output_path", "run"]


def __getattr__(name: str) -> Any:
    """`run` and `Run` on first use: a worker that only wants `output_path` imports nothing more."""
    if name in ("run", "Run"):
        from nnsql.train.spawn import api

        return getattr(api, name)
    raise AttributeError(name)
