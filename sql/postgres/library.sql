-- nnsql runtime for PostgreSQL: the layer kernels the generated scoring functions call.
-- Plain PL/pgSQL: no extension, no superuser; works on managed PostgreSQL.

-- PostgreSQL raises where IEEE arithmetic rounds: exp() beyond ±708, and any product or quotient that
-- rounds to 0 ("value out of range: underflow") or to infinity. So, here and in the generated code
-- (docs/numerics.md): exp() arguments are clamped to ±700 (exp(-700) ~ 1e-304 stands for 0: a result
-- moves by < 1e-300), and a factor below 1e-250 in magnitude counts as 0 in a product (its product
-- would be below 1e-250 times the other factor), so no product of two values rounds to 0.

-- Activation over a vector.
CREATE OR REPLACE FUNCTION nnsql.activate(v float8[], activation text)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n    integer := pg_catalog.cardinality(v);
    peak float8;
    total float8 := 0;
BEGIN
    IF activation = 'linear' THEN
        RETURN v;
    ELSIF activation = 'relu' THEN
        FOR i IN 1..n LOOP v[i] := greatest(v[i], 0); END LOOP;
    ELSIF activation = 'sigmoid' THEN
        FOR i IN 1..n LOOP
            IF v[i] >= 0 THEN
                v[i] := 1 / (1 + pg_catalog.exp(-least(v[i], 700)));
            ELSE
                v[i] := pg_catalog.exp(greatest(v[i], -700)) / (1 + pg_catalog.exp(greatest(v[i], -700)));
            END IF;
        END LOOP;
    ELSIF activation = 'tanh' THEN
        FOR i IN 1..n LOOP v[i] := pg_catalog.tanh(v[i]); END LOOP;
    ELSIF activation = 'softmax' THEN
        SELECT pg_catalog.max(e) INTO peak FROM pg_catalog.unnest(v) AS e;
        FOR i IN 1..n LOOP
            v[i] := pg_catalog.exp(greatest(v[i] - peak, -700));
            total := total + v[i];
        END LOOP;
        FOR i IN 1..n LOOP v[i] := v[i] / total; END LOOP;
    ELSE
        RAISE EXCEPTION 'nnsql.activate: unknown activation %', activation;
    END IF;
    RETURN v;
END
$fn$;

-- Dense layer: activation(x · kernel + bias), kernel flattened row-major (inputs x units).
-- Loops input-major and skips zero inputs: image rows are mostly zeros. An input below 1e-250 in
-- magnitude counts as 0: with a weight of 1.4e-45 (float32's smallest; the exporter stores a smaller
-- derived one as 0: export/postgres/store.py) its product could round to 0.
CREATE OR REPLACE FUNCTION nnsql.dense(x float8[], kernel float8[], bias float8[], units integer, activation text)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    h    float8[] := coalesce(bias, pg_catalog.array_fill(0::float8, ARRAY[units]));
    xi   float8;
    base integer;
BEGIN
    FOR i IN 1..cardinality(x) LOOP
        xi := x[i];
        IF xi > 1e-250 OR xi < -1e-250 THEN
            base := (i - 1) * units;
            FOR j IN 1..units LOOP
                h[j] := h[j] + xi * kernel[base + j];
            END LOOP;
        END IF;
    END LOOP;
    RETURN nnsql.activate(h, activation);
END
$fn$;

-- 0-based index of the first value of x that is NaN, infinite or beyond float32's range (the model's
-- input type: a float8 it cannot hold is refused as NaN is), or NULL. NaN is the largest float8 here,
-- so one range test finds all three.
CREATE OR REPLACE FUNCTION nnsql.first_nonfinite(x float8[])
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT (pg_catalog.min(t.i) - 1)::integer FROM pg_catalog.unnest(x) WITH ORDINALITY AS t(e, i)
     WHERE NOT (t.e BETWEEN -3.4028234663852886e38 AND 3.4028234663852886e38)
$fn$;

-- 0-based index of the first value of x that is not a whole number from 0 to bound - 1, or NULL: the
-- check of an integer (token or category) input.
CREATE OR REPLACE FUNCTION nnsql.first_outside(x float8[], bound integer)
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT (pg_catalog.min(t.i) - 1)::integer FROM pg_catalog.unnest(x) WITH ORDINALITY AS t(e, i)
     WHERE t.e < 0 OR t.e >= bound OR t.e <> pg_catalog.floor(t.e)
$fn$;

-- Index of the largest value (0-based), the first on ties, like numpy's argmax.
CREATE OR REPLACE FUNCTION nnsql.argmax(v float8[])
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT (pg_catalog.array_position(v, (SELECT pg_catalog.max(e) FROM pg_catalog.unnest(v) AS e)) - 1)::integer
$fn$;

-- The windows of a convolution or pooling (im2col): y[k] = x[indices[k] + 1], 0 where an index is -1.
CREATE OR REPLACE FUNCTION nnsql.gather(x float8[], indices float8[])
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n integer := pg_catalog.cardinality(indices);
    y float8[] := pg_catalog.array_fill(0::float8, ARRAY[n]);
BEGIN
    FOR k IN 1..n LOOP
        IF indices[k] >= 0 THEN y[k] := x[indices[k]::integer + 1]; END IF;
    END LOOP;
    RETURN y;
