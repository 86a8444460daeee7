"""The docs test's own rules, on small pages written here: what runs, what a mark excuses, what fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.pages import run_page

FENCE = "```"


def page(tmp_path: Path, text: str) -> tuple[Path, Path]:
    (tmp_path / "page.md").write_text(text.replace("~~~", FENCE))
    directory = tmp_path / "work"
    directory.mkdir()
    return tmp_path / "page.md", directory


def test_blocks_run_in_order_and_marked_ones_are_counted_with_their_reason(tmp_path):
    path, directory = page(
        tmp_path,
        """~~~sh
export GREETING=hello
echo "$GREETING" > said.txt
~~~

<!-- skip: next "a cluster of the reader's" -->

~~~sh
kubectl apply -f nothing.yaml
~~~

<!-- rehearsal: sh
echo rehearsed > rehearsal.txt
-->

~~~python
from pathlib import Path
assert Path("said.txt").read_text() == "hello\\n"
~~~

<!-- runs-in: duckdb page.duckdb -->

~~~sql
CREATE TABLE t AS SELECT 42 AS answer;
~~~

~~~text
what a command printed
~~~
""",
    )
    tally = run_page(path, directory, {})
    assert tally.ran == 3 and (directory / "page.duckdb").is_file()
    assert tally.rehearsed == 1 and (directory / "rehearsal.txt").is_file()
    assert tally.not_run == {"a cluster of the reader's": 1, "output or a layout, not a command": 1}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("~~~\nplain\n~~~\n", "a `plain` block that is neither run nor marked"),
        ("~~~sql\nSELECT 1;\n~~~\n", "a `sql` block with no `<!-- runs-in: ... -->` before it"),
        ("~~~sh\nfalse\necho never\n~~~\n", "failed (exit 1)"),
        ('~~~sh\npip install "./nnsql[nothing]"\n~~~\n', 'pip install "./nnsql[nothing]"'),
    ],
)
def test_an_unmarked_block_that_does_not_run_fails_the_page(tmp_path, text, message):
    path, directory = page(tmp_path, text)
    with pytest.raises(
        AssertionError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    ):
        run_page(path, directory, {})
