-- nnsql registry for PostgreSQL: every exported model version and its tensors.
-- Created on first export inside the export's transaction; safe to run again.
CREATE SCHEMA IF NOT EXISTS nnsql;

CREATE TABLE IF NOT EXISTS nnsql.models (
    name                     text        NOT NULL,
    version                  integer     NOT NULL,
    created                  timestamptz NOT NULL DEFAULT now(),
    active                   boolean     NOT NULL,
    sha256                   text        NOT NULL,  -- digest of the IR: structure and weights
    input_spec               jsonb       NOT NULL,  -- [{name, shape, dtype}]
    classes                  jsonb       NOT NULL,  -- class labels, index = score()
    source                   text,                  -- the .keras file exported
    metadata                 jsonb,                 -- written by training, if any
    parity_rows              integer     NOT NULL,
    parity_max_abs_diff      float8      NOT NULL,  -- max |p_postgres - p_tensorflow|
    parity_argmax_agreement  float8      NOT NULL,
    parity_tolerance         float8      NOT NULL,
    parity_sample_source     text        NOT NULL,
    PRIMARY KEY (name, version)
);
-- How the version computes its products: plpgsql, cube or plpython (export/postgres/kernels.py).
ALTER TABLE nnsql.models ADD COLUMN IF NOT EXISTS kernel text;

-- One row per constant tensor, flattened row-major as in Keras (Dense kernel: inputs x units).
CREATE TABLE IF NOT EXISTS nnsql.tensors (
    model    text      NOT NULL,
    version  integer   NOT NULL,
    tensor   text      NOT NULL,  -- '<node>.<role>', e.g. 'hidden.kernel'
    shape    integer[] NOT NULL,
    layout   text      NOT NULL,
    value    real[]    NOT NULL,
    PRIMARY KEY (model, version, tensor)
);
-- Out of line and uncompressed: scoring functions read whole tensors on every call, and decompressing
-- costs more than fetching (measured on MNIST's 784 x 100 kernel).
ALTER TABLE nnsql.tensors ALTER COLUMN value SET STORAGE EXTERNAL;
