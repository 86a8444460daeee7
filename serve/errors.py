"""The service's error type: a status code and a one-line message, rendered as {"error": "..."}."""

from __future__ import annotations


class ScoringError(Exception):
    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def bad_request(message: str) -> ScoringError:
    return ScoringError(message, 400)


def not_found(message: str) -> ScoringError:
    return ScoringError(message, 404)
