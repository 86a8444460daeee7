"""`python -m tests.docs.oracle_rehearsal DIR [LINE ...]`: installs the `--script-only` scripts in DIR with
the PL/SQL interpreter of tests/export/plsql, gate included, as `sql user@db @install.sql` would in Oracle,
runs each LINE after it in the same session as SQL*Plus would (`EXEC nnsql_admin.activate('fashion', 1)`),
and prints the registry. The docs test runs it where a page's block needs an Oracle server this machine
lacks."""

from __future__ import annotations

import sys
from pathlib import Path

from tests.export.plsql_interpreter import InstalledModel


def main(argv: list[str]) -> int:
    installed = InstalledModel(Path(argv[0]))
    for line in argv[1:]:
        installed.session.run_script(Path("rehearsal.sql"), line + "\n")
    for row in installed.session.store.tables["NNSQL_MODELS"].rows:
        print(f"{row['NAME']} version {row['VERSION']} active {row['ACTIVE']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
