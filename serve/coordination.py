"""Keeping every worker's models in step: the master plans, each worker loads, all switch together.

Files in the run directory's `repository/` folder, each written whole (write, then rename):
- `plan.json` {generation, models: {name: {version: stamp}}}: what should be served, from a scan of the
  model repository (names and modification times only: the master loads nothing) and the load/unload
  requests of the repository API.
- `ack-<worker>.json` {generation, failed: {"name/version": reason}}: the worker has loaded every
  version of that plan (not yet serving it).
- `commit.json` {generation, models: {name: [versions]}, unloaded, failed}: written once every live
  worker acknowledged the plan; a version that failed to load in any worker is left out everywhere.
  Workers watch it and swap their models to exactly this set at once: a new version is served by every
  worker from (nearly) the same moment, and only once all of them have it loaded.
- `control/<id>.json` -> `control/<id>.done.json`: a load or unload asked by any worker, and its answer,
  given once the change is committed.
This module has no heavy imports: the master uses it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from nnsql.text import printable

from . import tritonrepo
from .errors import capped, echoed
from .repofiles import MAX_ENTRIES, inside, listed, read_regular
from .validation import InvalidVersion

LOG = logging.getLogger("nnsql.serve.repository")
MAX_VERSION_DIGITS = 18  # a version number fits in a signed 64-bit integer, as in Triton and TF Serving
Plan = dict[str, dict[int, str]]  # model name -> version -> stamp
NO_VERSION = "no version directory holds both model.onnx and metadata.json"
# A Triton model's files carry no sha256: a version is loaded only once the stat (size, times, inode) of
# each file it reads (its model file, its config.pbtxt and label files) has held this long, seen by the
# scans (or, at first sight, by its ctime), so a writer rewriting one in place or truncating it first is
# not read half-way unless it pauses longer than this (docs/security.md).
SETTLE_SECONDS = 2.0
BUSY_SECONDS = 2.0  # after a change, the master ticks often this long (serve.master)
ACTIVE_FILE = "active"  # a model's version chosen by `nnsql models activate`


def version_number(text: str) -> int | None:
    """The version a URL or directory names, or None: plain ASCII digits, at most 18 of them (int() of
    thousands of digits is slow, and refused past 4,300)."""
    if text.isascii() and text.isdigit() and len(text) <= MAX_VERSION_DIGITS:
        return int(text)
    return None


def stamp_of(path: Path) -> tuple:
    """What changes when a version directory's files are replaced: their names and modification times."""
    try:
        if path.is_dir():
            return tuple(sorted((p.name, p.stat().st_mtime_ns) for p in listed(path)[0]))
        return (path.stat().st_mtime_ns,)
    except OSError:
        return ()


def file_key(path: Path) -> tuple:
    """What any write to a file changes: its inode, size, modification and change times (the last set by
    the kernel, which no writer can set back, as `rsync --inplace -t` sets the modification time)."""
    try:
        status = os.stat(path)
    except OSError:
        return ()
    return (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)


def write_json(path: Path, document: Any) -> None:
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(document))
    temporary.replace(path)


def read_text(path: Path, limit: int = 64) -> str:
    """A small file's text, or "" when it is missing, too large, not UTF-8, a link (`nnsql models`
    writes it by a rename, never as one) or not a regular file (a FIFO named `active` would block every
    scan)."""
    try:
        return read_regular(path, limit, follow=False).decode()
    except (InvalidVersion, UnicodeDecodeError):
        return ""


