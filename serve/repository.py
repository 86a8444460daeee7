"""The model repository as the service sees it: every model and version, loaded, and kept current.

A background thread rescans REPO every `poll_seconds`; a new version directory is loaded and appears
atomically (the dict of models is replaced, never mutated), a removed one disappears. No restart needed.
"""

from __future__ import annotations

import ast
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnxruntime

from nnsql.export.onnx.fileformat import kind_of

from . import tritonrepo
from .batching import Batcher
from .coordination import (
    NO_VERSION,
    SETTLE_SECONDS,
    Scanner,
    read_json,
    read_plan,
    stamp_of,
    version_number,
    write_json,
)
from .errors import ScoringError, bad_request, capped, echoed, not_found
from .snapshot import take as take_snapshot
from .validation import NotSettled, bounded, check_version

LOG = logging.getLogger("nnsql.serve.repository")
# Following the master, a worker looks at the plan's and the commit's files every FOLLOW_SECONDS while
# it waits for the commit of a plan it acknowledged (every worker then switches within FOLLOW_SECONDS of
# the others), and for EAGER_SECONDS after either file changed or it asked the master for a load or an
# unload (the master and the workers agree on a change in a few steps); every IDLE_FOLLOW_SECONDS
# otherwise: each wake-up of the thread cost a busy worker 0.1-0.2 ms of CPU on a loaded machine, the
# stat alone. It reads them only when one was replaced since its last look (the master writes each by a
# rename: a new inode), or RELOOK_SECONDS after its last read, whatever their stat says.
FOLLOW_SECONDS = 0.02
IDLE_FOLLOW_SECONDS = 0.25
EAGER_SECONDS = 2.0
RELOOK_SECONDS = 1.0
RunObserver = Callable[[str, int, float], None]  # model, version, seconds


def file_key(path: Path) -> tuple[int, ...] | None:
    """What changes when the file is replaced or written: inode, size, change and modification times."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return stat.st_ino, stat.st_size, stat.st_ctime_ns, stat.st_mtime_ns


@dataclass
class LoadedModel:
    name: str
    version: int
    metadata: dict
    session: onnxruntime.InferenceSession
    batcher: Batcher | None = field(default=None, repr=False)
    on_run: RunObserver | None = field(default=None, repr=False)  # told the seconds of each session.run

    @property
    def inputs(self) -> list[dict]:
        return self.metadata["inputs"]

    @property
    def outputs(self) -> list[dict]:
        return self.metadata["outputs"]

    @property
    def classes(self) -> list[str]:
        return self.metadata.get("classes", [])

    @property
    def kind(self) -> str:
        """What the first output means (export/onnx/fileformat.py): probabilities for an earlier export."""
        return kind_of(self.metadata)

    def input_spec(self, name: str) -> dict:
        for spec in self.inputs:
            if spec["name"] == name:
                return spec
        raise not_found(
            f"model {self.name} has no input {name!r}; inputs: {[s['name'] for s in self.inputs]}"
        )

    def row_size(self) -> int:
        return sum(math.prod(bounded(spec["shape"][1:])) for spec in self.inputs)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        names = [spec["name"] for spec in self.outputs]
        started = time.perf_counter()
        outputs = dict(zip(names, self.session.run(names, feeds), strict=True))
        if self.on_run is not None:
            self.on_run(self.name, self.version, time.perf_counter() - started)
        return outputs


BatchObserver = Callable[[str, int], None]  # (name, rows) for a batch run; (name/version, ±n) for a queue


def load_version(
    directory: Path,
    name: str,
    version: int,
    max_batch: int,
    delay_ms: float,
    observe: BatchObserver,
    observe_run: RunObserver | None = None,
    queue_changed: BatchObserver | None = None,
    unchanged: Callable[[], bool] | None = None,
) -> LoadedModel:
    """The version loaded from a verified private copy of its files (serve.snapshot) and checked
    (serve.validation); InvalidVersion or the loader's error otherwise."""
    snapshot = take_snapshot(directory, unchanged)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1  # concurrency comes from batching and server threads
    session = onnxruntime.InferenceSession(snapshot.model, options, providers=["CPUExecutionProvider"])
    if snapshot.config is not None:
        metadata = check_version(tritonrepo.metadata(directory, snapshot.config, session), session)
        if unchanged is not None and not unchanged():  # its label files, read last, included
            raise NotSettled("its files changed while they were read")
        max_batch = min(max_batch, metadata["max_batch_size"] or max_batch)  # the config's limit holds
    else:
        metadata = check_version(snapshot.metadata, session)
    model = LoadedModel(name, version, metadata, session, on_run=observe_run)
    label = f"{name}/{version}"
    model.batcher = Batcher(
        model.run,
        max_batch,
        delay_ms,
        name=label,
        on_batch=lambda rows: observe(name, rows),
        on_queue=(lambda change: queue_changed(label, change)) if queue_changed else None,
    )
    return model


