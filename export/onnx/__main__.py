"""`nnsql export onnx`: Keras → ONNX in a model repository that `nnsql serve` serves."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np

from nnsql import quiet
from nnsql.export import cli
from nnsql.export.errors import ExportError
from nnsql.export.frontend import float64
from nnsql.export.frontend.float64 import Predictor
from nnsql.export.frontend.model import is_legacy, load_model, read_metadata
from nnsql.export.frontend.model_limits import DEFAULT_LIMITS, Limits
from nnsql.export.frontend.outputs import output_kinds
from nnsql.export.ir import graph as ir
from nnsql.export.names import check_model_name
from nnsql.export.onnx import fileformat as scorer
from nnsql.export.onnx.capabilities import CAPABILITIES
from nnsql.export.onnx.fileformat import METADATA_FILE, MODEL_FILE
from nnsql.export.onnx.repository import publish, sha256_of, staging
from nnsql.export.publish import budget, parity
from nnsql.export.publish.gate import Gate, gate_for, refuse_nonfinite
from nnsql.export.publish.pipeline import describe_kind, joined, output_columns, spread
from nnsql.export.publish.samples import SampleSet
from nnsql.export.registry.carry import carried_classes
from nnsql.export.registry.checks import STORED_ROWS, stored_check
from nnsql.export.registry.repository import CHECK_FILE, active_version, follow_export

TARGET = "onnx"
# The first output's name, by its kind: what HTTP clients ask for.
OUTPUT_NAMES = {"logits": "logits", "values": "values"}
OUTPUT_NAME = "probabilities"
DESCRIPTION = """\
Convert a trained Keras model to ONNX with Keras's own exporter (tf2onnx underneath), check it with
onnxruntime against Keras on sample rows (max |d| <= 1e-5, and the scorer's classes and labels against
a Keras user's: argmax, p > 0.5) and publish it as REPO/NAME/<next version>/model.onnx with
metadata.json (inputs, outputs, output kinds, classes, sha256, parity). A version that fails the check
is never published. Serve the repository with `nnsql serve`."""


def convert(model, path: Path, opset: int | None = None, kind: str = "probabilities") -> None:
    """Keras's ONNX export, then the first output renamed for the HTTP clients ('probabilities', or
    'logits' or 'values' by its kind). `opset` pins the ONNX opset (a runtime older than ours needs one
    it implements); None: the converter's."""
    import onnx

    from nnsql.export.onnx.tf2onnx_ops import fix_transposed_padding, register

    register()
    try:
        if is_legacy(model):
            legacy_to_onnx(model, path, opset)
        else:
            embed_statistics(model)
            model.export(str(path), format="onnx", verbose=False, opset_version=opset)
    except Exception as error:  # the converter raises many types
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportError(f"the ONNX converter failed for target '{TARGET}': {first}") from error
    graph_model = onnx.load(str(path))
    fix_transposed_padding(graph_model)
    names = output_names(model, kind)
    renamed = dict(zip((o.name for o in graph_model.graph.output), names, strict=True))
    for node in graph_model.graph.node:
        node.output[:] = [renamed.get(name, name) for name in node.output]
    for output in graph_model.graph.output:
        output.name = renamed[output.name]
    onnx.checker.check_model(graph_model)
    onnx.save(graph_model, str(path))


def output_names(model, kind: str = "probabilities") -> list[str]:
    """The first output is named by its kind (what HTTP clients ask for); others keep their Keras
    names, made unique (they reach clients as data, in responses and the repository document)."""
    names = [OUTPUT_NAMES.get(kind, OUTPUT_NAME)]
    for index, keras_name in enumerate(getattr(model, "output_names", [])[1:], start=1):
        name = str(keras_name) if str(keras_name) and str(keras_name) not in names else f"output_{index}"
        names.append(name)
    return names


def embed_statistics(model) -> None:
    """Keras's ONNX export turns a Normalization layer's adapted statistics (eager tensors) into graph
    inputs without values; given as numpy arrays, they are traced as constants."""
    import keras

    for layer in model._flatten_layers(include_self=False):
        if isinstance(layer, keras.layers.Normalization) and getattr(layer, "mean", None) is not None:
            layer.mean, layer.variance = np.asarray(layer.mean), np.asarray(layer.variance)