def nameable(name: str) -> bool:
    """Whether a client can name the model: a directory name that is not UTF-8 reads with lone
    surrogates, which no request path can hold and no JSON answer, metric or log line can carry."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


class Scanner:
    """The model directories and their servable version numbers, with odd entries logged once."""

    def __init__(self, root: Path, *, says_configs: bool = True) -> None:
        self.root = Path(root)
        self.says_configs = says_configs  # False in a worker: the master says what is wrong with a config
        self.said: dict[Path, tuple] = {}  # what was logged about a path, and when it last changed
        self.problems: dict[str, str] = {}  # why a model serves nothing (its config.pbtxt), by name
        self.seen: dict[Path, tuple[tuple, float]] = {}  # a Triton model file's key, held since (monotonic)
        self.planned: dict[tuple[str, int], str] = {}  # the stamp last planned of each version
        self.looked: set[Path] = set()  # the files the plan being made looked at
        self.settled_keys: dict[tuple[str, int], dict[Path, tuple]] = {}  # of the plan being made
        self.waiting = False  # the last plan left out a new Triton version whose file has not settled
        self.choices: dict[str, tuple[set[int], Any, int | None]] = {}  # a model's versions, policy

    def say_once(self, path: Path, level: int, message: str, stamp: tuple | None = None) -> None:
        """Log about a path once per change of the path (its `stamp`, now by default), not on every
        scan."""
        stamp = stamp_of(path) if stamp is None else stamp
        if self.said.get(path) != (message, stamp):
            self.said[path] = (message, stamp)
            LOG.log(level, "%s", printable(message))

    def settled(self, path: Path) -> bool:
        """Whether the file's key has held SETTLE_SECONDS: since the scan that first saw it, or, for a
        file seen for the first time, since its change time."""
        key, now = file_key(path), time.monotonic()
        self.looked.add(path)
        seen = self.seen.get(path)
        if seen is None or seen[0] != key:
            age = max(0.0, time.time() - key[-1] / 1e9) if key and seen is None else 0.0
            seen = self.seen[path] = (key, now - age)
        return bool(key) and now - seen[1] >= SETTLE_SECONDS

    def version_numbers(self, model_dir: Path, held: set[tuple[str, int]] | None = None) -> set[int]:
        """Directories named by a plain number that hold both files; anything else is noted once. A
        version named in the model's `active` file (`nnsql models activate`) is served alone, as Triton's
        `specific` version policy would serve it. A Triton model (config.pbtxt) takes its model file's
        name and its version policy from its configuration. Planning (`held` given), a Triton version
        whose files have not settled is left out when new, and collected in `held` when planned before
        (its previous copy keeps serving); so are all of a model's versions while its config.pbtxt or a
        label file has not settled, or while its config cannot be read (as Triton keeps a model whose
        reload failed)."""
        triton = tritonrepo.is_triton(model_dir)
        shared: dict[Path, tuple] = {}
        if triton and held is not None and not self.shared_settled(model_dir, shared):
            return self.hold(model_dir.name, held, waiting=True)
        config = self.triton_config(model_dir) if triton else None
        if config is False:
            return set() if held is None else self.hold(model_dir.name, held, waiting=False)
        model_file = tritonrepo.model_file(config) if triton else "model.onnx"
        numbers = set()
        for entry in self.entries(model_dir):
            number = version_number(entry.name)
            if entry.name == ACTIVE_FILE or entry.name.startswith((f".{ACTIVE_FILE}.", ".removing-")):
                continue  # the active file, being written, and a version being removed
            if number is None and triton and not entry.is_dir():
                continue  # a Triton model's config and label files
            if number is None:
                self.say_once(entry, logging.WARNING, f"ignoring {entry}: not a version number")
            elif (triton or (entry / "metadata.json").exists()) and (entry / model_file).exists():
                if held is None or not triton or self.version_settled(entry, model_file):
                    numbers.add(number)
                    if held is not None and triton:
                        files = [p for p in self.entries(entry) if p.is_file()]
                        self.settled_keys[(model_dir.name, number)] = shared | {
                            p: self.seen[p][0] for p in files if p in self.seen
                        }
                elif (model_dir.name, number) in self.planned:
                    numbers.add(number)
                    held.add((model_dir.name, number))
                else:
                    self.waiting = True
        served = tritonrepo.served_versions(config, numbers) if triton else numbers
        self.note_empty(model_dir.name, numbers, served, config)
        active = version_number(read_text(model_dir / ACTIVE_FILE).strip())
        self.choices[model_dir.name] = (numbers, config, active)
        return {active} if active in served else served

    def chosen(self, name: str, failed: set[int]) -> set[int]:
        """The versions the model's policy (and its `active` file) would serve of those the last scan
        found, were the `failed` ones absent: those a model keeps serving from its previous copies while
        a newer version fails to load."""
        numbers, config, active = self.choices.get(name, (set(), None, None))
        present = numbers - failed
        served = tritonrepo.served_versions(config, present) if config is not None else present
        return {active} if active in served else served

    def hold(self, name: str, held: set[tuple[str, int]], *, waiting: bool) -> set[int]:
        """The versions planned before for the model, collected in `held` (their previous copies keep
        serving); `waiting`: the first plan waits for a model planned never before."""
        previous = {number for model, number in self.planned if model == name}
        held.update((name, number) for number in previous)
        self.waiting = self.waiting or (waiting and not previous)
        return previous

    def shared_files(self, model_dir: Path) -> list[Path]:
        """A Triton model's own files that every version reads: config.pbtxt and the label files its
        outputs name. A file beside them that nothing reads (a README.md) may change at any pace; while
        the config cannot be read (being written), every file but the `active` file and hidden ones. A label
        file named but missing is left out: the version's load fails, and says so."""
        try:
            config, _ = tritonrepo.read_config(model_dir)
        except (InvalidVersion, OSError):  # said by triton_config, once the config has settled
            return [
                p
                for p in self.entries(model_dir)
                if p.name != ACTIVE_FILE and not p.name.startswith(".") and p.is_file()
            ]
        labels = sorted({output.label_filename for output in config.output if output.label_filename})
        present = [model_dir / name for name in labels if (model_dir / name).is_file()]
        return [model_dir / tritonrepo.CONFIG_FILE, *present]

    def shared_settled(self, model_dir: Path, keys: dict[Path, tuple]) -> bool:
        """Whether every shared file of the model has settled; their keys are put in `keys`."""
        files = self.shared_files(model_dir)
        settled = [self.settled(p) for p in files]  # every file looked at, not only up to the first
        keys.update((p, self.seen[p][0]) for p in files)
        return all(settled)

    def version_settled(self, version_dir: Path, model_file: str) -> bool:
        """Whether the version's model file and every other file of its directory have settled."""
        files = [p for p in self.entries(version_dir) if p.is_file()]
        settled = [self.settled(p) for p in files]
        return all(settled) and self.settled(version_dir / model_file)

    def note_empty(self, name: str, present: set[int], served: set[int], config: Any) -> None:
        """Why a model serves no version, for the index and a load's answer: none is complete, or its
        config's version policy excludes every one present (not a missing file)."""
        if served:
            self.problems.pop(name, None)
        elif present:
            self.problems[name] = capped(
                f"{tritonrepo.CONFIG_FILE}: its version_policy ({tritonrepo.policy_text(config)}) excludes "
                f"every version present ({', '.join(map(str, sorted(present)))})"
            )
        elif config is not None:
            self.problems[name] = f"no version directory holds {printable(tritonrepo.model_file(config))}"
        else:
            self.problems[name] = NO_VERSION

    def entries(self, directory: Path) -> list[Path]:
        """At most MAX_ENTRIES of the directory's entries; more are left out, said once."""
        entries, more = listed(directory)
        if more:
            self.say_once(
                directory,
                logging.WARNING,
                f"{directory} holds more than {MAX_ENTRIES} entries: only {MAX_ENTRIES} of them are read",
                stamp=("more than", MAX_ENTRIES),
            )
        return entries

    def triton_config(self, model_dir: Path) -> Any:
        """A Triton model's configuration, or False when it cannot be served (said once, in one line)."""
        path = model_dir / tritonrepo.CONFIG_FILE
        try:
            config, warning = tritonrepo.read_config(model_dir)
        except InvalidVersion as error:
            self.problems[model_dir.name] = capped(f"cannot serve {model_dir.name}: {error}")
            if self.says_configs:
                self.say_once(path, logging.ERROR, self.problems[model_dir.name])
            return False
        self.problems.pop(model_dir.name, None)
        if warning and self.says_configs:
            self.say_once(path, logging.WARNING, f"{model_dir.name}/{warning}")
        return config

    def present(self, held: set[tuple[str, int]] | None = None) -> dict[str, set[int]]:
        if not self.root.is_dir():
            return {}
        models = sorted(p for p in self.entries(self.root) if p.is_dir() and not p.name.startswith("."))
        found = {}
        for model_dir in models:
            if not nameable(model_dir.name):
                self.say_once(model_dir, logging.WARNING, f"ignoring {model_dir}: its name is not UTF-8")
                continue
            try:
                found[model_dir.name] = self.version_numbers(model_dir, held)
            except OSError as error:  # removed or moved away while this scan ran: gone for this scan
                LOG.info("skipping %s this time: %s", printable(str(model_dir)), error.strerror or error)
        return found

    def stamp(self, name: str, number: int) -> tuple:
        """The version directory's stamp; for a Triton model with its config and label files', and the
        key (serve.coordination.file_key) of each of the version's files."""
        model_dir = self.root / name
        if not tritonrepo.is_triton(model_dir):
            return stamp_of(model_dir / str(number))
        files = tuple((p.name, stamp_of(p)) for p in sorted(self.shared_files(model_dir)))
        return (self.version_keys(name, number), files)

    def version_keys(self, name: str, number: int) -> tuple:
        """The key (file_key) of each file a Triton version reads, the first part of its stamp: those
        of its directory, then the model's shared files (a file linked out of the model's directory,
        which is refused when read, by a mark: /proc shows each process its own)."""
        model_dir = self.root / name
        try:
            own = tuple((p.name, file_key(p)) for p in sorted(listed(model_dir / str(number))[0]))
            shared = tuple(
                (p.name, file_key(p) if inside(os.path.realpath(p), model_dir) else ("outside",))
                for p in sorted(self.shared_files(model_dir))
            )
        except OSError:  # removed since the scan
            return ()
        return (own, shared)

    def plan(self, leave_out: set[str]) -> Plan:
        """What to serve, each version with its stamp; a Triton version whose file is being written keeps
        the stamp planned before (its previous copy serves) until the file settles."""
        held: set[tuple[str, int]] = set()
        self.waiting = False
        self.looked, self.settled_keys = set(), {}
        plan: Plan = {}
        for name, numbers in self.present(held).items():
            if name in leave_out:
                continue
            plan[name] = {}
            for number in sorted(numbers):
                stamp = (
                    self.planned.get((name, number)) if (name, number) in held else self.stamp(name, number)
                )
                keys = self.settled_keys.get((name, number), {})
                if any(file_key(path) != key for path, key in keys.items()):  # written to since it settled
                    stamp = self.planned.get((name, number))
                if stamp is not None:
                    plan[name][number] = stamp if isinstance(stamp, str) else repr(stamp)
        self.planned = {
            (name, number): stamp for name, versions in plan.items() for number, stamp in versions.items()
        }
        self.seen = {path: self.seen[path] for path in self.looked}  # files gone are forgotten
        return plan


