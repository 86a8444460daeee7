"""A refusal's cause is the API server's (or a proxy's) text: a terminal escape or a line break in it is
shown escaped, so it cannot drive the terminal or forge a line of spawn's output."""

from __future__ import annotations

import pytest

pytest.importorskip("kubernetes")

from kubernetes.client.exceptions import ApiException

from nnsql.train.spawn.kube import refusal

MANIFEST = {"kind": "NetworkPolicy", "metadata": {"name": "run-1"}}


@pytest.mark.parametrize(
    "error",
    [
        ApiException(status=403, reason="Forbidden\x1b]0;owned\x07\x1b[2J"),
        ValueError("\x1b[31mrefused\x1b[0m\nerror: forged line"),
    ],
)
def test_refusal_cause_is_escaped(error):
    line = refusal(MANIFEST, "team", error)
    assert "\x1b" not in line and "\x07" not in line and "\n" not in line
    assert "\\x1b" in line  # shown, escaped, not dropped
