"""What publishing works on: the request, the prepared check (`Checked`: what the scores mean, the sample
rows and their gate), the store's steps (`Versions`) and the version record. export/publish/pipeline.py
runs the steps."""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import numpy as np

from ..frontend.model_limits import DEFAULT_LIMITS, Limits
from ..frontend.outputs import OutputKinds
from ..ir import graph as ir
from ..registry.checks import StoredCheck
from . import budget, parity
from .gate import Gate
from .samples import SampleSet


@dataclass(frozen=True)
class VersionRecord:
    name: str
    version: int
    sha256: str
    input_spec: str  # JSON
    classes: str  # JSON
    source: str
    metadata: str  # JSON
    parity: parity.ParityReport
    sample_source: str
    output_kind: str = "probabilities"

    def registry_row(self) -> dict[str, object]:
        """Column → value for the registry table that every database target shares (see sql/); the
        store adds `active` in its database's spelling."""
        return {
            "name": self.name,
            "version": self.version,
            "sha256": self.sha256,
            "input_spec": self.input_spec,
            "classes": self.classes,
            "source": self.source,
            "metadata": self.metadata,
            "parity_rows": self.parity.rows,
            "parity_max_abs_diff": self.parity.max_abs_diff,
            "parity_argmax_agreement": self.parity.agreement,
            "parity_tolerance": self.parity.tolerance,
            "parity_sample_source": self.sample_source,
            "output_kind": self.output_kind,
        }


class Signature(Protocol):
    """What publishing reads of the compiled model: what its first output means, its classes and outputs,
    its inputs and its digest. `ir.Graph` is one; ONNX describes a model the IR does not read with its
    own (export/onnx/prepare.py). A frozen dataclass: a version keeps class names by a copy of it."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def inputs(self) -> tuple[ir.TensorSpec, ...]: ...
    @property
    def kind(self) -> str: ...
    @property
    def classes(self) -> tuple[str, ...]: ...
    @property
    def outputs(self) -> tuple[ir.OutputSpec, ...]: ...
    @property
    def first_size(self) -> int: ...
    def sha256(self) -> str: ...


Model = TypeVar("Model", bound=Signature)
Staged = TypeVar("Staged", bound=Signature, contravariant=True)


class Versions(Protocol[Staged]):
    """A target's steps of the export lifecycle, which `publish` runs in this order inside
    `session()` (the registry ready, one export at a time): `next_version`; `stage` writes the new version
    beside the active one; `register` writes its registry row, inactive; `scores` (what `predict` returns)
    and `answers` (what the functions users query return) are what the verify step compares with
    TensorFlow; `activate` completes the registry row and switches. Leaving the session by an exception
    discards what was staged: PostgreSQL and DuckDB roll their one transaction back, Oracle (whose DDL
    commits) drops the staged version's package and rows (`discard`), ONNX's repository removes the
    staged directory. Either way the previous version keeps scoring. The database stores share one
    implementation of the steps, export/publish/store.py's RegistryStore; ONNX's is
    export/onnx/store.py."""

    def session(self) -> AbstractContextManager[None]: ...
    def next_version(self, name: str) -> int: ...
    def stage(self, name: str, version: int, graph: Staged) -> None: ...
    def register(self, record: VersionRecord) -> None: ...
    def scores(self, name: str, inputs: dict[str, np.ndarray]) -> np.ndarray: ...
    def answers(
        self, name: str, inputs: dict[str, np.ndarray], functions: tuple[str, ...]
    ) -> dict[str, list[Any]]: ...
    def active_classes(self, name: str) -> tuple[int, list[str]] | None: ...
    def activate(self, record: VersionRecord) -> None: ...
    def keep(self, record: VersionRecord, check: StoredCheck) -> None: ...
    def load_test_data(self, name: str, features: np.ndarray, labels: np.ndarray) -> None: ...
    def close(self) -> None: ...

    progress: bool


Store = Versions[ir.Graph]  # a database target's store, which stages the IR


@dataclass(frozen=True)
class ExportRequest:
    model_path: Path
    name: str
    sample_rows: int = 1000
    tolerance: float = parity.DEFAULT_TOLERANCE
    # --tolerance given: it bounds every row; else a float32 target's rows at scale are held to their
    # float32 bound where that exceeds it (export/publish/gate.py)
    tolerance_asked: bool = False
    load_test_data: bool = False
    samples_file: Path | None = None  # the user's own sample rows (--samples)
    parity_seconds: float = (
        budget.DEFAULT_SECONDS
    )  # sample rows scored in the database: see export/publish/budget.py
    trust_model_code: bool = False  # load a file that holds code (export/frontend/model_code.py)
    as_float32: bool = False  # a mixed-precision model computes in float32 (export/frontend/float64.py)
    limits: Limits = DEFAULT_LIMITS
    quiet: bool = False
    output: str | None = None  # --output: the first output's kind, instead of the one read from the model
    classes: tuple[str, ...] = ()  # --classes: instead of metadata.json's
    sequence_length: int | None = None  # --sequence-length: the steps a variable-length input compiles at


@dataclass(frozen=True)
class Checked(Generic[Model]):
    """Everything computed before the store is touched: the sample rows and their gate (what each is
    compared with, computed for the rows the parity budget scores)."""

    graph: Model
    metadata: dict[str, Any]
    samples: SampleSet
    gate: Gate
    # what the graph's kinds were read from (say_kind reports it)
    kinds: OutputKinds = field(default_factory=lambda: OutputKinds((), "as compiled"))
    # sample sets that must pass before `samples` (a variable length sampled at other lengths)
    also: tuple[tuple[SampleSet, Gate], ...] = ()

    @property
    def expected(self) -> np.ndarray:
        """Every row's reference (for a target that checks rows of its own choosing)."""
        return self.gate.expected(np.arange(self.samples.rows))


Prepared = Checked[ir.Graph]  # a database target's: its IR