def plan_document(generation: int, plan: Plan, retry: set[str]) -> dict:
    """The plan as written; `retry`: models whose failed versions every worker tries to load again."""
    return {
        "generation": generation,
        "models": {name: {str(v): stamp for v, stamp in versions.items()} for name, versions in plan.items()},
        "retry": sorted(retry),
    }


def read_plan(document: dict) -> Plan:
    return {
        name: {int(v): stamp for v, stamp in versions.items()}
        for name, versions in document["models"].items()
    }


class Coordinator:
    """The master's side: plans from the repository and the load/unload requests, commits on every
    worker's acknowledgement, answers the requests."""

    def __init__(self, root: Path, state: Path, poll_seconds: float) -> None:
        self.scanner = Scanner(root)
        self.state = state
        (state / "control").mkdir(parents=True, exist_ok=True)
        self.poll_seconds = max(0.05, poll_seconds)
        self.generation = 0
        self.committed = 0
        self.planned: Plan | None = None
        self.commit: dict = {}  # the last commit written
        self.unloaded: set[str] = set()
        self.retry: set[str] = set()  # loaded by request: broken versions are tried again
        self.waiting: list[tuple[str, dict, int]] = []  # (request id, request, generation that answers it)
        self.last_scan = 0.0
        self.started = time.monotonic()
        self.changed_at = -BUSY_SECONDS  # the last new plan or request taken (monotonic)

    def busy(self) -> bool:
        """Whether a change is being agreed on (a plan not committed yet, a request waiting for its
        answer) or was lately: the master then ticks more often, its workers follow more often too."""
        return (
            bool(self.waiting)
            or self.generation > self.committed
            or (time.monotonic() - self.changed_at < BUSY_SECONDS)
        )

    def tick(self, workers: list[int]) -> None:
        """Called by the master a few times a second with the indexes of the live workers."""
        asked = self.take_requests()
        if asked:
            self.changed_at = time.monotonic()
        if asked or time.monotonic() - self.last_scan >= self.poll_seconds:
            self.plan(new_generation=asked)
        if self.generation > self.committed:
            self.try_commit(workers)

    def plan(self, new_generation: bool = False) -> None:
        """Write a new plan when the repository changed, or when requests wait for one (their answer
        comes with its commit, even if they change nothing, such as a second unload)."""
        wanted = self.scanner.plan(self.unloaded)
        if (
            not self.generation
            and self.scanner.waiting
            and time.monotonic() < self.started + SETTLE_SECONDS + 1
        ):
            return  # the first plan waits (at every tick) for the files written just before the start
        self.last_scan = time.monotonic()
        if wanted != self.planned or self.retry or new_generation:
            self.generation += 1
            self.changed_at = time.monotonic()
            self.planned = wanted
            write_json(self.state / "plan.json", plan_document(self.generation, wanted, self.retry))
            self.retry = set()

    def try_commit(self, workers: list[int]) -> None:
        acks = [read_json(self.state / f"ack-{index}.json") for index in workers]
        if not workers or any(not ack or ack.get("generation") != self.generation for ack in acks):
            return
        failed: dict[str, str] = {}
        for ack in acks:
            failed.update(ack.get("failed", {}))
        assert self.planned is not None
        served = {name: self.served(name, versions, failed) for name, versions in self.planned.items()}
        document = {
            "generation": self.generation,
            "models": {name: versions for name, versions in served.items() if versions},
            "unloaded": sorted(self.unloaded),
            "failed": failed,
        }
        write_json(self.state / "commit.json", document)
        self.committed = self.generation
        self.commit = document
        self.answer(document)

    def served(self, name: str, planned: dict[int, str], failed: dict[str, str]) -> list[int]:
        """The model's planned versions that every worker loaded, and, while some failed, those of the
        last commit its policy would serve without them: a newer version that fails to load leaves the
        previous ones serving (Triton keeps a model whose reload failed), never the model missing."""
        broken = {v for v in planned if f"{name}/{v}" in failed}
        kept = set()
        if broken:
            kept = set(self.commit.get("models", {}).get(name, [])) & self.scanner.chosen(name, broken)
        return sorted({v for v in planned if v not in broken} | kept)

    def take_requests(self) -> bool:
        taken = False
        for path in sorted((self.state / "control").glob("*.json")):
            if path.name.endswith(".done.json"):
                continue
            request = read_json(path)
            path.unlink(missing_ok=True)
            if not isinstance(request, dict):
                continue
            request_id = path.name.removesuffix(".json")
            name = str(request.get("model"))
            if name not in self.scanner.present():
                self.done(
                    request_id,
                    {"ok": False, "status": 404, "message": f"no model {echoed(name)} in the repository"},
                )
                continue
            if request.get("action") == "unload":
                self.unloaded.add(name)
            else:
                self.unloaded.discard(name)
                self.retry.add(name)  # a new plan even if nothing changed: its answer comes on commit
            self.waiting.append((request_id, request, self.generation + 1))
            taken = True
        return taken

    def answer(self, commit: dict) -> None:
        still = []
        for request_id, request, generation in self.waiting:
            if generation > self.committed:
                still.append((request_id, request, generation))
                continue
            name = str(request.get("model"))
            answer: dict[str, Any] = {"ok": True, "generation": self.committed}
            superseded = name in commit["unloaded"]  # by an unload taken after this load
            if request.get("action") != "unload" and name not in commit["models"] and not superseded:
                reasons = [
                    f"{key}: {why}" for key, why in commit["failed"].items() if key.startswith(f"{name}/")
                ]
                message = "; ".join(reasons) or self.scanner.problems.get(name, NO_VERSION)
                answer = {"ok": False, "status": 400, "message": f"failed to load {echoed(name)}: {message}"}
            self.done(request_id, answer)
        self.waiting = still

    def done(self, request_id: str, answer: dict) -> None:
        write_json(self.state / "control" / f"{request_id}.done.json", answer)
