"""Every fenced block of a Markdown page, parsed by Sybil and run in order as a reader would type it.

Sybil lexes the page: each fenced block and each `<!-- skip: next "reason" -->` comment before one (Sybil's
own skip directive; the reason is what the tally prints). A block's info string says what it is:

- `sh`, `bash`: commands, run by bash (`set -euo pipefail`) in the page's directory, the variables a
  block exports kept for the next blocks of the page;
- `python`: a program, run by the checkout's Python in the page's directory;
- `sql`: statements, run in the database the last `<!-- runs-in: duckdb FILE -->` or
  `<!-- runs-in: postgres -->` comment of the page names (a DuckDB file of the page's directory, or
  `$DATABASE_URL` through psql);
- `text`: what a command prints, or a layout: not a command, counted as such.

A block that needs what this machine lacks (an Oracle server) may be followed by a
`<!-- rehearsal: sh ... -->` comment: shell lines that run the same thing against the local stand-in
(tests/docs/oracle_rehearsal.py), counted as rehearsed.

A block that repeats, word for word, the commands of a block another page runs (a quick start the README
and its own page both show) may be marked `<!-- same-as: PATH -->`, PATH the other page as a link from this
one would name it: it is not run again, but it must still match (comments, blank lines and spacing aside)
a block of that page that runs, or the page fails; it is counted as run there.

Any other block (no info string, `sql` with no database named, ...) must be marked with a skip and its
reason, or the page fails: nothing is left out silently. `pip install "./nnsql[...]"` lines are checked
(the extras they name exist) and not run: the test installs nothing into the checkout's environment
(tests/test_package.py installs the wheel). The documented ports 8000 and 8001 become free ones, so that
pages run side by side, and curl fails on an HTTP error status.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import SkipTest

from sybil import Document, Example, Region
from sybil.parsers.markdown.lexers import DirectiveInHTMLCommentLexer, RawFencedCodeBlockLexer
from sybil.parsers.markdown.skip import SkipParser
from sybil.typing import Evaluator

from tests.fixtures import free_port

REPO = Path(__file__).resolve().parents[2]
COMMANDS = {"sh", "bash", "python", "sql"}
NOT_COMMANDS = {"text": "output or a layout, not a command"}
BLOCK_SECONDS = 600
PIP_LINE = re.compile(r"^pip install .*$", re.MULTILINE)


@dataclass
class Tally:
    """What happened to a page's blocks: how many ran, and the others by the reason they carry."""

    ran: int = 0
    rehearsed: int = 0
    pip_lines_checked: int = 0
    not_run: Counter[str] = field(default_factory=Counter)

    def line(self, page: str) -> str:
        reasons = "; ".join(f"{count} × {reason}" for reason, count in sorted(self.not_run.items()))
        checked = f", {self.pip_lines_checked} pip lines checked" if self.pip_lines_checked else ""
        rehearsed = f", {self.rehearsed} rehearsed" if self.rehearsed else ""
        not_run = f"{sum(self.not_run.values())} not run ({reasons or '-'})"
        return f"{page}: {self.ran} ran{rehearsed}{checked}, {not_run}"


def fenced_blocks(document: Document) -> list[Region]:
    """Every fenced block of the page, with or without an info string, evaluated by `evaluate`."""
    lexer = RawFencedCodeBlockLexer(info_pattern=re.compile(r"(?P<language>[^\n]*)$\n", re.MULTILINE))
    regions = []
    for region in lexer(document):
        region.parsed = (region.lexemes["language"].strip(), str(region.lexemes["source"]))
        region.evaluator = evaluate
        regions.append(region)
    return regions


def comment_marks(
    document: Document,
    directive: str,
    arguments: str,
    parse: Callable[[Region], object],
    evaluator: Evaluator,
) -> list[Region]:
    """A page's `<!-- directive: ... -->` comments, each parsed by `parse`, evaluated by `evaluator`."""
    regions = []
    for region in DirectiveInHTMLCommentLexer(directive, arguments=arguments)(document):
        region.parsed = parse(region)
        region.evaluator = evaluator
        regions.append(region)
    return regions