END
$fn$;

-- One Dense over each of `patches` consecutive windows of `size` values (a convolution after gather):
-- kernel flattened row-major (size x units); the result is position-major, then the activation.
CREATE OR REPLACE FUNCTION nnsql.patch_dense(
    x float8[], kernel float8[], bias float8[], patches integer, size integer, units integer, activation text
) RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    y    float8[] := pg_catalog.array_fill(0::float8, ARRAY[patches * units]);
    xi   float8;
    base integer;
    out  integer;
BEGIN
    FOR p IN 0..patches - 1 LOOP
        out := p * units;
        IF bias IS NOT NULL THEN
            FOR j IN 1..units LOOP y[out + j] := bias[j]; END LOOP;
        END IF;
        FOR i IN 1..size LOOP
            xi := x[p * size + i];
            IF xi > 1e-250 OR xi < -1e-250 THEN
                base := (i - 1) * units;
                FOR j IN 1..units LOOP y[out + j] := y[out + j] + xi * kernel[base + j]; END LOOP;
            END IF;
        END LOOP;
    END LOOP;
    RETURN nnsql.activate(y, activation);
END
$fn$;

-- y[k] = max of the k-th group of `size` consecutive values (max pooling after gather).
CREATE OR REPLACE FUNCTION nnsql.group_max(x float8[], size integer)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    n integer := pg_catalog.cardinality(x) / size;
    y float8[] := pg_catalog.array_fill(0::float8, ARRAY[n]);
BEGIN
    FOR k IN 0..n - 1 LOOP
        y[k + 1] := x[k * size + 1];
        FOR i IN 2..size LOOP y[k + 1] := greatest(y[k + 1], x[k * size + i]); END LOOP;
    END LOOP;
    RETURN y;
END
$fn$;

-- Elementwise a op b of two vectors of one size: op is 'add', 'sub', 'mul', 'max' or 'min'. A product
-- with a factor below 1e-150 in magnitude is 0 times the factors (0, or NaN where a factor is NaN):
-- otherwise two such factors (an LSTM's saturated gates) could round to 0, which PostgreSQL raises on.
CREATE OR REPLACE FUNCTION nnsql.binary(a float8[], b float8[], op text)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    IF op = 'add' THEN
        FOR i IN 1..cardinality(a) LOOP a[i] := a[i] + b[i]; END LOOP;
    ELSIF op = 'sub' THEN
        FOR i IN 1..cardinality(a) LOOP a[i] := a[i] - b[i]; END LOOP;
    ELSIF op = 'mul' THEN
        FOR i IN 1..cardinality(a) LOOP
            IF pg_catalog.abs(a[i]) < 1e-150 OR pg_catalog.abs(b[i]) < 1e-150 THEN
                a[i] := 0 * a[i] * b[i];
            ELSE
                a[i] := a[i] * b[i];
            END IF;
        END LOOP;
    ELSIF op = 'max' THEN
        FOR i IN 1..cardinality(a) LOOP a[i] := greatest(a[i], b[i]); END LOOP;
    ELSIF op = 'min' THEN
        FOR i IN 1..cardinality(a) LOOP a[i] := least(a[i], b[i]); END LOOP;
    ELSE
        RAISE EXCEPTION 'nnsql.binary: unknown operation %', op;
    END IF;
    RETURN a;
END
$fn$;

-- The rows of `table` (rows x width, row-major) that the whole numbers of x select, one after the other.
CREATE OR REPLACE FUNCTION nnsql.lookup(x float8[], table_ float8[], width integer)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    y    float8[] := pg_catalog.array_fill(0::float8, ARRAY[pg_catalog.cardinality(x) * width]);
    base integer;
BEGIN
    FOR i IN 1..cardinality(x) LOOP
        base := x[i]::integer * width;
        FOR j IN 1..width LOOP y[(i - 1) * width + j] := table_[base + j]; END LOOP;
    END LOOP;
    RETURN y;
END
$fn$;

-- y[i] = x[i] * scale[i] + shift[i] (shift NULL: none); an x below 1e-250 in magnitude counts as 0, as
-- in nnsql.dense.
CREATE OR REPLACE FUNCTION nnsql.affine(x float8[], scale float8[], shift float8[])
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
    FOR i IN 1..cardinality(x) LOOP
        IF pg_catalog.abs(x[i]) < 1e-250 THEN x[i] := 0 * x[i]; END IF;
        x[i] := x[i] * scale[i] + coalesce(shift[i], 0);
    END LOOP;
    RETURN x;
END
$fn$;

-- Keras's Masking(0): y[t] = 1 when some feature of step t (of `steps` equal steps) is not 0, else 0.
CREATE OR REPLACE FUNCTION nnsql.step_mask(x float8[], steps integer)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT
SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
    width integer := pg_catalog.cardinality(x) / steps;
    y     float8[] := pg_catalog.array_fill(0::float8, ARRAY[steps]);
BEGIN
    FOR t IN 0..steps - 1 LOOP
        FOR i IN 1..width LOOP
            IF x[t * width + i] <> 0 THEN y[t + 1] := 1; EXIT; END IF;
        END LOOP;
    END LOOP;
    RETURN y;
END
$fn$;
