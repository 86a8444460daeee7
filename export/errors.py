"""Errors the exporter raises. Each carries a one-line message that says what to do."""

from __future__ import annotations


class ExportError(Exception):
    """A failure the user can fix; the CLI prints `error: <message>` and exits non-zero."""


class UnsupportedLayer(ExportError):
    """A layer (or a layer option) that a target cannot compile."""

    def __init__(self, layer: str, target: str, detail: str = "") -> None:
        self.layer = layer
        self.target = target
        self.detail = detail
        why = f" ({detail})" if detail else ""
        super().__init__(
            f"layer {layer} is not supported by target '{target}'{why}; "
            f"run `nnsql export --supported` for what each target compiles"
        )


class ParityError(ExportError):
    """In-target scores disagree with TensorFlow beyond tolerance: the version is not published."""


class InvalidName(ExportError):
    """A model name that is not a plain identifier for the target."""


class ScoringFailure(ExportError):
    """The database raised while scoring sample row `row` (0-based) of the parity check: `function` is
    where, `reason` the database's first line. export/publish/pipeline.py names the row and stops the
    export."""

    def __init__(self, row: int, function: str, reason: str) -> None:
        self.row, self.function, self.reason = row, function, reason
        super().__init__(f"sample row {row} raised in {function}: {reason}")


def first_line(error: BaseException) -> str:
    """An exception's first line of text, or its type's name."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
