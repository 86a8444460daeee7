"""The pages of the docs test, in groups of about equal cost: one test file a group, so that pytest-xdist
(`--dist loadfile`) runs the groups side by side, and one test a page within it."""

from __future__ import annotations

from tests.docs.pages import REPO

GROUPS = {
    "quickstarts": ["README.md", "docs/physicist.md", "docs/dba.md", "docs/install.md", "docs/index.md"],
    "training": ["docs/training.md", "docs/benchmarking-clusters.md", "docs/benchmarks.md"],
    "targets": [
        "docs/duckdb.md",
        "docs/spark.md",
        "docs/postgres.md",
        "docs/oracle.md",
        "docs/export-time.md",
        "docs/output-kinds.md",
        "docs/numerics.md",
        "docs/layers.md",
        "docs/limits.md",
        "docs/commands.md",
    ],
    "serving": [
        "docs/ml-engineer.md",
        "docs/onnx.md",
        "docs/serving.md",
        "docs/serving-protocols.md",
        "docs/kubernetes.md",
        "docs/security.md",
        "docs/development.md",
        "docs/internals.md",
    ],
}


def every_page() -> list[str]:
    return ["README.md", *sorted(str(p.relative_to(REPO)) for p in (REPO / "docs").glob("*.md"))]
