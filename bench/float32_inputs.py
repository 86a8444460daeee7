"""How far onnxruntime's scores lie from Keras in float64, per kind of sample row, when Keras in float64 reads
the sample rows as given (float64) and when it reads them rounded to float32, as onnxruntime does.

    python -m nnsql.bench.float32_inputs MODEL [MODEL ...] [--rows N]

For each model: the ONNX export's sample rows (export/onnx/samples.py), onnxruntime's scores, and the
largest |Δ| per row kind (ordinary rows, ×100, ×1e4, random magnitudes) against both references, beside
each kind's largest float32 bound (export/publish/gate.py) and how many rows exceed 1e-5 (per value, as
the gate bounds it: × |value| beyond 1).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np


def row_kinds(describe: list[str]) -> np.ndarray:
    """Each row's kind, read from its description ('uniform row 7 ×100', 'random magnitudes ...')."""
    kinds = []
    for text in describe:
        if "×10000" in text:
            kinds.append("x1e4")
        elif "×100" in text:
            kinds.append("x100")
        elif "magnitude" in text or "random row" in text:
            kinds.append("random magnitudes")
        else:
            kinds.append("ordinary")
    return np.array(kinds)


def measure(path: Path, rows: int) -> None:
    from nnsql.export.frontend.float64 import predictor
    from nnsql.export.frontend.model import load_model
    from nnsql.export.onnx.emit import convert
    from nnsql.export.onnx.runtime import load_session, session_predict
    from nnsql.export.onnx.samples import keras_predict, sample_sets
    from nnsql.export.publish import parity

    model = load_model(path)
    each = sample_sets(model, rows, {})[0]
    assert each.graph is not None and each.by_ir_name is not None
    feeds = [each.rows.inputs[t.name] for t in model.inputs]
    float64 = predictor(model)
    given = float64([np.asarray(f) for f in feeds])
    rounded = float64([f.astype(np.float32).astype(np.float64) if f.dtype.kind == "f" else f for f in feeds])
    with tempfile.TemporaryDirectory() as folder:
        onnx_path = Path(folder) / "model.onnx"
        convert(model, onnx_path, kind=each.graph.kind)
        actual = session_predict(load_session(onnx_path), each.rows.inputs)
    keras32 = keras_predict(model, each.rows)
    gate = each.gate(keras32, parity.DEFAULT_TOLERANCE, float64)
    kinds = row_kinds([each.rows.describe(i) for i in range(each.rows.rows)])
    print(f"{path}: {each.rows.rows} rows")
    print(
        f"  {'rows':<18} {'n':>4} {'|Δ| unrounded':>14} {'|Δ| rounded':>12} {'over 1e-5':>10} "
        f"{'over, rounded':>13} {'float32 bound':>13} {'|Δ| f32 Keras':>13}"
    )
    for kind in ("ordinary", "x100", "x1e4", "random magnitudes"):
        chosen = np.flatnonzero(kinds == kind)
        if not chosen.size:
            continue
        scale = np.maximum(1.0, np.abs(given[chosen]))
        before = np.abs(actual[chosen] - given[chosen])
        after = np.abs(actual[chosen] - rounded[chosen])
        keras = np.abs(actual[chosen] - keras32[chosen])
        bound = max(gate.float32_bound(int(row)) for row in chosen[:20])
        print(
            f"  {kind:<18} {chosen.size:>4} {np.nanmax(before):>14.2e} {np.nanmax(after):>12.2e} "
            f"{int((before / scale > 1e-5).any(axis=1).sum()):>10} "
            f"{int((after / scale > 1e-5).any(axis=1).sum()):>13} {bound:>13.2e} {np.nanmax(keras):>13.2e}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--rows", type=int, default=100)
    args = parser.parse_args()
    for path in args.models:
        measure(path, args.rows)


if __name__ == "__main__":
    main()
