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


@pytest.mark.oracle
def test_oracle_pads_a_shorter_flat_sequence_and_refuses_a_longer_one(models, tmp_path):
    """Oracle's packages take UTL_NLA_ARRAY_FLT, a flat VARRAY: the flat form, shorter where the model
    masks, run by the test interpreter of the generated PL/SQL."""
    from tests.export.executors import OracleScriptExecutor
    from tests.export.plsql_interpreter import PlsqlError, load_scripts

    model, path = models["masked"]
    oracle = OracleScriptExecutor(tmp_path)
    assert oracle.export(path, "sensors", "--sequence-length", str(STEPS)) == 0
    package = load_scripts(oracle.directory)
    for sequence in sequences([STEPS, 2]):
        expected = model.predict(padded(sequence)[None], verbose=0)[0]
        assert np.abs(package.run({"readings": sequence.ravel()}) - expected).max() <= 1e-5
    (longer,) = sequences([STEPS + 1])
    with pytest.raises(PlsqlError) as refused:
        package.run({"readings": longer.ravel()})
    assert refused.value.code == -20001
    assert f"at most {STEPS} steps of {FEATURES} values" in refused.value.message
    assert refused.value.message.endswith(f"got {(STEPS + 1) * FEATURES}")


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
