"""`nnsql models` on an Oracle schema whose connection string holds a password: read from the environment
(`--dsn-env NAME`) or a file (`--dsn-file PATH`), as `nnsql export oracle` takes it, never echoed. With no
Oracle server here, the connection goes to a real TCP listener of this test: the driver connects to the
address the string names, and the failure is one line naming that address, never the password."""

from __future__ import annotations

import socket
import threading

import pytest

from nnsql.export.connection import Dsn
from nnsql.export.errors import ExportError
from nnsql.export.oracle.store import connection_of, is_oracle_form
from nnsql.export.registry.cli import main as models

SECRET = "s3cr3t-Pa55"


class Listener:
    """A TCP server on a free local port that takes connections, keeps what each sends first, and closes
    them: where a database would be."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.settimeout(20)
        self.port = self.server.getsockname()[1]
        self.received: list[bytes] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        try:
            client, _ = self.server.accept()
        except OSError:
            return
        with client:
            client.settimeout(3)
            try:
                self.received.append(client.recv(65536))
            except OSError:
                self.received.append(b"")

    def close(self) -> None:
        self.server.close()
        self.thread.join(timeout=10)


@pytest.fixture
def listener():
    started = Listener()
    yield started
    started.close()


@pytest.fixture
def no_oracle_password(monkeypatch):
    monkeypatch.delenv("ORACLE_PASSWORD", raising=False)
    monkeypatch.delenv("DATABASE_URL", raising=False)


@pytest.mark.parametrize("form", ["--dsn-env", "--dsn-file"])
def test_the_password_in_an_oracle_string_goes_to_the_driver_and_is_never_shown(
    listener, no_oracle_password, monkeypatch, tmp_path, capsys, form
):
    url = f"scott/{SECRET}@127.0.0.1:{listener.port}/FREEPDB1"
    if form == "--dsn-env":
        monkeypatch.setenv("ORACLE_URL", url)
        where = ["--dsn-env", "ORACLE_URL"]
    else:
        (tmp_path / "oracle.dsn").write_text(url + "\n")
        where = ["--dsn-file", str(tmp_path / "oracle.dsn")]
    assert models(["list", *where]) == 2
    listener.close()
    shown = capsys.readouterr()
    assert listener.received, "the driver never connected to the address the string names"
    assert SECRET.encode() not in b"".join(listener.received)  # nothing before authentication holds it
    err = shown.err.strip()
    assert f"cannot reach Oracle at 127.0.0.1:{listener.port}/FREEPDB1: DPY-" in err, err
    assert SECRET not in shown.out + shown.err and len(err.splitlines()) == 1


def test_without_a_password_in_the_string_oracle_password_is_used(listener, monkeypatch, capsys):
    monkeypatch.setenv("ORACLE_URL", f"scott@127.0.0.1:{listener.port}/FREEPDB1")
    monkeypatch.setenv("ORACLE_PASSWORD", SECRET)
    assert models(["list", "--dsn-env", "ORACLE_URL", "--name", "churn"]) == 2
    listener.close()
    shown = capsys.readouterr()
    assert listener.received and SECRET not in shown.out + shown.err
    assert f"cannot reach Oracle at 127.0.0.1:{listener.port}/FREEPDB1" in shown.err


@pytest.mark.parametrize("option", ["--dsn", "--oracle-dsn"])
def test_a_password_on_the_command_line_is_refused_without_echo(no_oracle_password, capsys, option):
    assert models(["list", option, f"scott/{SECRET}@db.example.org:1521/FREEPDB1"]) == 2
    shown = capsys.readouterr()
    assert f"{option} holds a password" in shown.err and SECRET not in shown.out + shown.err


def test_a_malformed_string_from_the_environment_is_named_by_its_variable(
    no_oracle_password, monkeypatch, capsys
):
    monkeypatch.setenv("ORACLE_URL", f"scott/{SECRET}@db.example.org:1521/")
    with pytest.raises(ExportError, match=r"^invalid \$ORACLE_URL \(not shown") as refused:
        connection_of(Dsn(f"scott/{SECRET}@db.example.org:1521/", "$ORACLE_URL"))
    assert SECRET not in str(refused.value)


def test_the_address_and_password_of_each_origin():
    """The environment and files may hold `user/password@...`; the command line may not."""
    dsn, secret = connection_of(Dsn(f"scott/{SECRET}@db:1522/FREEPDB1", "--dsn-file dsn.txt"))
    assert (str(dsn), secret) == ("scott@db:1522/FREEPDB1", SECRET)
    dsn, secret = connection_of(Dsn("scott@db/FREEPDB1", "$ORACLE_URL"))
    assert (str(dsn), secret) == ("scott@db:1521/FREEPDB1", None)
    with pytest.raises(ExportError, match="--dsn holds a password"):
        connection_of(Dsn(f"scott/{SECRET}@db:1522/FREEPDB1", "--dsn"))


@pytest.mark.parametrize(
    ("text", "oracle"),
    [
        ("scott@db:1521/FREEPDB1", True),
        (f"scott/{SECRET}@db.example.org/ORCL", True),
        (f"postgresql://scott:{SECRET}@db:5432/churn", False),
        ("postgres://scott@db/churn", False),
        (f"host=db user=scott password={SECRET} dbname=churn", False),
        ("", False),
    ],
)
def test_oracle_strings_are_told_from_postgresql_ones(text, oracle):
    assert is_oracle_form(text) is oracle
