"""The service's error type: a status code and a one-line message, rendered as {"error": "..."}."""

from __future__ import annotations

MAX_MESSAGE = 300  # characters: client text echoed in an error is cut here
MAX_ECHOED = 64  # characters of a name a client sent (a model, a version, a route) that an error shows


def capped(message: str, limit: int = MAX_MESSAGE) -> str:
    """A message with whatever a client sent cut short: an error never echoes megabytes back."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


def echoed(name: str, limit: int = MAX_ECHOED) -> str:
    """A name a client sent, as an error shows it: quoted and escaped as `repr` does (no line break or
    terminal escape), its first `limit` characters only, and its length where it was cut. The rest of
    the message (the models served, the versions) stays in view, whatever the name's length."""
    if len(name) <= limit:
        return repr(name)
    return f"{name[:limit]!r}… ({len(name)} characters)"


class ScoringError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(capped(message))
        self.message = capped(message)
        self.status = status


def bad_request(message: str) -> ScoringError:
    return ScoringError(message, 400)


def not_found(message: str) -> ScoringError:
    return ScoringError(message, 404)
