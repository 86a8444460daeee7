"""The answer check a version keeps for activating it again from SQL (`EXEC nnsql_admin.activate`): the
sample rows the gate checked, as the PL/SQL blocks that fill nnsql_check_rows, which the version's
check_stored reads (plsql/check_stored.sql.j2)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..ir import graph as ir
from ..ir import kinds
from ..publish import parity
from .literals import APPEND, array_calls, double_literal, doubles
from .literals import script_literal as literal

ANSWER_COLUMNS = (
    "score",
    "label",
    "labels",
    "predict_proba",
)  # nnsql_check_rows: score, label, labels, proba
INSERT_CHECK_ROW = (
    "    INSERT INTO nnsql_check_rows (model, version, row_no, inputs, expected, allowed, tie, score, label, "
    "labels, proba)\n    VALUES ({values});"
)


def check_rows(
    name: str,
    version: int,
    graph: ir.Graph,
    inputs: list[np.ndarray],
    expected: np.ndarray,
    allowed: np.ndarray,
) -> list[str]:
    """The answer check kept for activating the version later (nnsql_check_rows, read by the version's
    check_stored): one PL/SQL block per sample row with its inputs (every input's values one after the
    other), expected values, tolerance and tie margin as rows_block checks them, and the answers a Keras
    user reads (NULL where the row is a near-tie)."""
    first, several = graph.first_size, bool(graph.outputs)
    ties = parity.tie_margins(expected[:, :first], allowed)
    answers = kinds.keras_answers(
        graph.kind, expected[:, :first], graph.classes, ties, several_outputs=several
    )
    asked = parity.questions(graph.kind, several_outputs=several)
    key = f"model = {literal(name)} AND version = {version}"
    blocks = [f"BEGIN\n    DELETE FROM nnsql_check_rows WHERE {key};\nEND;"]
    for row in range(len(expected)):
        values = np.concatenate([np.asarray(x[row], np.float32).ravel() for x in inputs])
        kept = [
            stored_answer(f, answers.answers[f][row])
            if f in asked and not answers.undecided[f][row]
            else "NULL"
            for f in ANSWER_COLUMNS
        ]
        fields = [literal(name), str(version), str(row + 1), "v", doubles(expected[row])]
        fields += [double_literal(allowed[row]), double_literal(ties[row]), *kept]
        body = "\n".join(array_calls(values, "v"))
        insert = INSERT_CHECK_ROW.format(values=", ".join(fields))
        declare = f"DECLARE\n    v UTL_NLA_ARRAY_FLT := UTL_NLA_ARRAY_FLT();\n{APPEND}"
        blocks.append(f"{declare}\nBEGIN\n{body}\n{insert}\nEND;")
    return blocks


def stored_answer(function: str, answer: Any) -> str:
    """A Keras user's answer as nnsql_check_rows keeps it: labels as [first|second|...]."""
    if function == "predict_proba":
        return doubles(answer)
    if function == "labels":
        return literal("[" + "|".join(map(str, answer)) + "]")
    return literal(str(answer)) if function == "label" else str(int(answer))
