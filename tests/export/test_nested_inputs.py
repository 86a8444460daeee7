"""Inputs the way users hold them: a sequence as one list per step and an image as rows (or rows of
pixels), nested or flat; a sequence shorter than the model's when the model masks, padded inside the
database with the value its Masking layer tests for. Scored in the real databases against Keras on the
padded input (float32 parity: 1e-5); a row the model cannot take is refused in one line naming the
input, the length received and the length allowed."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from tests.export.conftest import DATABASES, executor

STEPS, FEATURES = 6, 3
MASK = -1.0  # not 0: the padding must be the Masking layer's own value
IMAGE = (4, 4, 2)


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A masked GRU over `(None, 3)` readings and a small image classifier, saved once."""
    import keras

    folder = tmp_path_factory.mktemp("nested_models")
    keras.utils.set_random_seed(21)
    readings = keras.Input(shape=(None, FEATURES), name="readings")
    state = keras.layers.GRU(4)(keras.layers.Masking(MASK)(readings))
    masked = keras.Model(readings, keras.layers.Dense(3, activation="softmax")(state))
    masked.save(folder / "masked.keras")
    unmasked_input = keras.Input(shape=(STEPS, FEATURES), name="readings")
    unmasked = keras.Model(
        unmasked_input, keras.layers.Dense(2, activation="softmax")(keras.layers.GRU(3)(unmasked_input))
    )
    unmasked.save(folder / "unmasked.keras")
    pixels = keras.Input(shape=IMAGE, name="pixels")
    hidden = keras.layers.Conv2D(3, 2, activation="relu")(pixels)
    image = keras.Model(pixels, keras.layers.Dense(3, activation="softmax")(keras.layers.Flatten()(hidden)))
    image.save(folder / "image.keras")
    return {
        name: (model, folder / f"{name}.keras")
        for name, model in (("masked", masked), ("unmasked", unmasked), ("image", image))
    }


@pytest.fixture(params=DATABASES)
def database(request, tmp_path):
    return executor(request.param, request, tmp_path)


def sequences(lengths: list[int], seed: int = 3) -> list[np.ndarray]:
    generator = np.random.default_rng(seed)
    return [generator.normal(size=(n, FEATURES)).round(4) for n in lengths]


def padded(sequence: np.ndarray) -> np.ndarray:
    return np.concatenate([sequence, np.full((STEPS - len(sequence), FEATURES), MASK)])


def literal(value: np.ndarray, target: str) -> str:
    """A nested (or flat) array literal in the target's SQL, as a user writes one: `[[...], [...]]` in
    DuckDB, `ARRAY[[...], [...]]` in PostgreSQL."""

    def text(v: np.ndarray) -> str:
        if v.ndim == 1:
            return "[" + ", ".join(repr(float(e)) for e in v) + "]"
        return "[" + ", ".join(text(part) for part in v) + "]"

    return text(value) if target == "duckdb" else f"ARRAY{text(value)}::float8[]"


def scored(database, name: str, value: np.ndarray):
    (row,) = database.query(
        f"SELECT {name}.predict({literal(value, 'duckdb' if database.target == 'duckdb' else 'pg')})"
    )
    return np.asarray(row[0])


def errors(database) -> tuple[type[Exception], ...]:
    import duckdb

    return (duckdb.Error, psycopg.Error)


def test_sequences_nested_or_flat_and_shorter_score_as_keras_and_longer_ones_are_refused(models, database):
    """Keras on the sequence padded with the Masking layer's value; a longer one is refused naming the
    input, the length received and the length allowed."""
    model, path = models["masked"]
    assert database.export(path, "sensors", "--sequence-length", str(STEPS)) == 0
    for sequence in sequences([STEPS, 4, 1]):
        expected = model.predict(padded(sequence)[None], verbose=0)[0]
        for form in (sequence, sequence.ravel()):
            assert np.abs(scored(database, "sensors", form) - expected).max() <= 1e-5
    (longer,) = sequences([STEPS + 1])
    with pytest.raises(
        errors(database), match=rf"sensors: readings must have at most {STEPS} steps .*got {STEPS + 1}"
    ):
        scored(database, "sensors", longer)
    with pytest.raises(
        errors(database),
        match=rf"at most {STEPS} steps of {FEATURES} values.*got {(STEPS + 1) * FEATURES}",
    ):
        scored(database, "sensors", longer.ravel())


