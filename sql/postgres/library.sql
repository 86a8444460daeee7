-- nnsql runtime for PostgreSQL: the layer kernels the generated scoring functions call.
-- Plain PL/pgSQL: no extension, no superuser; works on managed PostgreSQL.

-- Activation over a vector. exp() arguments are clamped to ±700 because PostgreSQL raises on
-- exp overflow/underflow; the clamp changes results by less than 1e-300.
CREATE OR REPLACE FUNCTION nnsql.activate(v float8[], activation text)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
DECLARE
    n    integer := cardinality(v);
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
                v[i] := 1 / (1 + exp(-least(v[i], 700)));
            ELSE
                v[i] := exp(greatest(v[i], -700)) / (1 + exp(greatest(v[i], -700)));
            END IF;
        END LOOP;
    ELSIF activation = 'tanh' THEN
        FOR i IN 1..n LOOP v[i] := tanh(v[i]); END LOOP;
    ELSIF activation = 'softmax' THEN
        SELECT max(e) INTO peak FROM unnest(v) AS e;
        FOR i IN 1..n LOOP
            v[i] := exp(greatest(v[i] - peak, -700));
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
-- Loops input-major and skips zero inputs: image rows are mostly zeros.
CREATE OR REPLACE FUNCTION nnsql.dense(x float8[], kernel real[], bias real[], units integer, activation text)
RETURNS float8[] LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $fn$
DECLARE
    h    float8[] := coalesce(bias::float8[], array_fill(0::float8, ARRAY[units]));
    xi   float8;
    base integer;
BEGIN
    FOR i IN 1..cardinality(x) LOOP
        xi := x[i];
        IF xi <> 0 THEN
            base := (i - 1) * units;
            FOR j IN 1..units LOOP
                h[j] := h[j] + xi * kernel[base + j];
            END LOOP;
        END IF;
    END LOOP;
    RETURN nnsql.activate(h, activation);
END
$fn$;

-- Index of the largest value (0-based), the first on ties, like numpy's argmax.
CREATE OR REPLACE FUNCTION nnsql.argmax(v float8[])
RETURNS integer LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
    SELECT (array_position(v, (SELECT max(e) FROM unnest(v) AS e)) - 1)::integer
$fn$;
