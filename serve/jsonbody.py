"""JSON request bodies within bounds: counted before they are parsed, parsed a few at a time.

A JSON value costs 30-70 bytes as a Python object against 2-3 bytes of text (`{},` became ~570 MB
from 19.3 MB), so a body is first counted, value by value, against what the model can take: every
value but the first follows a comma or opens a list or an object, so 1 + the number of `,` `[` `{`
bytes bounds the values of the document (strings holding those bytes only make the bound stricter).
Large bodies are then parsed at most `MAX_LARGE_PARSES` at a time per process. KServe V2 bodies are
parsed by simdjson, whose document holds the text's numbers without a Python object each: tensors are
read from it straight into numpy (serve.tensors); other bodies go through orjson.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import orjson
import simdjson

from .errors import ScoringError, bad_request, capped

STRUCTURE = b",[{"  # each value of a document but the first follows one of these bytes
LARGE_BODY = 1 << 20  # bytes: bodies from this size on wait for a parse slot
MAX_LARGE_PARSES = 2  # large bodies parsed at once in one process (each is a few times its size)
PARSE_WAIT_SECONDS = 30.0
_large_parses = threading.BoundedSemaphore(MAX_LARGE_PARSES)


def values_bound(raw: bytes) -> int:
    """At least the number of JSON values `raw` holds (numpy compares bytes 4 times as fast as
    bytes.count)."""
    text = np.frombuffer(raw, np.uint8)
    return 1 + sum(int(np.count_nonzero(text == byte)) for byte in STRUCTURE)


def check_values(raw: bytes, budget: int, what: str) -> None:
    """413 when the body may hold more JSON values than `budget` (what the model takes, see handling).
    A body of fewer bytes than the budget cannot hold more values (each takes a byte at least) and is
    not counted: numpy's comparisons release the GIL, and under load taking it back costs a request
    up to the interpreter's switch interval each time, which a one-row body would pay for nothing."""
    if 1 + len(raw) <= budget:
        return
    found = values_bound(raw)
    if found > budget:
        raise ScoringError(
            f"the body holds up to {found} JSON values; {what} takes at most {budget}: "
            "send fewer rows per request, or the binary tensor extension",
            413,
        )


@contextmanager
def parse_slot(size: int) -> Iterator[None]:
    """Bound the parses of large bodies running at once; 503 if none frees up in time."""
    if size < LARGE_BODY:
        yield
        return
    if not _large_parses.acquire(timeout=PARSE_WAIT_SECONDS):
        raise ScoringError("the server is parsing too many large bodies: retry shortly", 503)
    try:
        yield
    finally:
        _large_parses.release()


def _reject_constant(name: str) -> float:
    raise bad_request(f"{name} is not a number: NaN and Infinity are rejected")


def explain(raw: bytes, refused: Exception) -> ScoringError:
    """A one-line 400 for a body a parser refused (`refused`, its error): the standard parser says
    precisely where and why (NaN and Infinity are named as such)."""
    try:
        json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)  # bytes would be read as UTF-16 too
    except UnicodeDecodeError as error:
        return bad_request(f"the body is not UTF-8 JSON: {error.reason} at byte {error.start}")
    except json.JSONDecodeError as error:
        return bad_request(f"the body is not valid JSON: {error.msg}")
    except RecursionError:
        return bad_request("the body is nested too deeply to be a tensor")
    except ScoringError as error:
        return error
    reason = str(refused)
    if "NUMBER" in reason or "BIGINT" in reason or "number" in reason:
        return bad_request("the body holds a number out of range (beyond 64-bit integers or doubles)")
    return bad_request(f"the body is not valid JSON: {capped(reason.split(': ')[-1], 100)}")


def loads(raw: bytes) -> Any:
    """The body as Python objects (orjson); call check_values first."""
    with parse_slot(len(raw)):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            raise explain(raw, error) from None


def document(raw: bytes) -> Any:
    """The body as a simdjson document: objects and lists are read lazily, numbers of a tensor's data go
    to numpy without becoming Python objects (serve.tensors reads them). Call check_values first."""
    with parse_slot(len(raw)):
        try:
            return simdjson.Parser().parse(raw)
        except (ValueError, RuntimeError) as error:  # RuntimeError: integers beyond 64 bits
            raise explain(raw, error) from None


def holds_booleans(raw: bytes) -> bool:
    """Whether `true` or `false` may be in the body: only then must lists of numbers be walked value by
    value (numpy reads a boolean among numbers as 1 or 0 without a word)."""
    return b"true" in raw or b"false" in raw
