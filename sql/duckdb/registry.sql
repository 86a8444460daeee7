-- nnsql registry for DuckDB: every exported model version and its tensors.
-- Created on first export; safe to run again.
CREATE SCHEMA IF NOT EXISTS nnsql;

CREATE TABLE IF NOT EXISTS nnsql.models (
    name                     VARCHAR   NOT NULL,
    version                  INTEGER   NOT NULL,
    created                  TIMESTAMP NOT NULL DEFAULT current_timestamp,
    active                   BOOLEAN   NOT NULL,
    sha256                   VARCHAR   NOT NULL,  -- digest of the IR: structure and weights
    input_spec               VARCHAR   NOT NULL,  -- JSON: [{name, shape, dtype}]
    classes                  VARCHAR   NOT NULL,  -- JSON: class labels, index = score()
    source                   VARCHAR,             -- the .keras file exported
    metadata                 VARCHAR,             -- JSON written by training, if any
    parity_rows              INTEGER   NOT NULL,
    parity_max_abs_diff      DOUBLE    NOT NULL,  -- max |p_duckdb - p_tensorflow|
    parity_argmax_agreement  DOUBLE    NOT NULL,  -- share of answers (score, label, labels) agreeing
    parity_tolerance         DOUBLE    NOT NULL,
    parity_sample_source     VARCHAR   NOT NULL,
    output_kind              VARCHAR,             -- probabilities, binary, multilabel, logits or values
    PRIMARY KEY (name, version)
);
-- Registries of releases before output kinds (their versions are all probabilities).
ALTER TABLE nnsql.models ADD COLUMN IF NOT EXISTS output_kind VARCHAR;

-- One row per constant tensor, flattened row-major in the layout the generated macros read.
CREATE TABLE IF NOT EXISTS nnsql.tensors (
    model    VARCHAR   NOT NULL,
    version  INTEGER   NOT NULL,
    tensor   VARCHAR   NOT NULL,  -- '<node>.<role>', e.g. 'hidden.kernel'
    shape    INTEGER[] NOT NULL,  -- shape of `value` as laid out
    layout   VARCHAR   NOT NULL,  -- e.g. 'units x inputs (kernel transposed)'
    value    DOUBLE[]  NOT NULL,
    PRIMARY KEY (model, version, tensor)
);

-- Each version's scoring code as it was installed, and the gate's answer check on a few of its sample
-- rows (export/registry/checks.py): `nnsql models activate` installs the code again and switches only
-- once the check passes.
CREATE TABLE IF NOT EXISTS nnsql.installs (
    name        VARCHAR NOT NULL,
    version     INTEGER NOT NULL,
    script      VARCHAR NOT NULL,
    gate_check  VARCHAR NOT NULL,  -- JSON: {rows: [{inputs, expected, allowed, answers}]}
    PRIMARY KEY (name, version)
);
