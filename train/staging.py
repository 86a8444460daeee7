"""Staging from object storage under deadlines: a stalling endpoint costs a bounded time and one line.

A socket timeout does not bound a download: an endpoint that sends one byte every 20 s never trips a 60 s
read timeout, and one that answers the listing's headers slowly enough holds a thread for ever. So the
listing and the downloads run in a child process (`fetch` below starts it), which reports each object as
its download starts and ends; this process keeps two deadlines and ends the child, whatever it is blocked
in, when one passes:
- per object (`object_deadline`, NNSQL_OBJECT_DEADLINE, default 900 s): the object is named;
- for the whole staging, listing included (`staging_deadline`, NNSQL_STAGING_DEADLINE, default 7200 s).
The partial file of an object that was cut off is removed.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from nnsql.files import import_root

from . import objectstore
from .objectstore import DataError, StoredObject

OBJECT_DEADLINE = 900.0
STAGING_DEADLINE = 7200.0


def deadline_setting(value: float | None, variable: str, default: float) -> float:
    """An explicit value, else the environment variable, else the default; DataError when not positive."""
    if value is None:
        text = os.environ.get(variable, "").strip()
        try:
            value = float(text) if text else default
        except ValueError:
            raise DataError(f"{variable}={text!r}: expected a number of seconds") from None
    if not value > 0:
        raise DataError(f"{variable} must be a positive number of seconds, not {value}")
    return value


@dataclass(frozen=True)
class Request:
    """What the child does: list the pattern, take this worker's shard, stage it."""

    pattern: str
    endpoint: str | None
    cache_dir: str
    shard: str
    progress: bool


@dataclass
class Staged:
    objects: list[StoredObject]
    paths: list[Path]
    fetched: int


@dataclass
class Watch:
    """What the child is doing now, as far as its reports say."""

    started: float = field(default_factory=time.monotonic)
    listed: bool = False
    downloading: dict[str, tuple[float, str]] = field(default_factory=dict)  # key -> (start, path)


def fetch(
    pattern: str,
    *,
    endpoint: str | None,
    cache_dir: Path,
    shard: str,
    progress: bool,
    object_deadline: float | None = None,
    staging_deadline: float | None = None,
) -> Staged:
    """This worker's shard of `pattern`, staged under `cache_dir` within the deadlines."""
    per_object = deadline_setting(object_deadline, "NNSQL_OBJECT_DEADLINE", OBJECT_DEADLINE)
    overall = deadline_setting(staging_deadline, "NNSQL_STAGING_DEADLINE", STAGING_DEADLINE)
    request = Request(pattern, endpoint, str(cache_dir), shard, progress)
    child = start_child(request)
    watch = Watch()
    try:
        return follow(child, watch, pattern, endpoint, per_object, overall)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for _, path in watch.downloading.values():  # cut off: its partial file goes too
            Path(f"{path}.part-{child.pid}").unlink(missing_ok=True)


def start_child(request: Request) -> subprocess.Popen:
    """`python -c` with this package's root first on the path (a user's own train.py must not shadow it);
    credentials reach it through the inherited environment, never its command line."""
    root = str(import_root())
    code = (
        f"import sys; sys.path.insert(0, {root!r}); from nnsql.train.staging import child_main; child_main()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None
    )
    assert child.stdin is not None
    child.stdin.write(json.dumps(request.__dict__).encode())
    child.stdin.close()
    return child


def follow(
    child: subprocess.Popen,
    watch: Watch,
    pattern: str,
    endpoint: str | None,
    per_object: float,
    overall: float,
) -> Staged:
    assert child.stdout is not None
    selector = selectors.DefaultSelector()
    selector.register(child.stdout, selectors.EVENT_READ)
    pending = b""
    while True:
        overdue(watch, pattern, endpoint, per_object, overall)
        if not selector.select(timeout=wait_seconds(watch, per_object, overall)):
            continue
        chunk = os.read(child.stdout.fileno(), 65536)
        if not chunk:
            raise DataError(f"staging {pattern} stopped: exit status {child.wait()}")
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            result = handle(json.loads(line), watch)
            if result is not None:
                return result


def handle(event: dict, watch: Watch) -> Staged | None:
    kind = event["event"]
    if kind == "listed":
        watch.listed = True
    elif kind == "start":
        watch.downloading[event["key"]] = (time.monotonic(), event["path"])
    elif kind == "done":
        watch.downloading.pop(event["key"], None)
    elif kind == "error":
        raise DataError(event["message"])
    elif kind == "result":
        objects = [StoredObject(**item) for item in event["objects"]]
        return Staged(objects, [Path(path) for path in event["paths"]], event["fetched"])
    return None


def wait_seconds(watch: Watch, per_object: float, overall: float) -> float:
    now = time.monotonic()
    limits = [watch.started + overall, *(start + per_object for start, _ in watch.downloading.values())]
    return max(0.05, min(limits) - now)


def overdue(watch: Watch, pattern: str, endpoint: str | None, per_object: float, overall: float) -> None:
    """DataError naming the object (or the listing) when a deadline has passed."""
    now = time.monotonic()
    place = objectstore.endpoint_url(endpoint) or "AWS S3"
    bucket = objectstore.parse(pattern).bucket
    for key, (start, _) in watch.downloading.items():
        if now - start > per_object:
            raise DataError(
                f"s3://{bucket}/{key}: not downloaded within {per_object:g} s (the object deadline, "
                f"NNSQL_OBJECT_DEADLINE): {place} is stalling or too slow"
            )
    if now - watch.started > overall:
        doing = ", ".join(f"s3://{bucket}/{key}" for key in watch.downloading) or (
            f"the listing of {pattern}" if not watch.listed else "nothing"
        )
        raise DataError(
            f"staging {pattern}: not finished within {overall:g} s (the staging deadline, "
            f"NNSQL_STAGING_DEADLINE); still waiting for {doing} from {place}"
        )


def report(**event: object) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def child_main() -> None:
    """The child: list, shard, stage, reporting each step as a JSON line on stdout."""
    from .data import shard_files

    request = Request(**json.loads(sys.stdin.read()))
    try:
        parsed = objectstore.parse(request.pattern)
        s3 = objectstore.client(request.endpoint)
        listing = objectstore.list_matching(s3, parsed, request.endpoint)
        report(event="listed", objects=len(listing))
        objects = shard_files(listing, request.pattern, request.shard)
        paths, fetched = objectstore.stage(
            s3,
            parsed.bucket,
            objects,
            Path(request.cache_dir),
            request.endpoint,
            progress=request.progress,
            on_start=lambda stored, path: report(event="start", key=stored.key, path=str(path)),
            on_done=lambda stored: report(event="done", key=stored.key),
        )
    except DataError as error:
        report(event="error", message=str(error))
        return
    items = [stored.__dict__ for stored in objects]
    report(event="result", objects=items, paths=[str(path) for path in paths], fetched=fetched)
