"""The real components the suite runs against, checked before pytest: `make test` stops on the first one
that is missing or does not start, with one line naming it, instead of letting its tests skip.

`python -m tests.components` exits 0 when PostgreSQL starts and offers plpython3u, Chromium and its
driver run, Java starts (for a local Spark), and Fashion-MNIST is where Debian installs it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable


def postgresql() -> str | None:
    """None when a throwaway server starts and offers plpython3u; otherwise what is wrong."""
    import psycopg

    from tests.postgres_server import start_server

    try:
        server = start_server()
    except FileNotFoundError as missing:
        return str(missing)
    except subprocess.CalledProcessError as failed:
        return f"the PostgreSQL server did not start: {(failed.stderr or '').strip()[-300:]}"
    try:
        with psycopg.connect(server.dsn()) as con:
            query = "SELECT count(*) FROM pg_available_extensions WHERE name = 'plpython3u'"
            row = con.execute(query).fetchone()
        if not row or row[0] == 0:
            return "plpython3u is not installed (Debian packages postgresql-plpython3-15 and python3-numpy)"
        return None
    finally:
        server.stop()


def chromium() -> str | None:
    for program in ("chromium", "chromedriver"):
        if shutil.which(program) is None:
            return f"{program} is not installed (Debian packages chromium and chromium-driver)"
    done = subprocess.run(["chromium", "--headless", "--version"], capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else f"chromium does not start: {done.stderr.strip()[-300:]}"


def fashion_mnist() -> str | None:
    from nnsql import imagedata

    if any(imagedata.load_idx_dir(directory) is not None for directory in imagedata.FASHION_DIRS):
        return None
    return f"Fashion-MNIST is not in {imagedata.FASHION_DIRS[0]} (Debian package dataset-fashion-mnist)"


def java() -> str | None:
    """The Spark target's tests start a local Spark, which runs on Java 17 or later."""
    if shutil.which("java") is None:
        return "java is not installed (Debian package openjdk-17-jre-headless)"
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60)
    return None if done.returncode == 0 else f"java does not start: {done.stderr.strip()[-300:]}"


CHECKS: dict[str, Callable[[], str | None]] = {
    "PostgreSQL": postgresql,
    "Java": java,
    "Chromium": chromium,
    "Fashion-MNIST": fashion_mnist,
}


def main(names: list[str]) -> int:
    for name in names or list(CHECKS):
        problem = CHECKS[name]()
        if problem is not None:
            print(f"error: the test suite needs {name}: {problem}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