def databases(document: Document) -> list[Region]:
    """The `<!-- runs-in: ... -->` comments: where the page's next `sql` blocks run."""
    return comment_marks(
        document, "runs-in", ".+?", lambda region: region.lexemes["arguments"].split(), choose_database
    )


def choose_database(example: Example) -> None:
    session: PageSession = example.namespace["session"]
    assert example.parsed[0] in ("duckdb", "postgres"), f"{session.name}: runs-in {example.parsed}"
    session.database = example.parsed


def same_as_marks(document: Document) -> list[Region]:
    """The `<!-- same-as: PATH -->` comments: the next block repeats one that page PATH runs."""
    return comment_marks(
        document, "same-as", ".+?", lambda region: region.lexemes["arguments"].strip(), mark_same_as
    )


def mark_same_as(example: Example) -> None:
    session: PageSession = example.namespace["session"]
    session.same_as = (Path(example.path).parent / example.parsed, example.parsed)


def commands(source: str) -> list[str]:
    """A shell block's command lines, without comments, blank lines or runs of spaces."""
    lines = (re.sub(r"(^|\s)#(\s.*)?$", "", line) for line in source.splitlines())
    return [" ".join(line.split()) for line in lines if line.strip()]


def blocks_run(page: Path) -> list[list[str]]:
    """The commands of each block of `page` that runs: the ones no skip or same-as comment marks."""
    fence = re.compile(r"(<!--[^\n]*-->\s*\n)?```[ \t]*(\w+)[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
    return [
        commands(match.group(3))
        for match in fence.finditer(page.read_text())
        if match.group(2) in COMMANDS and not re.match(r"<!--\s*(skip|same-as):", match.group(1) or "")
    ]


def check_same_as(session: PageSession, source: str, where: str) -> None:
    """The block marked same-as matches a block its page runs; counted as run there, not run again."""
    assert session.same_as is not None
    page, written = session.same_as
    session.same_as = None
    assert page.is_file(), f"{where}: same-as {written}: no such page"
    assert commands(source) in blocks_run(page), (
        f"{where}: not the same commands as any block {written} runs:\n{source}"
    )
    session.tally.not_run[f"the same commands as a block of {page.name}, run there"] += 1


def rehearsals(document: Document) -> list[Region]:
    """The `<!-- rehearsal: sh ... -->` comments, run as shell blocks."""
    return comment_marks(
        document, "rehearsal", "sh", lambda region: ("rehearsal", str(region.lexemes["source"])), evaluate
    )


def parse(path: Path) -> Document:
    return Document.parse(str(path), fenced_blocks, databases, rehearsals, same_as_marks, SkipParser())


def evaluate(example: Example) -> None:
    """Run one block in its page's session (kept in the document's namespace)."""
    session: PageSession = example.namespace["session"]
    language, source = example.parsed
    where = f"{session.name}, line {example.line}"
    if language in NOT_COMMANDS:
        session.tally.not_run[NOT_COMMANDS[language]] += 1
        return
    if language == "rehearsal":
        session.run_shell(source, where)
        session.tally.rehearsed += 1
        return
    assert language in COMMANDS, f"{where}: a `{language or 'plain'}` block that is neither run nor marked"
    if session.same_as is not None:
        check_same_as(session, source, where)
        return
    source = session.with_ports(source)
    if language == "python":
        session.run([sys.executable, "-"], source, where)
    elif language == "sql":
        session.run_sql(source, where)
    else:
        session.run_shell(checked_pip_lines(source, session.tally, where), where)
    session.tally.ran += 1


def extras() -> set[str]:
    pyproject = (REPO / "pyproject.toml").read_text().split("[project.optional-dependencies]")[1]
    return set(re.findall(r"^(\w+) = \[", pyproject, re.MULTILINE))


def checked_pip_lines(script: str, tally: Tally, where: str) -> str:
    """The script with each `pip install` line replaced by `:`, once the extras it names exist."""

    def check(match: re.Match[str]) -> str:
        named = ",".join(re.findall(r"\./nnsql\[([\w,]+)\]", match.group(0))).split(",")
        assert named != [""] and set(named) <= extras(), f"{where}: {match.group(0)}"
        tally.pip_lines_checked += 1
        return ":"

    return PIP_LINE.sub(check, script)


class PageSession:
    """A page's fresh directory, environment and tally; its blocks run one after another."""

    def __init__(self, name: str, directory: Path, env: dict[str, str]) -> None:
        self.name, self.directory, self.tally = name, directory, Tally()
        self.ports = {"8000": str(free_port()), "8001": str(free_port())}
        self.state = directory.parent / f"{directory.name}.exports"
        self.state.write_text("")
        self.env = {**os.environ, "PATH": command_path(), "PYTHONPATH": str(REPO), **env}
        self.database: list[str] = []
        self.same_as: tuple[Path, str] | None = None  # (the page, as written) of a same-as comment
        self.groups: list[int] = []
        # curl answers an HTTP error with a non-zero exit, as a reader would notice it on the screen
        (directory.parent / ".curlrc").write_text("fail-with-body\n")
        self.env["CURL_HOME"] = str(directory.parent)

    def with_ports(self, source: str) -> str:
        return re.sub(r"\b(8000|8001)\b", lambda m: self.ports[m.group(1)], source)

    def run_shell(self, script: str, where: str) -> None:
        """Run the block in bash with the variables earlier blocks exported, and keep its own."""
        state = self.state
        wrapped = f". {state}\n{script}\nexport -p > {state}.new\n"
        self.run(["bash", "-euo", "pipefail", "-c", wrapped], None, where)
        os.replace(f"{state}.new", state)

    def run_sql(self, statements: str, where: str) -> None:
        """Run the statements in the database the page named last, printing what each query returns."""
        assert self.database, f"{where}: a `sql` block with no `<!-- runs-in: ... -->` before it"
        if self.database[0] == "postgres":
            self.run_shell(f"psql \"$DATABASE_URL\" -v ON_ERROR_STOP=1 <<'SQL'\n{statements}SQL", where)
            return
        program = "import duckdb, sys\nprint(duckdb.connect(sys.argv[1]).sql(sys.stdin.read()))\n"
        self.run([sys.executable, "-c", program, self.database[1]], statements, where)

    def run(self, command: list[str], stdin: str | None, where: str) -> None:
        """Run a block in a process group of its own. What it starts in the background (a scorer the
        next blocks call) runs on until the page ends, writing to the block's log, not to a pipe that
        would keep the block from ending."""
        log = self.directory.parent / f"{self.directory.name}.{len(self.groups)}.log"
        with open(log, "w") as output:
            process = subprocess.Popen(
                command,
                cwd=self.directory,
                env=self.env,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            )
        self.groups.append(process.pid)
        try:
            process.communicate(stdin, timeout=BLOCK_SECONDS)
        except subprocess.TimeoutExpired:
            self.stop()
            process.wait()
        assert process.returncode == 0, f"{where} failed (exit {process.returncode}):\n{log.read_text()}"

    def stop(self) -> None:
        """Stop whatever the page's blocks left running."""
        for group in self.groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGTERM)


def command_path() -> str:
    """`nnsql` and `python` as a reader's shell finds them once installed: the environment's bin first."""
    return f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"


def run_page(path: Path, directory: Path, env: dict[str, str]) -> Tally:
    """Run every block of the page at `path` in order in `directory`; return the tally."""
    document = parse(path)
    session = PageSession(path.name, directory, env)
    document.namespace["session"] = session
    try:
        for example in document.examples():
            try:
                example.evaluate()
            except SkipTest as skipped:
                session.tally.not_run[str(skipped)] += 1
    finally:
        session.stop()
    return session.tally
