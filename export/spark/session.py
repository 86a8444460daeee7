"""The Spark session an export runs in: local with a persistent catalog, a cluster master, or Spark Connect.

Locally the catalog is Hive's metastore in an embedded Derby database inside the warehouse folder, so the
published functions outlive the session: any later session with the same two settings (`settings`) calls
them. Through Spark Connect the server's catalog keeps them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ExportError, first_line

DEFAULT_WAREHOUSE = Path("spark-warehouse")


@dataclass(frozen=True)
class Where:
    """Where Spark runs: `master` (local[*] by default) or `remote` (sc://host:port), and the local
    warehouse folder."""

    warehouse: Path = DEFAULT_WAREHOUSE
    master: str = "local[*]"
    remote: str | None = None

    def settings(self) -> dict[str, str]:
        """What a fresh local session needs to see the published functions."""
        if self.remote is not None:
            return {}
        folder = self.warehouse.resolve()
        return {
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(folder),
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={folder / 'metastore_db'};create=true"
            ),
        }

    def describe(self) -> str:
        return (
            f"Spark Connect {self.remote}"
            if self.remote
            else f"Spark {self.master}, warehouse {self.warehouse}"
        )

    def command_lines(self, name: str) -> list[str]:
        """How a fresh session calls the published functions: spark-sql and PySpark."""
        if self.remote is not None:
            return [f"pyspark --remote {self.remote}   then: spark.sql('SELECT {name}.label(...) FROM ...')"]
        confs = " ".join(f"--conf {key}={value!r}" for key, value in self.settings().items())
        return [f"spark-sql {confs}", f"pyspark {confs}"]


def running() -> bool:
    """Whether this process already has a Spark session (the export then runs in it)."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return False
    return SparkSession.getActiveSession() is not None


JAVA_OPTIONS = "spark.driver.extraJavaOptions"


def start(where: Where, **extra: str) -> Any:
    """A SparkSession for `where`, or one line naming why none could start (no Java, a bad master...).
    `extra` settings apply last; Java options in it are added to the local driver's own, not put in
    their place."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ExportError('the spark target needs PySpark: pip install "nnsql[spark]"') from None
    builder = SparkSession.builder.appName("nnsql export")
    if where.remote is not None:
        builder = builder.remote(where.remote)
    else:
        where.warehouse.mkdir(parents=True, exist_ok=True)
        log = where.warehouse.resolve() / "derby.log"
        builder = builder.master(where.master).config("spark.ui.enabled", "false")
        java = f"-Dderby.stream.error.file={log} {extra.pop(JAVA_OPTIONS, '')}".strip()
        builder = builder.config(JAVA_OPTIONS, java)
        for key, value in where.settings().items():
            builder = builder.config(key, value)
        builder = builder.enableHiveSupport()
    for key, value in extra.items():
        builder = builder.config(key, value)
    try:
        return builder.getOrCreate()
    except Exception as error:  # no Java, a master that does not answer: the driver's own words
        raise ExportError(f"cannot start Spark ({where.describe()}): {first_line(error)}") from None


def stop(spark: Any) -> None:
    """Stop the session and the JVM that PySpark launched for it (none is left behind)."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    spark.stop()
    if gateway is not None:
        gateway.shutdown()
        SparkContext._gateway, SparkContext._jvm = None, None
    if process is not None:
        process.terminate()
        process.wait(timeout=60)