# the cube kernel writes PL/pgSQL's checks: its refusals are those of "postgres"
@pytest.mark.parametrize("database", DATABASES[:3], indirect=True)
def test_a_shorter_sequence_is_refused_where_the_model_does_not_mask(models, database):
    _, path = models["unmasked"]
    assert database.export(path, "plain") == 0
    (shorter,) = sequences([STEPS - 1])
    with pytest.raises(errors(database), match=rf"plain: readings must have {STEPS} lists, got {STEPS - 1}"):
        scored(database, "plain", shorter)
    with pytest.raises(
        errors(database), match=rf"must have {STEPS * FEATURES} values, got {(STEPS - 1) * FEATURES}"
    ):
        scored(database, "plain", shorter.ravel())


def test_images_score_the_same_flat_as_rows_or_as_rows_of_pixels(models, database):
    model, path = models["image"]
    assert database.export(path, "shapes") == 0
    image = np.random.default_rng(5).random(IMAGE).round(4)
    expected = model.predict(image[None], verbose=0)[0]
    forms = (image.ravel(), image.reshape(IMAGE[0], -1), image)
    for form in forms:
        assert np.abs(scored(database, "shapes", form) - expected).max() <= 1e-5
    with pytest.raises(
        errors(database), match=r"shapes: pixels: every list at depth 2 must have 8 elements, got"
    ):
        scored(database, "shapes", image.reshape(IMAGE[0], -1)[:, :-1])


def oracle_package(path, name: str, tmp_path, *options: str):
    """The model exported as `--script-only` scripts, installed by the test interpreter of the generated
    PL/SQL (every script parsed by parseora first)."""
    import parseora

    from tests.export.executors import OracleScriptExecutor
    from tests.export.plsql_interpreter import load_scripts

    oracle = OracleScriptExecutor(tmp_path)
    assert oracle.export(path, name, *options) == 0
    for script in sorted(oracle.directory.glob("*.sql")):
        units = parseora.parse(script.read_text(), version="19c")
        assert [error for unit in units for error in unit["errors"]] == [], script.name
    return load_scripts(oracle.directory)


def oracle_refusal(package, inputs: dict) -> str:
    from tests.export.plsql_interpreter import PlsqlError

    with pytest.raises(PlsqlError) as refused:
        package.run(inputs)
    assert refused.value.code == -20001
    return refused.value.message


@pytest.mark.oracle
def test_oracle_takes_a_sequence_flat_or_as_rows_padded_where_the_model_masks(models, tmp_path):
    """`sensors.predict(nnsql_rows(UTL_NLA_ARRAY_FLT(...), ...))`: one array per step, shorter where the
    model masks, padded inside PL/SQL with the Masking layer's value; the flat form as before; a longer
    sequence or a step of the wrong length refused in one line naming the input."""
    from tests.export.plsql_interpreter import Rows

    model, path = models["masked"]
    package = oracle_package(path, "sensors", tmp_path, "--sequence-length", str(STEPS))
    for sequence in sequences([STEPS, 4, 1]):
        expected = model.predict(padded(sequence)[None], verbose=0)[0]
        for form in (Rows(sequence), sequence.ravel()):
            assert np.abs(package.run({"readings": form}) - expected).max() <= 1e-5
        assert package.answer("score", {"readings": Rows(sequence)}) == int(np.argmax(expected))
        assert package.answer("label", {"readings": Rows(sequence)}) == str(int(np.argmax(expected)))
    (longer,) = sequences([STEPS + 1])
    message = oracle_refusal(package, {"readings": Rows(longer)})
    padding = "shorter ones are padded with -1"
    assert message == f"sensors: readings must have at most {STEPS} steps ({padding}), got {STEPS + 1}"
    message = oracle_refusal(package, {"readings": longer.ravel()})
    assert f"at most {STEPS} steps of {FEATURES} values" in message
    assert message.endswith(f"got {(STEPS + 1) * FEATURES}")
    ragged = Rows([[0.5, 1.0, 2.0], [1.0, 2.0]])
    assert oracle_refusal(package, {"readings": ragged}).endswith("must have 3 elements, got one of 2")
    assert oracle_refusal(package, {"readings": Rows([[0.5, 1.0, 2.0], None])}).endswith("got one of NULL")
    assert package.run({"readings": None}) is None


@pytest.mark.oracle
def test_oracle_rows_of_a_model_that_does_not_mask_must_be_whole(models, tmp_path):
    from tests.export.plsql_interpreter import Rows

    model, path = models["unmasked"]
    package = oracle_package(path, "plain", tmp_path)
    (sequence,) = sequences([STEPS], seed=4)
    expected = model.predict(sequence[None], verbose=0)[0]
    assert np.abs(package.run({"readings": Rows(sequence)}) - expected).max() <= 1e-5
    message = oracle_refusal(package, {"readings": Rows(sequence[:-1])})
    assert message == f"plain: readings must have {STEPS} lists, got {STEPS - 1}"