def legacy_to_onnx(model, path: Path, opset: int | None = None) -> None:
    """A tf.keras (Keras 2) model through tf2onnx directly, inputs named as in the Keras model."""
    import tensorflow as tf
    import tf2onnx

    signature = [
        tf.TensorSpec((None, *tensor.shape[1:]), tf.float32, name=tensor.name.split(":")[0])
        for tensor in model.inputs
    ]
    tf2onnx.convert.from_keras(model, input_signature=signature, opset=opset, output_path=str(path))


def onnx_predict(path: Path, samples: SampleSet) -> np.ndarray:
    return session_predict(load_session(path), samples.inputs)


def load_session(path: Path):
    """An onnxruntime session on the converted model, or a one-line error."""
    import onnxruntime

    try:
        return onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own Fail/InvalidGraph types
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ExportError(
            f"onnxruntime cannot load the converted model for target '{TARGET}': {first}"
        ) from None


def session_predict(session, inputs: dict[str, np.ndarray]) -> np.ndarray:
    feeds: dict[str, np.ndarray] = {
        i.name: inputs[i.name].astype(numpy_type(i.type)) for i in session.get_inputs()
    }
    return joined(session.run(None, feeds))  # every output, joined as Keras's are


def batch_predict(session, inputs: dict[str, np.ndarray], start: int, stop: int) -> np.ndarray:
    return session_predict(session, budget.rows_of(inputs, start, stop))


@dataclass(frozen=True)
class Meaning:
    """What the first output means (export/ir/kinds.py) and its labels: how the scorer's answers are read."""

    kind: str
    units: int
    classes: tuple[str, ...]
    several: bool

    def checks(
        self,
        wanted: np.ndarray,
        onnx_scores: np.ndarray,
        tolerance: float,
        allowed: np.ndarray | None = None,
    ) -> tuple[parity.AnswerCheck, ...]:
        """What the scorer answers from onnxruntime's values (export/onnx/fileformat.py: the class, label or
        labels and probabilities it returns) against a Keras user's reading of what they are compared with
        (Keras's values; the float64 reference on rows at scale, within `allowed`)."""
        answered = scorer.answers(self.kind, onnx_scores[:, : self.units], list(self.classes))
        asked = {f: answered[f] for f in parity.questions(self.kind, several_outputs=self.several)}
        first = wanted[:, : self.units]
        return parity.check_answers(
            self.kind,
            first,
            self.classes,
            asked,
            tolerance,
            several_outputs=self.several,
            allowed=allowed,
        )


def check_parity(
    path: Path,
    sets: list[Samples],
    expected: list[tuple[np.ndarray, Gate | None]],
    tolerance: float,
    limits: budget.Budget,
    progress: bool,
    meaning: Meaning,
) -> tuple[parity.ParityReport, str]:
    """onnxruntime's scores of each sample set against what it is compared with (Samples.expected), within
    the parity budget, and what the scorer answers from them against a Keras user's reading (`meaning`);
    raises ParityError on a disagreement. Returns the last set's report and its sample source."""
    session = load_session(path)
    for each, (keras_scores, gate) in zip(sets, expected, strict=True):
        samples = each.rows
        actual, outcome = budget.score_within_budget(
            partial(batch_predict, session, samples.inputs),
            samples.rows,
            limits,
            where="onnxruntime",
            progress=progress,
        )
        rows = np.arange(outcome.rows)
        wanted = keras_scores[: outcome.rows] if gate is None else gate.expected(rows)
        scored = None if gate is None else gate.allowed(rows)
        masked = None if gate is None else gate.masked[rows]
        report = parity.compare(wanted, actual, tolerance, scored, masked=masked, outputs=each.columns())
        checks = meaning.checks(wanted, actual, tolerance, scored)
        report = replace(report, answers=checks)
        parity.require(report, TARGET, None if gate is None else gate.float32_bound, samples.describe)
    return report, outcome.describe(samples.source)


ONNX_TYPES = {"tensor(float)": np.float32, "tensor(int32)": np.int32, "tensor(int64)": np.int64}


def numpy_type(onnx_type: str) -> type:
    """The numpy type of an onnxruntime input type (token indices are integers, features float32)."""
    return ONNX_TYPES.get(onnx_type, np.float32)


# Variable dimensions (None, e.g. time steps) are sampled at two lengths: parity must hold for both.
SAMPLE_LENGTHS = (12, 5)