class ModelRepository:
    """Loaded versions by model name. By itself (an app made in a test) it rescans `root`; under
    `nnsql serve` (`state` given: the run directory's repository/ folder) it follows the master's
    plan and commits instead (serve/coordination.py), so every worker switches at the same moment."""

    def __init__(
        self,
        root: Path,
        *,
        max_batch: int = 32,
        delay_ms: float = 2.0,
        poll_seconds: float = 1.0,
        observe_batch: BatchObserver | None = None,
        observe_run: RunObserver | None = None,
        queue_changed: BatchObserver | None = None,
        state: Path | None = None,
        worker: int = 0,
    ) -> None:
        self.root = Path(root)
        self.observe_run = observe_run
        self.observe_batch = observe_batch or (lambda name, rows: None)
        self.queue_changed = queue_changed
        self.max_batch = max_batch
        self.delay_ms = delay_ms
        self.poll_seconds = poll_seconds
        self.state = state
        self.worker = worker
        self.models: dict[str, dict[int, LoadedModel]] = {}
        self.ready = False
        self.scanner = Scanner(self.root, says_configs=state is None)
        self.loaded: dict[tuple[str, int], LoadedModel] = {}  # served, or loaded for the next switch
        self.stamps: dict[tuple[str, int], str] = {}  # the plan's stamp of each loaded version's files
        self.retired: list[LoadedModel] = []  # replaced by a reload of their files: closed at the switch
        self.failures: dict[tuple[str, int], str] = {}
        self.unloaded: set[str] = set()
        self.commit: dict = {}  # the last commit applied (following the master)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def try_load(self, name: str, number: int, stamp: str | None = None) -> LoadedModel | None:
        """The version, or None when it is broken; a broken version is tried again only once it changes
        (since before this attempt read it: a writer that finishes during the attempt is seen). With the
        planned `stamp`, a Triton version's files must still be the planned ones after they are copied
        (serve.snapshot); when they changed, the version is tried again with the next plan."""
        directory = self.root / name / str(number)
        before = stamp_of(directory)
        said = self.scanner.said.get(directory)
        if said is not None and said[1] == before:
            return None
        try:
            model = load_version(
                directory,
                name,
                number,
                self.max_batch,
                self.delay_ms,
                self.observe_batch,
                observe_run=self.observe_run,
                queue_changed=self.queue_changed,
                unchanged=None if stamp is None else lambda: self.still_planned(name, number, stamp),
            )
        except Exception as error:  # a broken version must not stop the others
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            message = capped(f"cannot load {name} version {number}: {reason}")  # the index shows it
            self.failures[(name, number)] = message
            if (name, number) in self.loaded:
                message += " (its previous copy is still served)"
            if isinstance(error, NotSettled):  # no mistake of its writer's: tried again with the next plan
                LOG.info("%s", message)
            else:
                self.scanner.say_once(directory, logging.ERROR, message, stamp=before)
            return None
        self.failures.pop((name, number), None)
        self.scanner.said.pop(directory, None)
        LOG.info("loaded %s version %d", name, number)
        return model

    def still_planned(self, name: str, number: int, stamp: str) -> bool:
        """Whether a Triton version's files are those the plan found settled (their keys, the first part
        of the planned stamp; not its config and label files', which a link to /proc shows differently
        to each process)."""
        try:
            planned = ast.literal_eval(stamp)[0]
        except (ValueError, SyntaxError, TypeError, IndexError):
            return False
        return bool(planned == self.scanner.version_keys(name, number))

    def stage(self, wanted: Mapping[str, Mapping[int, str | None] | Collection[int]]) -> None:
        """Load every wanted version not loaded yet, and again those whose files changed since they were
        loaded (the plan's stamp differs: files replaced in place); not served before the switch."""
        for name, versions in wanted.items():
            stamps = versions if isinstance(versions, Mapping) else dict.fromkeys(versions, None)
            for number, stamp in sorted(stamps.items()):
                key = (name, number)
                current = self.loaded.get(key)
                if current is not None and (stamp is None or self.stamps.get(key, stamp) == stamp):
                    continue
                model = self.try_load(name, number, stamp)
                if model is None:
                    continue
                if current is not None:
                    LOG.info("reloaded %s version %d: its files changed", name, number)
                    self.retired.append(current)
                self.loaded[key] = model
                if stamp is not None:
                    self.stamps[key] = stamp

    def switch(self, served: dict[str, set[int]], keep: Collection[tuple[str, int]] = ()) -> None:
        """Serve exactly `served` (of what is loaded), at once; unload what is neither served nor kept."""
        models: dict[str, dict[int, LoadedModel]] = {}
        for name, numbers in served.items():
            versions = {n: self.loaded[(name, n)] for n in numbers if (name, n) in self.loaded}
            if versions:
                models[name] = versions
        self.models = models
        for key in list(self.loaded):
            if key[1] not in served.get(key[0], set()) and key not in keep:
                self.retired.append(self.loaded.pop(key))
                self.stamps.pop(key, None)
        for model in self.retired:
            if model.batcher:
                model.batcher.close()
        self.retired = []
        self.ready = True

    def scan(self) -> None:
        """By itself: load what appeared, drop what disappeared; swap the whole dict at once."""
        with self._lock:
            wanted = self.scanner.plan(self.unloaded)
            self.stage(wanted)
            self.switch({name: set(versions) for name, versions in wanted.items()})

    def follow(self) -> None:
        """Following the master: load the latest plan and say so; switch to the latest commit."""
        assert self.state is not None
        plan = read_json(self.state / "plan.json")
        commit = read_json(self.state / "commit.json")
        if commit and commit["generation"] != self.commit.get("generation"):
            served = {name: set(versions) for name, versions in commit["models"].items()}
            planned = read_plan(plan) if plan else {}
            self.stage(  # with the planned stamps of versions not loaded yet (a worker started again)
                {
                    name: {v: None if (name, v) in self.loaded else planned.get(name, {}).get(v) for v in vs}
                    for name, vs in served.items()
                }
            )
            keep = {(name, v) for name, versions in planned.items() for v in versions}
            self.switch(served, keep)
            self.commit = commit
        if plan and plan["generation"] != self.acked:
            wanted = read_plan(plan)
            for name in plan.get("retry", []):  # loaded by request: try broken versions again
                for number in wanted.get(name, {}):
                    self.scanner.said.pop(self.root / name / str(number), None)
            self.stage(wanted)
            failed = {
                f"{n}/{v}": why
                for (n, v), why in self.failures.items()
                if v in wanted.get(n, {}) and (n, v) not in self.loaded  # else its previous copy serves
            }
            write_json(
                self.state / f"ack-{self.worker}.json", {"generation": plan["generation"], "failed": failed}
            )
            self.acked = plan["generation"]

    acked: int | None = None

    def start(self, wait_seconds: float = 600.0) -> ModelRepository:
        """Load and serve (following the master: once its first commit is in), then keep current."""
        if self.state is None:
            self.scan()
            settling = time.monotonic() + SETTLE_SECONDS + 1  # Triton files written just before the start
            while self.scanner.waiting and time.monotonic() < settling:
                time.sleep(0.05)
                self.scan()
        else:
            deadline = time.monotonic() + wait_seconds
            while not self.ready and time.monotonic() < deadline:
                self.follow()
                time.sleep(0.02)
        if self.poll_seconds > 0 or self.state is not None:
            self._thread = threading.Thread(target=self._poll, name="repository-poll", daemon=True)
            self._thread.start()
        return self

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_interval()):
            try:
                if self.state is None:
                    self.scan()
                elif self.master_wrote():
                    self.follow()
            except Exception as error:  # keep serving what is loaded
                self.looked = None  # read again at the next look
                LOG.error("repository scan failed: %s", error)

    looked: tuple[tuple[int, ...] | None, ...] | None = None  # the two files' stats at the last read
    read_at = 0.0
    eager_until = 0.0  # looks every FOLLOW_SECONDS until then

    def poll_interval(self) -> float:
        if self.state is None:
            return self.poll_seconds
        waiting = self.acked is not None and self.acked != self.commit.get("generation")  # for the commit
        return FOLLOW_SECONDS if waiting or time.monotonic() < self.eager_until else IDLE_FOLLOW_SECONDS

    def master_wrote(self) -> bool:
        """Whether the plan or the commit may have changed since they were last read: a stat of each
        (reading and parsing both at every look doubled the thread's CPU). RELOOK_SECONDS after a read,
        they are read again whatever the stat says."""
        assert self.state is not None
        now = time.monotonic()
        stats = (file_key(self.state / "plan.json"), file_key(self.state / "commit.json"))
        if stats == self.looked and now - self.read_at < RELOOK_SECONDS:
            return False
        if stats != self.looked:
            self.eager_until = now + EAGER_SECONDS
        self.looked, self.read_at = stats, now
        return True

    def load(self, name: str, timeout: float = 60.0) -> None:
        """Serve `name` again (after unload) in every worker, or say why not (ScoringError)."""
        self.control("load", name, timeout)

    def unload(self, name: str, timeout: float = 60.0) -> None:
        """Stop serving `name` in every worker until it is loaded again (rescans do not bring it back)."""
        self.control("unload", name, timeout)

    def control(self, action: str, name: str, timeout: float) -> None:
        if self.state is None:
            present = self.scanner.present()
            if name not in present:
                raise not_found(f"no model {echoed(name)} in the repository; models: {sorted(present)}")
            (self.unloaded.add if action == "unload" else self.unloaded.discard)(name)
            if action == "load":  # broken versions are tried again
                for number in present[name]:
                    self.scanner.said.pop(self.root / name / str(number), None)
            self.scan()
            if action == "load" and name not in self.models:
                raise ScoringError(f"failed to load {echoed(name)}: {self.failure_of(name)}", 400)
            return
        self.eager_until = time.monotonic() + 2 * timeout  # follows closely until it has the answer
        try:
            answer = self.ask_master({"action": action, "model": name}, timeout)
            if not answer.get("ok"):
                raise ScoringError(str(answer.get("message")), int(answer.get("status", 400)))
            deadline = time.monotonic() + timeout  # answered on commit: wait until this worker has it
            while self.commit.get("generation", 0) < answer["generation"] and time.monotonic() < deadline:
                time.sleep(0.01)
        finally:
            self.eager_until = time.monotonic() + EAGER_SECONDS

    def ask_master(self, request: dict, timeout: float) -> dict:
        assert self.state is not None
        request_id = f"{os.getpid()}-{uuid.uuid4().hex}"
        write_json(self.state / "control" / f"{request_id}.json", request)
        done = self.state / "control" / f"{request_id}.done.json"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            answer = read_json(done)
            if answer is not None:
                done.unlink(missing_ok=True)
                return answer
            time.sleep(0.01)
        raise ScoringError(f"{request['action']} of {request['model']} did not finish in {timeout:g} s", 503)

    def failure_of(self, name: str) -> str:
        reasons = [why for (n, _), why in sorted(self.failures.items()) if n == name]
        return "; ".join(reasons) or self.scanner.problems.get(name, NO_VERSION)

    def index(self) -> list[dict]:
        """Every model of the repository and its versions, with their state (the V2 repository index):
        READY when served, UNAVAILABLE with the reason otherwise."""
        unloaded = set(self.commit.get("unloaded", [])) if self.state is not None else self.unloaded
        failed = (
            self.commit.get("failed", {})
            if self.state is not None
            else {f"{n}/{v}": why for (n, v), why in self.failures.items()}
        )
        entries = []
        for name, numbers in self.scanner.present().items():
            if not numbers:
                reason = self.scanner.problems.get(name, NO_VERSION)
                entries.append({"name": name, "version": "", "state": "UNAVAILABLE", "reason": reason})
            for number in sorted(numbers):
                entry = {"name": name, "version": str(number), "state": "READY", "reason": ""}
                if number not in self.models.get(name, {}):
                    reason = (
                        "unloaded" if name in unloaded else failed.get(f"{name}/{number}", "not loaded yet")
                    )
                    entry |= {"state": "UNAVAILABLE", "reason": reason}
                entries.append(entry)
        return entries

    def close(self) -> None:
        self._stop.set()
        for model in self.loaded.values():
            if model.batcher:
                model.batcher.close()

    def get(self, name: str, version: str | int | None = None) -> LoadedModel:
        versions = self.models.get(name)
        if not versions:
            raise not_found(f"unknown model {echoed(name)}; models: {sorted(self.models)}")
        if version in (None, ""):
            return versions[max(versions)]
        number = version_number(str(version))
        if number is None or number not in versions:
            raise not_found(
                f"model {echoed(name)} has no version {echoed(str(version))}; versions: {sorted(versions)}"
            )
        return versions[number]

    def default(self) -> LoadedModel:
        """For /score without ?model=: the only model loaded. With several, guessing would answer with
        another model's scores (a regression's value as a class), so the client must name one."""
        if not self.models:
            raise not_found("no model is loaded")
        if len(self.models) > 1:
            names = ", ".join(sorted(self.models)[:10])
            raise bad_request(f"several models are loaded ({names}): name one with /score?model=NAME")
        return self.get(next(iter(self.models)))
