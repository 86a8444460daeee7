"""Sample rows for the parity check that ends every export (docs/numerics.md).

Two kinds of rows:
- ordinary rows, compared with Keras: the user's own rows (`--samples FILE.npy`), else the test split of
  the data set named in the model's metadata (when it loads here and fits the input), else seeded
  uniform [0, 1) rows, which still exercise every weight;
- rows at scale, compared with Keras run in float64 (export/frontend/float64.py): the data rows ×100 and
  ×10,000, and random rows of magnitudes 0.01 to 10,000 with random signs, as unnormalised physics
  features arrive. They prove that no input of that size makes a target raise, overflow or lose the
  answer. Keras computes in float32, whose rounding alone moves a probability by more than 1e-5 on
  some rows of that size (measured: up to 1.4e-5 on the test zoo), so Keras in float64 is what they
  are compared with, on every target (export/publish/pipeline.py's Gate).
Token inputs (read by Embedding only, whatever dtype they declare) are never scaled: they index a table.
Their rows hold ids below the vocabulary, 0 padding the end as `mask_zero` reads it; the rows at scale
are edge rows for them instead: every step padding, or every step the last id of the vocabulary. A
model that averages over unmasked steps answers NaN on an all-padding row, the one NaN the gate accepts
(and only as NaN).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ExportError
from ..ir import graph as ir

SEED = 20161122
SCALES = (100.0, 10_000.0)  # the copies of the data rows at scale
MAGNITUDES = (-2.0, 4.0)  # random rows at scale: |x| = 10^u, u uniform in this range
SCALED_SHARE = 10  # each of the three groups at scale takes 1/SCALED_SHARE of the rows


@dataclass(frozen=True)
class SampleSet:
    inputs: dict[str, np.ndarray]
    source: str
    # per row: True for a row at scale (compared with Keras in float64), and what the row is
    scaled: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    origins: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        return len(next(iter(self.inputs.values())))

    @property
    def at_scale(self) -> np.ndarray:
        """Per row, True for a row at scale (all False when the set says nothing)."""
        return self.scaled if len(self.scaled) == self.rows else np.zeros(self.rows, bool)

    def describe(self, row: int) -> str:
        """The row as an error message names it: 'sample row 812 (test row 12 ×10000)'."""
        origin = f" ({self.origins[row]})" if row < len(self.origins) else ""
        return f"sample row {row}{origin}"


@dataclass(frozen=True)
class Ordinary:
    """The rows compared with Keras, and what they are called in a message ('test row', 'row')."""

    inputs: dict[str, np.ndarray]
    source: str
    noun: str


def _dataset_rows(graph: ir.Graph, metadata: dict[str, Any], rows: int) -> Ordinary | None:
    name = metadata.get("dataset")
    if not name or len(graph.inputs) != 1:
        return None
    import nnsql.imagedata as data

    try:
        dataset = data.load(name)
    except data.DataUnavailable:
        return None
    spec = graph.inputs[0]
    if dataset.x_test.shape[1] != spec.size:
        return None
    chosen = dataset.x_test[:rows].reshape((-1, *spec.shape)).astype(np.float32)
    return Ordinary({spec.name: chosen}, f"{name} test split, first {len(chosen)} rows", "test row")


def user_rows(graph: ir.Graph, path: Path, rows: int) -> Ordinary:
    """The rows of `--samples FILE`: a .npy array (rows × the input's shape, or flat) for a model with
    one input, or a .npz holding one array per input name. Loaded as data (no pickles)."""
    loaded = read_samples(path)
    if isinstance(loaded, dict):
        arrays = loaded
    elif len(graph.inputs) == 1:
        arrays = {graph.inputs[0].name: loaded}
    else:
        names = ", ".join(spec.name for spec in graph.inputs)
        raise ExportError(f"--samples {path}: the model has several inputs; give a .npz with {names}")
    inputs = {spec.name: checked_rows(arrays, spec, path)[:rows] for spec in graph.inputs}
    if len({len(values) for values in inputs.values()}) != 1:
        raise ExportError(f"--samples {path}: the inputs hold different numbers of rows")
    count = len(next(iter(inputs.values())))
    return Ordinary(inputs, f"{count} rows of {path.name}", f"{path.name} row")


def read_samples(path: Path) -> np.ndarray | dict[str, np.ndarray]:
    """A --samples file as data (no pickles): a .npy's array, or a .npz's arrays by name."""
    try:
        loaded: np.ndarray | np.lib.npyio.NpzFile = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise ExportError(f"--samples {path}: cannot read it as .npy/.npz ({error})") from None
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            return {name: loaded[name] for name in loaded.files}
    return loaded


def longest_sequence(path: Path | None) -> int | None:
    """The steps of the longest sequences a --samples file holds (its arrays' second dimension), or None
    without a file or sequences: the length a variable-length input is compiled at by default."""
    if path is None:
        return None
    loaded = read_samples(path)
    shapes = [array.shape for array in loaded.values()] if isinstance(loaded, dict) else [loaded.shape]
    steps = [shape[1] for shape in shapes if len(shape) > 1]
    return max(steps) if steps else None


def checked_rows(arrays: dict[str, np.ndarray], spec: ir.TensorSpec, path: Path) -> np.ndarray:
    """One input's rows of a --samples file, reshaped to the input; one line for anything else."""
    if spec.name not in arrays:
        raise ExportError(f"--samples {path}: no array named {spec.name!r} (holds {', '.join(arrays)})")
    values = arrays[spec.name]
    if values.dtype.kind not in "iuf" or values.ndim < 1 or len(values) == 0:
        raise ExportError(f"--samples {path}: {spec.name} must be a non-empty numeric array of rows")
    if values[0].size != spec.size:
        raise ExportError(
            f"--samples {path}: {spec.name} rows hold {values[0].size} values; the input takes "
            f"{spec.size} (shape {spec.shape})"
        )
    values = values.reshape((len(values), *spec.shape)).astype(np.float32)
    if not np.isfinite(values).all():
        raise ExportError(f"--samples {path}: {spec.name} holds NaN or infinite values")
    if spec.dtype == "int32":
        check_tokens(values, spec, path)
    return values


def check_tokens(values: np.ndarray, spec: ir.TensorSpec, path: Path) -> None:
    """Token ids must be whole numbers below the vocabulary: Keras itself raises on any other."""
    bound = spec.bound or 1
    wrong = (values < 0) | (values >= bound) | (values != np.round(values))
    if wrong.any():
        row, *position = (int(i) for i in np.argwhere(wrong)[0])
        at = position[0] if len(position) == 1 else tuple(position)
        raise ExportError(
            f"--samples {path}: {spec.name} holds token ids; row {row} position {at} holds "
            f"{values[row][tuple(position)]:g}, not a whole number from 0 to {bound - 1}"
        )


def zero_padded(values: np.ndarray) -> np.ndarray:
    """Sequence rows (rows × steps × features) zero-padded after varied lengths, as masked inputs arrive:
    in turn all steps kept, all but one, one, half, and a length that walks through every value. The
    parity check then sees what masking changes; an unmasked layer simply reads the zeros."""
    if values.ndim != 3:
        return values
    steps = values.shape[1]
    for row in range(len(values)):
        kept = (steps, steps - 1, 1, max(1, steps // 2), row % steps + 1)[row % 5]
        values[row, kept:, :] = 0.0
    return values


def random_rows(generator: np.random.Generator, spec: ir.TensorSpec, rows: int) -> np.ndarray:
    """Uniform [0, 1) values, or for an integer input indices below its bound; sequences zero-padded."""
    if spec.dtype == "int32":
        indices = generator.integers(0, spec.bound or 1, (rows, *spec.shape)).astype(np.float32)
        return zero_padded(indices[..., None])[..., 0]  # index 0 pads, as mask_zero expects
    return zero_padded(generator.random((rows, *spec.shape), dtype=np.float32))


def magnitudes(generator: np.random.Generator, spec: ir.TensorSpec, rows: int) -> np.ndarray:
    """Rows of magnitudes 10^-2 to 10^4 with random signs (sequences zero-padded); token ids at their
    edges (edge_tokens)."""
    if spec.dtype == "int32":
        return edge_tokens(spec, rows)
    size = generator.uniform(*MAGNITUDES, (rows, *spec.shape))
    signs = generator.choice(np.array([-1.0, 1.0]), (rows, *spec.shape))
    return zero_padded((signs * 10.0**size).astype(np.float32))


def edge_tokens(spec: ir.TensorSpec, rows: int) -> np.ndarray:
    """Token rows at the vocabulary's edges, in turn: every step padding (0), every step the last id."""
    values = np.zeros((rows, *spec.shape), np.float32)
    values[1::2] = (spec.bound or 1) - 1
    return values


def scaled_counts(rows: int) -> int:
    """Rows in each group at scale: a tenth of the rows each, at least one from 4 rows."""
    return 0 if rows < 4 else max(1, rows // SCALED_SHARE)


def copies_at_scale(graph: ir.Graph, samples_file: Path | None) -> bool:
    """Whether the ordinary rows are copied ×100 and ×1e4: not the user's rows (at their scale already),
    nor token ids (unchanged by a scale)."""
    return samples_file is None and any(spec.dtype != "int32" for spec in graph.inputs)


def sample_inputs(
    graph: ir.Graph, metadata: dict[str, Any], rows: int, samples_file: Path | None = None
) -> SampleSet:
    """`rows` sample rows: ordinary ones, then the groups at scale (see the module's docstring)."""
    generator = np.random.default_rng(SEED)
    each = scaled_counts(rows)
    groups = 3 if copies_at_scale(graph, samples_file) else 1
    if samples_file is not None and all(spec.dtype == "int32" for spec in graph.inputs):
        each = 0  # the user's token rows are used as given
    plain = rows - groups * each
    ordinary = (
        user_rows(graph, samples_file, plain)
        if samples_file is not None
        else _dataset_rows(graph, metadata, plain) or seeded_rows(graph, generator, plain)
    )
    count = len(next(iter(ordinary.inputs.values())))
    parts, origins = [ordinary.inputs], [f"{ordinary.noun} {i}" for i in range(count)]
    if groups == 3:
        copies = min(each, count)
        for scale in SCALES:
            copied = {k: scaled(v[:copies], spec_of(graph, k), scale) for k, v in ordinary.inputs.items()}
            parts.append(copied)
            origins += [f"{ordinary.noun} {i} ×{scale:g}" for i in range(copies)]
    parts.append({spec.name: magnitudes(generator, spec, each) for spec in graph.inputs})
    tokens = all(spec.dtype == "int32" for spec in graph.inputs)
    edge = "row {} of token ids at the vocabulary's edges" if tokens else "row {} of magnitudes 0.01 to 1e4"
    origins += [edge.format(i) for i in range(each)]
    inputs = {spec.name: np.concatenate([part[spec.name] for part in parts]) for spec in graph.inputs}
    order = interleaved([len(next(iter(part.values()))) for part in parts])
    flags = (np.arange(len(origins)) >= count)[order]
    what = "all padding, or the last id" if tokens else "×100, ×1e4, |x| ≤ 1e4"
    at_scale = f"; {int(flags.sum())} rows at scale ({what})" if flags.any() else ""
    inputs = {name: values[order] for name, values in inputs.items()}
    return SampleSet(inputs, ordinary.source + at_scale, flags, tuple(origins[i] for i in order))


def interleaved(sizes: list[int]) -> np.ndarray:
    """An order of the concatenated groups that spreads each group evenly over the whole set, so that
    any first rows hold every group in proportion: the parity budget (export/publish/budget.py) may score only
    the first few rows on a slow target, and those must include rows at scale."""
    position = np.concatenate([(np.arange(size) + 0.5) / size for size in sizes])
    return np.argsort(position, kind="stable")


def seeded_rows(graph: ir.Graph, generator: np.random.Generator, rows: int) -> Ordinary:
    inputs = {spec.name: random_rows(generator, spec, rows) for spec in graph.inputs}
    padded = any(len(spec.shape) == 2 for spec in graph.inputs)
    tokens = all(spec.dtype == "int32" for spec in graph.inputs)
    kind = "random token rows, 0 padding their ends" if tokens else "uniform random rows"
    source = f"{rows} seeded {kind}"
    source += ", sequences zero-padded" if padded else ""
    return Ordinary(inputs, source, "uniform row")


def spec_of(graph: ir.Graph, name: str) -> ir.TensorSpec:
    return next(spec for spec in graph.inputs if spec.name == name)


def scaled(values: np.ndarray, spec: ir.TensorSpec, scale: float) -> np.ndarray:
    """A copy of float rows times `scale`; token indices unchanged."""
    return values.copy() if spec.dtype == "int32" else (values * np.float32(scale)).astype(np.float32)
