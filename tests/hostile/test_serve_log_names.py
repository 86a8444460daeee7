"""Names a writer of the model repository chooses reach the operator's log: a version directory that is
not a number is named in a warning. A name holding a line break or a terminal escape must not forge a
second log line or drive the operator's terminal: every line the scan logs is one printable line."""

from __future__ import annotations

import logging
from pathlib import Path

from nnsql.serve.coordination import Scanner

FORGED = "1\nERROR nnsql.serve: the admin key is \x1b[8mhidden"


def test_a_directory_name_is_logged_on_one_printable_line(tmp_path: Path, caplog):
    (tmp_path / "plain" / FORGED).mkdir(parents=True)
    with caplog.at_level(logging.INFO, logger="nnsql.serve.repository"):
        Scanner(tmp_path).present()
    messages = [record.getMessage() for record in caplog.records]
    assert any("not a version number" in message for message in messages), messages
    for message in messages:
        assert message.isprintable(), repr(message)
