"""How many sample rows the parity gate scores on a target, chosen by what a row costs there.

A row's cost varies by orders of magnitude between targets and kernels: PostgreSQL scores CERN's Inclusive
Classifier in ~16 ms a row with PL/Python and ~0.8 s with PL/pgSQL, so a fixed count of 1,000 rows takes
16 s on one and 14 minutes on the other. The gate therefore scores a small first batch, measures it, and
sizes the rest to a time budget (`--parity-seconds`), keeping a stated minimum of rows. The first batch
is sized from the model's cost (multiply-adds per row), and a model that cannot score the minimum within
the budget is refused in one line: before any row when its cost predicts it, else once the budget is spent.

It is a small control loop: after each batch the plan is revised from the cost of a row so far, or of the
latest batch's rows if they cost more (a kernel that turns slower is caught at once, one that speeds up is
followed smoothly); batches double until two calls of different sizes show a call's fixed cost (DuckDB
plans a large macro query in ~0.7 s whatever the rows), then take as many rows as the plan allows, each
batch planned to take at most a tenth of the budget (or the fixed cost, if longer), so that few calls
pay the fixed cost. The first estimate is printed before the rest is scored, then a progress bar with an
ETA follows.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

import numpy as np
from tqdm import tqdm

from ..errors import ExportError
from ..ir import graph as ir

DEFAULT_SECONDS = 20.0  # the parity step's share of a 60 s export
MINIMUM_ROWS = 10  # every zero_padded pattern and group at scale (samples.py): scored, or the model refused
# The minimum of rows is scored whatever the budget when it takes no longer than this: a refusal is for a
# model whose rows cost seconds each, not for a database that plans a query in one.
GRACE_SECONDS = 10.0
FIRST_BATCH = 5  # timed to plan the rest, or fewer where the model's cost says a row is dear
BATCHES_PER_BUDGET = 10  # a batch is planned to take at most this fraction of the budget


@dataclass(frozen=True)
class Budget:
    seconds: float = DEFAULT_SECONDS
    minimum: int = MINIMUM_ROWS
    first_batch: int = FIRST_BATCH
    # the seconds of --parity-seconds these are a share of (the rest checks the answers), when a share
    whole: float | None = None
    # a row's seconds as the model's cost predicts them (row_seconds), when known
    estimate: float | None = None

    @property
    def total(self) -> float:
        """The whole --parity-seconds."""
        return self.seconds if self.whole is None else self.whole

    @property
    def minimum_seconds(self) -> float:
        """What the minimum of rows may take before the model is refused: the whole budget, and never
        less than GRACE_SECONDS (a database's fixed cost of a query alone may exceed a tiny budget)."""
        return max(self.total, GRACE_SECONDS)

    def first(self, available: int) -> int:
        """Rows of the first, timed batch: FIRST_BATCH, or as many as a tenth of the budget affords at
        the estimated cost of a row (at least one), so a dear model shows its cost in one row's time."""
        rows = self.first_batch
        if self.estimate:
            rows = min(rows, max(1, int(self.seconds / BATCHES_PER_BUDGET / self.estimate)))
        return min(rows, available)

    def says(self) -> str:
        """The budget in the words of its option."""
        if self.whole is None or self.whole == self.seconds:
            return f"the {self.seconds:g} s parity budget (--parity-seconds)"
        return (
            f"{self.seconds:g} s of the {self.whole:g} s parity budget (--parity-seconds; the rest: answers)"
        )


@dataclass(frozen=True)
class Outcome:
    """What the gate scored: the first `rows` of `available` sample rows, in `seconds`."""

    rows: int
    available: int
    seconds: float
    budget: Budget

    @property
    def limited(self) -> bool:
        return self.rows < self.available

    def describe(self, source: str) -> str:
        """The sample source as recorded and reported, saying when the budget cut the rows."""
        if not self.limited:
            return source
        return f"{source}; first {self.rows} of {self.available} scored, sized to {self.budget.says()}"


def refuse_dear(graph: ir.Graph, target: str, seconds: float) -> None:
    """refuse_predicted for `graph` on `target` within `seconds`, before the sample rows are scored by
    Keras and the float64 reference (which takes minutes for a large CNN)."""
    refuse_predicted(Budget(seconds=seconds, estimate=row_seconds(graph, target)), target)


def refuse_predicted(budget: Budget, where: str, available: int = MINIMUM_ROWS) -> None:
    """One line, before any row is scored, when the model's cost predicts that the rows the check cannot
    do without (the minimum) would take longer than the whole parity budget even at a tenth of the
    estimate (ESTIMATE_MARGIN: the cost of a multiply-add varies that much between layers)."""
    needed = min(budget.minimum, available)
    if budget.estimate is None or budget.estimate / ESTIMATE_MARGIN * needed <= budget.minimum_seconds:
        return
    raise too_dear(f"the model's cost predicts {1000 * budget.estimate:,.0f} ms a row", needed, budget, where)


def too_dear(cost: str, needed: int, budget: Budget, where: str) -> ExportError:
    """The refusal of a model whose minimum of rows does not fit the parity budget, and the way out."""
    return ExportError(
        f"parity on {where}: {cost}; the {needed} rows the check needs do not fit "
        f"{budget.minimum_seconds:g} s (--parity-seconds {budget.total:g}): this model is too dear to score "
        "in SQL here; publish it with `nnsql export onnx`, or raise --parity-seconds"
    )


def planned_rows(
    scored: int, elapsed: float, rate: float, available: int, budget: Budget, fixed: float = 0.0
) -> int:
    """The control law: rows to score in all, given `scored` rows in `elapsed` seconds, the latest cost
    of a row (`rate`, seconds) and the fixed cost of a call (`fixed`, seconds: one more call pays it).
    Never fewer than the minimum (or all rows, if fewer), never fewer than already scored, never more
    than available."""
    floor = min(available, max(budget.minimum, scored))
    if rate <= 0:
        return available
    affordable = scored + int(max(budget.seconds - elapsed - fixed, 0.0) / rate)
    return max(floor, min(available, affordable))


def counted(count: int) -> str:
    """'1 row', '5 rows'."""
    return f"{count} row" if count == 1 else f"{count} rows"


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


class ScoringLoop:
    """Scores rows [0, n) in batches through `score(start, stop)` within a budget (see the module)."""

    def __init__(
        self,
        score: Callable[[int, int], np.ndarray],
        available: int,
        budget: Budget,
        *,
        where: str,
        progress: bool = True,
        clock: Callable[[], float] = time.perf_counter,
        stream: TextIO | None = None,
    ) -> None:
        self.score = score
        self.available = available
        self.budget = budget
        self.where = where
        self.progress = progress
        self.clock = clock
        self.stream = stream if stream is not None else sys.stderr
        self.parts: list[np.ndarray] = []
        self.scored = 0
        self.calls: list[tuple[int, float]] = []  # (rows, seconds) of each call

    def batch(self, rows: int) -> float:
        """Score the next `rows` rows; returns the seconds they took."""
        started = self.clock()
        self.parts.append(np.asarray(self.score(self.scored, self.scored + rows)))
        self.scored += rows
        self.calls.append((rows, self.clock() - started))
        return self.calls[-1][1]

    def fixed_cost(self) -> float:
        """The seconds a call costs whatever its rows (a database plans the query, reads the weights),
        fitted to the calls so far by least squares: 0 until two calls of different sizes, and never more
        than the cheapest call took."""
        rows = np.array([n for n, _ in self.calls], dtype=float)
        seconds = np.array([t for _, t in self.calls])
        if len(set(rows)) < 2:
            return 0.0
        slope, intercept = np.polyfit(rows, seconds, 1)
        return float(np.clip(intercept, 0.0, seconds.min())) if slope > 0 else 0.0

    def row_rate(self, fixed: float) -> float:
        """A row's seconds, the calls' fixed cost set apart: the latest batch's if it cost more (a kernel
        that turns slower is caught at once), else the average so far."""
        (last_rows, last_seconds), calls = self.calls[-1], len(self.calls)
        average = (sum(t for _, t in self.calls) - fixed * calls) / self.scored
        return max((last_seconds - fixed) / last_rows, average, 1e-9)

    def batch_cap(self, rate: float, fixed: float = 0.0) -> int:
        """Rows a batch may hold: about a tenth of the budget at the latest rate (or as long as a call's
        fixed cost, if longer: each call pays it again), so that the bar moves and a kernel that turns
        slower mid-way overshoots the budget by little."""
        if rate <= 0:
            return self.available
        return max(1, int(max(self.budget.seconds / BATCHES_PER_BUDGET, fixed) / rate))

    def growth(self, last: int) -> int:
        """Rows the next batch may grow to: twice the last until two calls of different sizes are timed
        (the first batch's time hides any fixed cost of a call), then any number: the batch cap bounds
        the batch's time, and each further call would pay the fixed cost again."""
        timed = {rows for rows, _ in self.calls}
        return self.available if len(timed) >= 2 else 2 * last

    def say(self, text: str) -> None:
        if self.progress:
            print(text, file=self.stream, flush=True)

    def run(self) -> tuple[np.ndarray, Outcome]:
        started = self.clock()
        refuse_predicted(self.budget, self.where, self.available)
        first = self.budget.first(self.available)
        self.say(f"parity on {self.where}: timing the first {first} of {self.available} sample rows")
        seconds = self.batch(first)
        rate = seconds / first
        self.check_minimum(seconds)
        plan = planned_rows(self.scored, seconds, rate, self.available, self.budget)
        self.announce(first, seconds, plan)
        bar = tqdm(
            total=plan,
            initial=self.scored,
            desc=f"parity on {self.where}",
            unit="row",
            disable=not self.progress or plan == self.scored,
            file=self.stream,
        )
        last = first
        with bar:
            fixed = 0.0
            while self.scored < plan:
                size = min(plan - self.scored, self.growth(last), self.batch_cap(rate, fixed))
                self.batch(size)
                bar.update(size)
                elapsed = self.clock() - started
                fixed = self.fixed_cost()
                last, rate = size, self.row_rate(fixed)
                self.check_minimum(elapsed)
                plan = planned_rows(self.scored, elapsed, rate, self.available, self.budget, fixed)
                if bar.total != plan:
                    bar.total = plan
                    bar.refresh()
        outcome = Outcome(self.scored, self.available, self.clock() - started, self.budget)
        return np.concatenate(self.parts, axis=0), outcome

    def check_minimum(self, elapsed: float) -> None:
        """Refuses, in one line, a model whose minimum of rows is not scored within the whole budget:
        the time lost is the budget and one batch, however dear a row is."""
        needed = min(self.budget.minimum, self.available)
        if self.scored < needed and elapsed > self.budget.minimum_seconds:
            cost = (
                f"{self.scored} of the {needed} rows took {duration(elapsed)} "
                f"({1000 * elapsed / self.scored:,.0f} ms a row)"
            )
            raise too_dear(cost, needed, self.budget, self.where)

    def announce(self, first: int, seconds: float, plan: int) -> None:
        """The estimate, printed before the rest is scored."""
        rate = seconds / first
        line = (
            f"parity on {self.where}: {counted(first)} took {seconds:.2f} s ({1000 * rate:.1f} ms a row); "
            f"scoring {plan} of {self.available} sample rows, about {duration(rate * (plan - first))} more"
        )
        if plan < self.available:
            line += (
                f" (all {self.available} would take {duration(rate * self.available)}: scoring is sized to "
                f"{self.budget.says()}; at least {self.budget.minimum} rows)"
            )
        self.say(line)


# How far a row's estimated cost (row_seconds) may overstate its measured one: the cost of a multiply-add
# varies that much between layers. A model is refused on its estimate alone only
# when even this fraction of it makes the minimum of rows exceed the budget.
ESTIMATE_MARGIN = 10.0
# Seconds one multiply-add costs in a target's SQL (docs/export-time.md): DuckDB measured on a 300-unit
# MLP and a 28×28 CNN, PostgreSQL's kernels on the Inclusive Classifier (8.3 M multiply-adds: ~0.8 s a
# row with PL/pgSQL, ~16 ms with PL/Python). The first batch is sized from them and a hopeless model
# refused before scoring; a target not measured gets neither.
SECONDS_PER_MULTIPLY_ADD = {"duckdb": 6e-7, "postgres+plpgsql": 1e-7, "postgres+plpython": 2e-9}


def multiply_adds(graph: ir.Graph) -> int:
    """Multiply-adds (or, for the nodes that multiply nothing, values produced) to score one row: the
    model's cost, whatever the target."""
    total = 0
    for node in graph.nodes:
        if isinstance(node, ir.Dense | ir.PatchDense):
            patches = node.patches if isinstance(node, ir.PatchDense) else 1
            total += patches * node.in_features * node.units
        elif isinstance(node, ir.Scan):
            total += node.steps * multiply_adds(node.body)
        else:
            total += graph.size_of(node.name)
    return total


# ... except the multiply-adds of Dense and convolution kernels outside a loop, where a target computes
# them with one dot product per unit (and window): DuckDB measured on a 28×28 Conv 32 / Conv 64 CNN and
# its Dense(128) (2.5e-9 to 4e-9 s of CPU a multiply-add, some 3 times that in wall time on a loaded
# machine). A recurrent step's stay at the rate above.
KERNEL_SECONDS_PER_MULTIPLY_ADD = {"duckdb": 1e-8}


def kernel_multiply_adds(graph: ir.Graph) -> int:
    """The multiply-adds of the graph's Dense and convolution kernels outside a loop."""
    return sum(
        (node.patches if isinstance(node, ir.PatchDense) else 1) * node.in_features * node.units
        for node in graph.nodes
        if isinstance(node, ir.Dense | ir.PatchDense)
    )


def row_seconds(graph: ir.Graph, target: str) -> float | None:
    """A row's seconds in `target` ('duckdb', 'postgres+plpgsql', ...) as the model's cost predicts them;
    None for a target not measured."""
    rate = SECONDS_PER_MULTIPLY_ADD.get(target)
    if rate is None:
        return None
    kernels = kernel_multiply_adds(graph)
    kernel_rate = KERNEL_SECONDS_PER_MULTIPLY_ADD.get(target, rate)
    return rate * (multiply_adds(graph) - kernels) + kernel_rate * kernels


def score_within_budget(
    score: Callable[[int, int], np.ndarray],
    available: int,
    budget: Budget,
    *,
    where: str,
    progress: bool = True,
) -> tuple[np.ndarray, Outcome]:
    """Scores the first rows of `available` as the budget allows; returns their scores and the outcome."""
    return ScoringLoop(score, available, budget, where=where, progress=progress).run()


def rows_of(inputs: dict[str, np.ndarray], start: int, stop: int) -> dict[str, np.ndarray]:
    """Rows [start, stop) of every input."""
    return {name: values[start:stop] for name, values in inputs.items()}
