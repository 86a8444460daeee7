"""Where a database's connection string comes from, so that a password never has to be on a command line.

`--dsn` is read from the command line, which every user of the machine can see in the process list: a
password there is refused. With no `--dsn`, the string comes from the environment variable
`--dsn-env NAME` names, from the first line of `--dsn-file PATH`, or from DATABASE_URL (how most
platforms hand it out), password included; then the driver's own sources (PGPASSWORD, ~/.pgpass,
PGSERVICE; ORACLE_PASSWORD) still apply. No message ever shows the string itself: targets describe
a connection as user@host:port/database.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import ExportError

DEFAULT_ENVIRONMENT = "DATABASE_URL"


@dataclass(frozen=True)
class Dsn:
    text: str  # '' when nothing names one: the driver's variables (PGHOST, ...) decide
    origin: str  # what gave it, for messages: '--dsn', '$DATABASE_URL', '--dsn-file PATH', ''

    @property
    def may_hold_password(self) -> bool:
        """Not from the command line: a password in it is nobody else's to see."""
        return self.origin != "--dsn"


def add_options(group: argparse._ActionsContainer, dsn_help: str) -> None:
    """--dsn, --dsn-env and --dsn-file on a parser or group."""
    group.add_argument("--dsn", help=dsn_help)
    group.add_argument(
        "--dsn-env",
        metavar="NAME",
        help="read the connection string, password allowed, from environment variable NAME "
        f"(default when no --dsn: {DEFAULT_ENVIRONMENT}, if set)",
    )
    group.add_argument(
        "--dsn-file",
        type=Path,
        metavar="PATH",
        help="read the connection string, password allowed, from the first line of PATH",
    )


def resolve(args: argparse.Namespace, default_environment: str | None = DEFAULT_ENVIRONMENT) -> Dsn:
    """The connection string of the options (see the module's docstring); never echoed."""
    given = [option for option in ("dsn", "dsn_env", "dsn_file") if getattr(args, option) is not None]
    if len(given) > 1:
        names = " and ".join("--" + option.replace("_", "-") for option in given)
        raise ExportError(f"{names} both name a connection: give one")
    if args.dsn is not None:
        return Dsn(args.dsn, "--dsn")
    if args.dsn_env is not None:
        if not os.environ.get(args.dsn_env):
            raise ExportError(f"--dsn-env {args.dsn_env}: that environment variable is not set")
        return Dsn(os.environ[args.dsn_env], f"${args.dsn_env}")
    if args.dsn_file is not None:
        try:
            lines = args.dsn_file.read_text().splitlines()
        except (OSError, UnicodeDecodeError) as error:
            reason = type(error).__name__
            raise ExportError(f"--dsn-file {args.dsn_file}: cannot read it ({reason})") from None
        return Dsn(lines[0].strip() if lines else "", f"--dsn-file {args.dsn_file}")
    if default_environment and os.environ.get(default_environment):
        return Dsn(os.environ[default_environment], f"${default_environment}")
    return Dsn("", "")
