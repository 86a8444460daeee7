"""The service's error type: a status code and a one-line message, rendered as {"error": "..."}."""

from __future__ import annotations

MAX_MESSAGE = 300  # characters: client text echoed in an error is cut here


def capped(message: str, limit: int = MAX_MESSAGE) -> str:
    """A message with whatever a client sent cut short: an error never echoes megabytes back."""
    return message if len(message) <= limit else message[: limit - 1] + "…"


class ScoringError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(capped(message))
        self.message = capped(message)
        self.status = status


def bad_request(message: str) -> ScoringError:
    return ScoringError(message, 400)


def not_found(message: str) -> ScoringError:
    return ScoringError(message, 404)