@dataclass(frozen=True)
class Samples:
    """Rows keyed by Keras's input names, with what each is compared with (export/publish/gate.py):
    `graph` and `by_ir_name` when the IR compiles the model (then rows at scale are part of the set)."""

    rows: SampleSet
    graph: ir.Graph | None = None
    by_ir_name: SampleSet | None = None

    def gate(self, keras_scores: np.ndarray, tolerance: float, float64: Predictor) -> Gate | None:
        """What the rows are compared with (export/publish/pipeline.py's Gate); None without the IR:
        then every row is an ordinary one, compared with Keras's scores."""
        if self.graph is None or self.by_ir_name is None:
            refuse_nonfinite(keras_scores, self.rows, np.zeros(len(keras_scores), bool))
            return None
        return gate_for(self.graph, self.by_ir_name, keras_scores, tolerance, CAPABILITIES.float32, float64)

    def expected(
        self, keras_scores: np.ndarray, tolerance: float, float64: Predictor
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """Every row's reference and tolerance at once (see `gate`)."""
        gate = self.gate(keras_scores, tolerance, float64)
        if gate is None:
            return keras_scores, None
        rows = np.arange(len(keras_scores))
        return gate.expected(rows), gate.allowed(rows)

    def columns(self) -> tuple[tuple[str, int, int], ...]:
        return () if self.graph is None else output_columns(self.graph)


def sample_sets(
    model,
    rows: int,
    metadata: dict,
    samples_file: Path | None = None,
    kinds: tuple[str, ...] | None = None,
    classes: tuple[str, ...] | None = None,
) -> list[Samples]:
    from nnsql.export.compile import to_ir
    from nnsql.export.publish.samples import sample_inputs

    try:
        labels = tuple(metadata.get("classes", ())) if classes is None else classes
        graph = to_ir(model, target=TARGET, classes=labels, kinds=kinds)
    except ExportError:  # a shape or layer our IR lacks: ONNX may still convert it; seeded random rows
        if samples_file is not None:
            raise ExportError("--samples needs a model the exporter's IR reads; this one is not") from None
        variable = any(d is None for t in model.inputs for d in t.shape[1:])
        lengths = SAMPLE_LENGTHS if variable else (1,)
        return [Samples(random_rows(model, rows, length)) for length in lengths]
    samples = sample_inputs(graph, metadata, rows, samples_file)  # keyed by the IR's names: back to Keras's
    keyed = {t.name: samples.inputs[s.name] for t, s in zip(model.inputs, graph.inputs, strict=True)}
    return [Samples(replace(samples, inputs=keyed), graph, samples)]


def random_rows(model, rows: int, length: int) -> SampleSet:
    """Uniform random rows, `length` steps where a dimension is variable, the last quarter of each
    sequence zero (padding, which a Masking layer skips)."""
    generator = np.random.default_rng(0)
    inputs = {}
    for tensor in model.inputs:
        shape = [length if d is None else int(d) for d in tensor.shape[1:]]
        values = generator.random((rows, *shape), dtype=np.float32)
        if None in tensor.shape[1:2]:
            values[:, length - length // 4 :] = 0.0
        inputs[tensor.name] = values
    source = f"{rows} seeded uniform random rows" + (f", {length} steps" if length > 1 else "")
    return SampleSet(inputs, source)


def token_inputs(model, sets: list[Samples]) -> dict[str, int]:
    """Each input that holds token ids, by its Keras name, with the size of the vocabulary it indexes:
    the scorer refuses an id outside it (ONNX's Gather would read a negative one from the end)."""
    graph = sets[0].graph
    if graph is None:
        return {}
    return {
        tensor.name: int(spec.bound or 1)
        for tensor, spec in zip(model.inputs, graph.inputs, strict=True)
        if spec.dtype == "int32"
    }


def scored_sets(model, sets: list[Samples]) -> list[tuple[Samples, np.ndarray]]:
    return [(each, keras_predict(model, each.rows)) for each in sets]


def keras_predict(model, samples: SampleSet) -> np.ndarray:
    feeds = [samples.inputs[t.name] for t in model.inputs]
    return joined(model.predict(feeds if len(feeds) > 1 else feeds[0], verbose=0))


def dimension(size: int | None) -> int:
    """A dimension as the repository document states it: -1 where it varies (KServe V2's convention)."""
    return -1 if size is None else int(size)


def export(
    model_path: Path,
    repo: Path,
    name: str,
    rows: int,
    tolerance: float,
    *,
    samples_file: Path | None = None,
    parity_seconds: float = budget.DEFAULT_SECONDS,
    progress: bool = False,
    trust_code: bool = False,
    size_limits: Limits = DEFAULT_LIMITS,
    output: str | None = None,
    classes: tuple[str, ...] = (),
) -> tuple[int, parity.ParityReport]:
    check_model_name(name)
    model = load_model(model_path, trust_code=trust_code, limits=size_limits)
    metadata = read_metadata(model_path)
    read = output_kinds(model, model_path, output)
    kind, units = read.kinds[0], int(model.outputs[0].shape[-1])
    given = classes or tuple(metadata.get("classes", ()))
    labels = carried_classes(kind, units, given, previous_classes(repo / name))
    if read.note:
        print(f"note: {read.note}", file=sys.stderr)
    print(describe_kind(kind, read.evidence))
    sets = sample_sets(model, rows, metadata, samples_file, read.kinds, labels)
    # before the export, which needs a called model
    reference = float64.predictor(model)
    expected = [
        (scores, each.gate(scores, tolerance, reference)) for each, scores in scored_sets(model, sets)
    ]
    with staging(repo, name) as staged:
        convert(model, staged / MODEL_FILE, kind=kind)
        limits = budget.Budget(seconds=parity_seconds)
        meaning = Meaning(kind, units, labels, len(model.outputs) > 1)
        report, sample_source = check_parity(
            staged / MODEL_FILE, sets, expected, tolerance, limits, progress, meaning
        )
        document = {
            "inputs": [
                {"name": t.name, "datatype": "FP32", "shape": [-1, *[dimension(d) for d in t.shape[1:]]]}
                for t in model.inputs
            ],
            "outputs": [
                {"name": name, "datatype": "FP32", "shape": [-1, int(tensor.shape[-1])]}
                for name, tensor in zip(output_names(model, kind), model.outputs, strict=True)
            ],
            "output_kinds": list(read.kinds),
            "token_inputs": token_inputs(model, sets),
            "classes": list(labels),
            "sha256": sha256_of(staged / MODEL_FILE),
            "source": str(model_path),
            "parity": {**report.as_dict(), "bounds": report.bounds(), "sample_source": sample_source},
            "training": metadata,
        }
        (staged / CHECK_FILE).write_text(kept_check(sets[0], expected[0], report, meaning))
        version = publish(staged, repo, name, document)
    follow_export(repo / name, version)
    return version, report


def previous_classes(model_dir: Path) -> tuple[int, list[str]] | None:
    """The active version of a repository's model and its class labels (None before its first)."""
    version = active_version(model_dir) if model_dir.is_dir() else None
    if version is None:
        return None
    document = json.loads((model_dir / str(version) / METADATA_FILE).read_text())
    return version, [str(label) for label in document.get("classes", [])]


def kept_check(
    samples: Samples, scored: tuple[np.ndarray, Gate | None], report: parity.ParityReport, meaning: Meaning
) -> str:
    """A few of the rows the gate compared, with what they were compared with (Keras's references for
    those rows alone), for activating this version later (export/registry/checks.py)."""
    keras_scores, gate = scored
    rows = spread(min(report.rows, samples.rows.rows), 2 * STORED_ROWS)
    inputs = {name: values[rows] for name, values in samples.rows.inputs.items()}
    if gate is None:
        wanted, allowed = keras_scores[rows].reshape(len(rows), -1), np.full(len(rows), report.tolerance)
    else:
        wanted, allowed = gate.expected(rows), gate.allowed(rows)
    described = (meaning.kind, meaning.classes, meaning.units, meaning.several)
    return stored_check(inputs, wanted, allowed, len(rows), described).document()


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser(
        "onnx",
        DESCRIPTION,
        "nnsql export onnx --model models/mnist/model.keras --repo model_repository --name mnist",
        "nnsql serve --repo model_repository   (KServe V2 and TF Serving REST; docs/serving.md)",
    )
    parser.add_argument("--repo", required=True, type=Path, help="model repository directory")
    args = parser.parse_args(argv)

    def body() -> int:
        if args.load_test_data:
            raise ExportError("--load-test-data applies to database targets only")
        request = cli.request_from(args)
        version, report = export(
            args.model,
            args.repo,
            args.name,
            request.sample_rows,
            request.tolerance,
            samples_file=request.samples_file,
            parity_seconds=request.parity_seconds,
            progress=not args.quiet,
            trust_code=request.trust_model_code,
            size_limits=request.limits,
            output=request.output,
            classes=request.classes,
        )
        print(f"published {args.name} version {version} to {args.repo / args.name / str(version)}")
        print(f"  {report.summary()}")
        return 0

    return cli.run(body)


if __name__ == "__main__":
    quiet.install()  # TensorFlow's start-up lines only with --verbose
    sys.exit(main())
