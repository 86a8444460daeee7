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


def test_a_block_marked_same_as_is_checked_against_the_other_page_and_not_run_again(tmp_path):
    quick_start = "~~~sh\necho hello > said.txt   # the greeting\n~~~\n"
    (tmp_path / "quick.md").write_text(quick_start.replace("~~~", FENCE))
    path, directory = page(
        tmp_path,
        """<!-- same-as: quick.md -->

~~~sh
# as the quick start says
echo  hello > said.txt
~~~
""",
    )
    tally = run_page(path, directory, {})
    assert tally.ran == 0 and not (directory / "said.txt").exists()
    assert tally.not_run == {"the same commands as a block of quick.md, run there": 1}


@pytest.mark.parametrize(
    ("other", "message"),
    [
        ("~~~sh\necho hello > other.txt\n~~~\n", "not the same commands as any block quick.md runs"),
        (  # the other page's block is itself not run there
            '<!-- skip: next "no" -->\n\n~~~sh\necho hello > said.txt\n~~~\n',
            "not the same commands as any block quick.md runs",
        ),
        (None, "same-as quick.md: no such page"),
    ],
)
def test_a_block_marked_same_as_that_the_other_page_does_not_run_fails(tmp_path, other, message):
    if other is not None:
        (tmp_path / "quick.md").write_text(other.replace("~~~", FENCE))
    path, directory = page(tmp_path, "<!-- same-as: quick.md -->\n\n~~~sh\necho hello > said.txt\n~~~\n")
    with pytest.raises(AssertionError, match=message):
        run_page(path, directory, {})
    assert not (directory / "said.txt").exists()