@pytest.mark.oracle
def test_oracle_takes_an_image_as_rows(models, tmp_path):
    """An image as one array per row (the row's pixels, channels last), as flat as before."""
    from tests.export.plsql_interpreter import Rows

    model, path = models["image"]
    package = oracle_package(path, "shapes", tmp_path)
    image = np.random.default_rng(5).random(IMAGE).round(4)
    expected = model.predict(image[None], verbose=0)[0]
    for form in (Rows(image.reshape(IMAGE[0], -1)), image.ravel()):
        assert np.abs(package.run({"pixels": form}) - expected).max() <= 1e-5
    message = oracle_refusal(package, {"pixels": Rows(image.reshape(IMAGE[0], -1)[:, :-1])})
    assert message == "shapes: pixels: every list at depth 2 must have 8 elements, got one of 7"


@pytest.mark.oracle
def test_oracle_rows_of_their_masked_sensor_model_score_as_keras(tmp_path):
    """The sensor GRU of tests/their_models.py (Masking(0), `Input(shape=(None, 3))`): readings of any
    length up to the exported one, as rows, against Keras on the rows padded with 0."""
    import keras

    from tests import their_models
    from tests.export.plsql_interpreter import Rows

    path = their_models.masked_sensor_gru(tmp_path / "sensors")
    model = keras.models.load_model(path, compile=False)
    steps = their_models.STEPS
    package = oracle_package(path, "activity", tmp_path, "--sequence-length", str(steps))
    for row in their_models.padded_sequence_rows(4):
        length = int(np.flatnonzero(np.any(row != 0, axis=1))[-1]) + 1
        expected = model.predict(row[None], verbose=0)[0]
        scored = package.run({"readings": Rows(row[:length])})
        assert np.abs(scored - expected).max() <= 1e-5
        assert (
            package.answer("label", {"readings": Rows(row[:length])})
            == ["walk", "sit", "run"][int(np.argmax(expected))]
        )


def test_a_sample_row_is_held_as_its_steps_without_the_padding_at_its_end():
    from nnsql.export.codegen.inputs import InputForm, as_held, held_rows

    form = InputForm("sensors", "readings", (STEPS, FEATURES), MASK)
    (sequence,) = sequences([2])
    held = as_held(form, padded(sequence).ravel())
    assert held.shape == (2, FEATURES) and np.array_equal(held, sequence)
    assert as_held(form, np.full(STEPS * FEATURES, MASK)).shape == (0, FEATURES)
    unpadded = InputForm("shapes", "pixels", IMAGE)
    image = np.arange(np.prod(IMAGE), dtype=float)
    assert np.array_equal(as_held(unpadded, image), image.reshape(IMAGE))
    assert list(held_rows(5)) == [1, 3]


@pytest.fixture
def sample_store(request, tmp_path):
    """A real store of the target, as the export's parity check uses it."""
    if request.param == "duckdb":
        from nnsql.export.duckdb.store import DuckDBStore

        store = DuckDBStore(tmp_path / "models.duckdb", progress=False)
    else:
        from nnsql.export.postgres.store import PostgresStore

        store = PostgresStore(request.getfixturevalue("postgres_dsn"), progress=False, kernel="plpgsql")
    yield store
    store.close()


@pytest.mark.parametrize(
    "sample_store",
    [
        pytest.param("duckdb", marks=pytest.mark.duckdb),
        pytest.param("postgres", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
def test_the_parity_check_scores_every_other_row_as_users_hold_it(models, sample_store):
    """The staged version's scores of sample rows padded at their ends: the odd rows go in nested and
    without their padding, and every row's answer is Keras's on the padded row."""
    from nnsql.export.compile import to_ir
    from nnsql.export.frontend.model import at_sequence_length

    model, _ = models["masked"]
    graph = to_ir(at_sequence_length(model, STEPS), target=sample_store.target)
    rows = np.stack([padded(s) for s in sequences([1, 2, 3, STEPS, 0, 4], seed=8)]).astype(np.float32)
    with sample_store.session():
        sample_store.stage("sensors", 1, graph)
        scores = sample_store.scores("sensors", {graph.inputs[0].name: rows.reshape(len(rows), -1)})
    assert np.abs(scores - model.predict(rows, verbose=0)).max() <= 1e-5
