"""The parity gate's sample-size control loop (export/publish/budget.py): unit tests with a fake clock, and
the progress lines of a real export."""

from __future__ import annotations

import io
import re

import numpy as np
import pytest

from nnsql.export.errors import ExportError
from nnsql.export.publish.budget import Budget, Outcome, ScoringLoop, multiply_adds, planned_rows


class FakeClock:
    """A fake clock for the control loop's unit tests: time moves only when the fake kernel scores."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeKernel:
    """Scores rows by advancing the fake clock: a fixed cost per call plus a cost per row, which may
    change from a given row on (a kernel that gets slower)."""

    def __init__(self, clock: FakeClock, per_row: float, overhead: float = 0.0, slower_from: int = 0):
        self.clock, self.per_row, self.overhead, self.slower_from = clock, per_row, overhead, slower_from
        self.calls: list[tuple[int, int]] = []

    def __call__(self, start: int, stop: int) -> np.ndarray:
        self.calls.append((start, stop))
        rows = np.arange(start, stop)
        cost = np.where((rows >= self.slower_from) & (self.slower_from > 0), 10 * self.per_row, self.per_row)
        self.clock.now += self.overhead + float(cost.sum())
        return np.stack([rows, -rows], axis=1).astype(np.float64)


def run(per_row: float, available: int = 1000, budget: Budget | None = None, **kernel_options):
    clock = FakeClock()
    kernel = FakeKernel(clock, per_row, **kernel_options)
    stream = io.StringIO()
    loop = ScoringLoop(kernel, available, budget or Budget(), where="fake", clock=clock, stream=stream)
    scores, outcome = loop.run()
    return scores, outcome, kernel, stream.getvalue()


def test_cheap_rows_are_all_scored_in_order():
    scores, outcome, kernel, _ = run(per_row=0.001)
    assert outcome.rows == 1000 and not outcome.limited
    np.testing.assert_array_equal(scores[:, 0], np.arange(1000))  # contiguous batches, in order
    assert kernel.calls[0] == (0, 5)
    assert all(a[1] == b[0] for a, b in zip(kernel.calls, kernel.calls[1:], strict=False))


def test_expensive_rows_are_sized_to_the_budget():
    """PL/pgSQL on the Inclusive Classifier (~0.84 s a row): 1,000 rows would take 14 minutes."""
    _, outcome, _, said = run(per_row=0.84)
    assert outcome.limited and 20 <= outcome.rows < 30
    assert outcome.seconds <= Budget().seconds + 2 * 0.84
    assert "all 1000 would take 14 min" in said and "at least 10 rows" in said
    assert "first" in outcome.describe("random rows") and "20 s parity budget" in outcome.describe("x")


def test_the_minimum_is_kept_beyond_the_share_the_whole_budget_affords():
    """Scoring's half of a 20 s budget affords 5 rows at 1.9 s; the minimum of 10 fits the whole 20 s."""
    _, outcome, _, _ = run(per_row=1.9, budget=Budget(seconds=10.0, whole=20.0))
    assert outcome.rows == Budget().minimum and outcome.seconds == pytest.approx(1.9 * Budget().minimum)


def test_a_model_too_dear_for_the_budget_is_refused_once_the_budget_is_spent():
    """A 28×28 Conv(32)/Conv(64) network at ~6.7 s a row in DuckDB: its first batch of 5 rows ran 489 s on
    a loaded machine. Its cost now sizes the first batch to one row, and the export stops in one line as
    soon as the budget is spent short of the minimum of rows."""
    clock = FakeClock()
    kernel = FakeKernel(clock, per_row=6.7)
    loop = ScoringLoop(kernel, 1000, Budget(estimate=6.0), where="fake", clock=clock, stream=io.StringIO())
    with pytest.raises(ExportError) as refused:
        loop.run()
    assert kernel.calls == [(0, 1), (1, 2), (2, 3)] and clock.now <= Budget().seconds + 6.7
    message = str(refused.value)
    assert "\n" not in message and "3 of the 10 rows took 20 s (6,700 ms a row)" in message
    assert "nnsql export onnx" in message and "--parity-seconds" in message


def test_a_hopeless_model_is_refused_on_its_cost_before_any_row():
    clock = FakeClock()
    kernel = FakeKernel(clock, per_row=100.0)
    loop = ScoringLoop(kernel, 1000, Budget(estimate=100.0), where="fake", clock=clock, stream=io.StringIO())
    with pytest.raises(ExportError, match="the model's cost predicts 100,000 ms a row"):
        loop.run()
    assert kernel.calls == []


