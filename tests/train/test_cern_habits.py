"""Habits from CERN's MNIST-in-Oracle post that still work: its `exec mnist.init` before scoring is a
procedure of the model's package that changes nothing (the weights are in the version package already).
Checked offline, on the scripts an export writes, with the independent Oracle parser."""

from __future__ import annotations

import re

import parseora

from nnsql.export.oracle.__main__ import main as export_oracle


def test_the_oracle_package_keeps_cern_init_as_a_harmless_procedure(cern_mlp_path, tmp_path):
    args = ["--model", str(cern_mlp_path), "--name", "mnist", "--script-only", str(tmp_path), "--quiet"]
    assert export_oracle([*args, "--sample-rows", "20"]) == 0
    scripts = {path.name: path.read_text() for path in tmp_path.glob("*.sql")}
    spec = [text for text in scripts.values() if "CREATE OR REPLACE PACKAGE mnist AUTHID" in text]
    body = [text for text in scripts.values() if "CREATE OR REPLACE PACKAGE BODY mnist AS" in text]
    assert spec and body, sorted(scripts)
    assert re.search(r"^\s*PROCEDURE init;$", spec[0], re.MULTILINE)
    (procedure,) = re.findall(r"PROCEDURE init IS(.*?)END init;", body[0], re.DOTALL)
    assert procedure.split() == ["BEGIN", "NULL;"]  # no statement: nothing to change, nothing to fail
    for text in (spec[0], body[0]):
        assert [e for unit in parseora.parse(text, version="19c") for e in unit["errors"]] == []
