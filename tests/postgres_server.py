"""A throwaway PostgreSQL cluster for tests: Debian's server, initdb + pg_ctl in a temporary directory,
listening only on a Unix socket. Started once per test session; each test gets a fresh database."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.fixtures import free_port

ADMIN = "nnsql_admin"
PASSWORD_USER = "pw_user"
PASSWORD = "correct horse"


def find_bin_dir() -> Path | None:
    for root in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (root / "initdb").exists() and (root / "pg_ctl").exists():
            return root
    found = shutil.which("initdb")
    return Path(found).parent if found else None


@dataclass
class Server:
    bin_dir: Path
    directory: Path
    port: int

    @property
    def socket_dir(self) -> str:
        return str(self.directory)

    def dsn(self, dbname: str = "postgres", user: str = ADMIN, password: str | None = None) -> str:
        extra = f" password='{password}'" if password is not None else ""
        return f"host={self.socket_dir} port={self.port} user={user} dbname={dbname}{extra}"

    def run_as_owner(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        subprocess.run([*prefix, *command], check=True, capture_output=True, text=True)

    def start(self) -> None:
        data = self.directory / "data"
        self.run_as_owner(
            str(self.bin_dir / "initdb"), "-D", str(data), "-U", ADMIN, "--auth-local=trust", "-E", "UTF8"
        )
        hba = data / "pg_hba.conf"
        rules = f"local all {PASSWORD_USER} scram-sha-256\nlocal all all trust\n"
        hba.write_text(rules)
        options = f"-k {self.directory} -c listen_addresses='' -p {self.port} -c fsync=off"
        self.run_as_owner(
            str(self.bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-o",
            options,
            "-l",
            str(self.directory / "log"),
            "-w",
            "start",
        )

    def stop(self) -> None:
        self.run_as_owner(
            str(self.bin_dir / "pg_ctl"), "-D", str(self.directory / "data"), "-m", "immediate", "stop"
        )
        shutil.rmtree(self.directory, ignore_errors=True)


def start_server() -> Server:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise FileNotFoundError("PostgreSQL server binaries (Debian package postgresql) are not installed")
    directory = Path(tempfile.mkdtemp(prefix="nnsql-pg-"))
    if os.geteuid() == 0:
        owner = pwd.getpwnam("postgres")
        os.chown(directory, owner.pw_uid, owner.pw_gid)
    server = Server(bin_dir, directory, free_port())
    server.start()
    return server


@contextlib.contextmanager
def optional_dsn(wanted: bool) -> Iterator[str | None]:
    """A throwaway server's DSN for the block when `wanted` (stopped after it), else None."""
    if not wanted:
        yield None
        return
    server = start_server()
    try:
        yield server.dsn()
    finally:
        server.stop()