@pytest.mark.parametrize(("estimate", "first"), [(None, 5), (0.001, 5), (0.5, 4), (1.9, 1)])
def test_the_first_batch_is_sized_from_the_models_cost(estimate, first):
    _, _, kernel, _ = run(per_row=0.01, budget=Budget(estimate=estimate))
    assert kernel.calls[0] == (0, first)


def test_multiply_adds_grow_with_layers_and_steps():
    """A Dense layer costs its kernel's size; a recurrent layer its step's multiply-adds once per step."""
    import keras

    from nnsql.export.compile import to_ir

    def cost(steps: int, units: int = 6, features: int = 3) -> int:
        inputs = keras.Input((steps, features))
        outputs = keras.layers.Dense(2, activation="softmax")(keras.layers.LSTM(units)(inputs))
        return multiply_adds(to_ir(keras.Model(inputs, outputs), target="duckdb"))

    per_step = 4 * 6 * (3 + 6)  # four gates, each a (features + units) × units product
    assert cost(20) - cost(10) >= 10 * per_step
    assert cost(10) >= 10 * per_step + 6 * 2


@pytest.mark.duckdb
def test_an_interrupted_query_is_one_line(capsys):
    import threading

    import duckdb

    from nnsql.export.cli import run as run_cli

    connection = duckdb.connect()
    timer = threading.Timer(0.5, connection.interrupt)

    def body() -> int:
        timer.start()
        connection.execute("SELECT sum(a * b) FROM range(100000) x(a), range(100000) y(b)").fetchall()
        return 0

    try:
        assert run_cli(body) == 130
    finally:
        timer.cancel()
        timer.join()
        connection.close()
    err = capsys.readouterr().err.strip()
    assert err.startswith("interrupted:") and "\n" not in err and "nothing was published" in err


