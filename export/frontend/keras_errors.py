"""Keras running a model file's model: an error there is the file's problem, said in one line.

A model that loads can still fail when Keras runs it: TensorFlow refuses a layer name as a scope or node
name (`'out"; DROP TABLE y; --' is not a valid scope name`), which Keras's own checks let by. The names
themselves are data (the SQL targets make their own identifiers of them); what Keras says about them
is shown on one printable line, naming the file, instead of a traceback.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from nnsql.text import printable

from ..errors import ExportError

PREAMBLE = "Exception encountered when calling"  # Keras's first line, before what went wrong
COLOURS = re.compile(r"\x1b\[[0-9;]*m")


@contextmanager
def running(path: str | Path) -> Iterator[None]:
    """Around a call that runs the loaded model: ExportError, in one line, for whatever it raises."""
    try:
        yield
    except Exception as error:  # Keras and TensorFlow raise many types for a model they cannot run
        raise ExportError(f"Keras cannot run the model in {path}: {reason(error)}") from None


def reason(error: Exception) -> str:
    """What Keras says is wrong: its first line that is not the preamble, without terminal colours,
    with any name the file chose (a layer named with a control character) shown escaped."""
    lines = [COLOURS.sub("", line).strip() for line in str(error).splitlines()]
    said = [line for line in lines if line and not line.startswith(PREAMBLE)]
    return printable((said or [type(error).__name__])[0][:300])