def dear_convolutions(path):
    """Two 3×3 convolutions over an 80×80×8 image, 128 then 256 filters: ~1.8 G multiply-adds a row."""
    import keras

    keras.utils.set_random_seed(3)
    model = keras.Sequential(
        [
            keras.Input((80, 80, 8)),
            keras.layers.Conv2D(128, 3, activation="relu"),
            keras.layers.Conv2D(256, 3, activation="relu"),
            keras.layers.GlobalAveragePooling2D(),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.save(path)
    return path


@pytest.mark.duckdb
def test_a_model_too_dear_is_refused_before_scoring_and_the_published_one_kept(
    cern_mlp_path, tmp_path, capsys
):
    """Its cost predicts ~20 s a row (1.8 G multiply-adds): refused before Keras and the reference score a
    sample row."""
    from nnsql.export.duckdb.__main__ import main as export_duckdb

    args = ["--db", str(tmp_path / "m.duckdb"), "--name", "mnist", "--quiet"]
    assert export_duckdb(["--model", str(cern_mlp_path), *args, "--sample-rows", "20"]) == 0
    capsys.readouterr()
    dear = dear_convolutions(tmp_path / "dear.keras")
    assert export_duckdb(["--model", str(dear), *args, "--parity-seconds", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: parity on duckdb: the model's cost predicts") and "\n" not in err
    assert "nnsql export onnx" in err and "--parity-seconds" in err
    import duckdb

    with duckdb.connect(str(tmp_path / "m.duckdb"), read_only=True) as con:
        assert con.execute("SELECT version FROM nnsql.models WHERE active").fetchall() == [(1,)]


def test_fewer_rows_than_the_minimum_are_all_scored():
    _, outcome, _, _ = run(per_row=2.5, available=Budget().minimum - 3)
    assert outcome.rows == Budget().minimum - 3 and not outcome.limited


def test_a_fixed_cost_per_call_is_paid_by_few_calls():
    """DuckDB plans a large macro query in ~0.7 s whatever the rows: the first batch overstates a row's
    cost 100-fold; once two calls show the fixed cost, the rest is scored in one call (a tenth of the
    budget at the latest rate holds it), not in batches that double and pay the 0.7 s each time."""
    _, outcome, kernel, _ = run(per_row=0.001, overhead=0.7)
    sizes = [stop - start for start, stop in kernel.calls]
    assert outcome.rows == 1000 and sizes == [5, 10, 985]
    assert outcome.seconds <= Budget().seconds


def test_without_a_fixed_cost_no_batch_takes_more_than_a_tenth_of_the_budget():
    """A row's cost alone: after the two timed batches, each takes a tenth of the budget's time."""
    _, outcome, kernel, _ = run(per_row=0.004)
    sizes = [stop - start for start, stop in kernel.calls]
    assert sizes == [5, 10, 500, 485] and Budget().seconds / 10 == 500 * 0.004
    assert outcome.rows == 1000


def test_a_kernel_that_slows_down_is_stopped_early():
    _, outcome, _, _ = run(per_row=0.01, slower_from=300)
    assert outcome.limited and outcome.rows > 300
    assert outcome.seconds <= Budget().seconds * 1.5


def test_the_estimate_is_said_before_the_rest_is_scored():
    clock = FakeClock()
    stream = io.StringIO()
    seen_at_second_call: list[str] = []
    kernel = FakeKernel(clock, per_row=0.5)

    def score(start: int, stop: int) -> np.ndarray:
        if start > 0 and not seen_at_second_call:
            seen_at_second_call.append(stream.getvalue())
        return kernel(start, stop)

    ScoringLoop(score, 1000, Budget(), where="fake", clock=clock, stream=stream).run()
    assert re.search(r"5 rows took 2\.50 s \(500\.0 ms a row\); scoring \d+ of 1000", seen_at_second_call[0])


def test_quiet_says_nothing():
    clock = FakeClock()
    stream = io.StringIO()
    loop = ScoringLoop(FakeKernel(clock, 0.5), 100, Budget(), where="x", clock=clock, stream=stream)
    loop.progress = False
    loop.run()
    assert stream.getvalue() == ""


@pytest.mark.parametrize(
    ("scored", "elapsed", "rate", "expected"),
    [(5, 1.0, 0.1, 195), (5, 30.0, 0.1, 10), (50, 30.0, 0.1, 50), (5, 1.0, 0.0, 1000), (5, 1.0, 1e-6, 1000)],
)
def test_control_law(scored, elapsed, rate, expected):
    assert planned_rows(scored, elapsed, rate, 1000, Budget()) == expected


def test_outcome_says_nothing_extra_when_every_row_was_scored():
    assert Outcome(10, 10, 1.0, Budget()).describe("the test split") == "the test split"


@pytest.mark.duckdb
def test_an_export_shows_its_estimate_and_progress_bars(cern_mlp_path, tmp_path, capsys):
    """Not a timing assertion: the lines a user watches appear, in order, on a real export."""
    from nnsql.export.duckdb.__main__ import main as export_duckdb

    args = ["--model", str(cern_mlp_path), "--db", str(tmp_path / "m.duckdb"), "--name", "mnist"]
    assert export_duckdb(args) == 0
    err = capsys.readouterr().err
    weights = err.index("mnist v1: weights")
    timing = err.index("parity on duckdb: timing the first 5 of 1000 sample rows")
    estimate = re.search(r"parity on duckdb: 5 rows took [\d.]+ s .*; scoring \d+ of 1000 sample rows", err)
    assert estimate and weights < timing < estimate.start()
    bar = re.search(r"parity on duckdb: +\d+%.*\| *\d+/\d+ \[[\d:]+<[\d:]+", err[estimate.end() :])
    assert bar, err[-500:]  # tqdm's [elapsed<remaining] is the ETA


def test_the_answers_are_checked_on_the_rows_their_share_of_the_budget_affords():
    """Each answer reruns the network: on a slow target (0.84 s a row) the answers took 25 s on 10 rows
    whatever the budget; they now get the rows their half affords, at least ANSWER_MINIMUM."""
    from nnsql.export.publish.pipeline import ANSWER_MINIMUM, ANSWER_ROWS, answer_rows

    slow = Outcome(rows=10, available=1000, seconds=8.4, budget=Budget(10.0))
    assert answer_rows(slow, 10.0, 3) == ANSWER_MINIMUM  # 10 s / (0.84 s × 3) = 3.97 rows
    fast = Outcome(rows=1000, available=1000, seconds=2.0, budget=Budget(10.0))
    assert answer_rows(fast, 10.0, 3) == ANSWER_ROWS
    hundred = Outcome(rows=100, available=100, seconds=0.1, budget=Budget(10.0))
    assert answer_rows(hundred, 10.0, 3) == 33  # no dearer than scoring was
    few = Outcome(rows=3, available=3, seconds=0.0, budget=Budget(10.0))
    assert answer_rows(few, 10.0, 3) == 3


def test_a_fixed_cost_per_call_does_not_shrink_the_batches():
    """The field-sized MNIST CNN in DuckDB on a loaded machine: ~1 s a query (its weights), ~30 ms a
    row. A row's cost measured with the call's fixed cost in it shrank the batches to one row each, every
    one paying that second again (15 rows): the calls' fixed cost is told apart from a row's."""
    budget = Budget(seconds=10.0, whole=20.0, estimate=0.25)
    _, outcome, kernel, _ = run(per_row=0.03, overhead=1.0, budget=budget)
    sizes = [stop - start for start, stop in kernel.calls]
    assert outcome.rows >= 100 and outcome.seconds <= budget.seconds and max(sizes) >= 30
