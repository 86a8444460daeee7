-- nnsql registry for PostgreSQL: every exported model version and its tensors.
-- Created on first export inside the export's transaction; safe to run again.
CREATE SCHEMA IF NOT EXISTS nnsql;

CREATE TABLE IF NOT EXISTS nnsql.models (
    name                     text        NOT NULL,
    version                  integer     NOT NULL,
    created                  timestamptz NOT NULL DEFAULT pg_catalog.now(),
    active                   boolean     NOT NULL,
    sha256                   text        NOT NULL,  -- digest of the IR: structure and weights
    input_spec               jsonb       NOT NULL,  -- [{name, shape, dtype}]
    classes                  jsonb       NOT NULL,  -- class labels, index = score()
    source                   text,                  -- the .keras file exported
    metadata                 jsonb,                 -- written by training, if any
    parity_rows              integer     NOT NULL,
    parity_max_abs_diff      float8      NOT NULL,  -- max |p_postgres - p_tensorflow|
    parity_argmax_agreement  float8      NOT NULL,  -- share of answers (score, label, labels) agreeing
    parity_tolerance         float8      NOT NULL,
    parity_sample_source     text        NOT NULL,
    output_kind              text,                  -- probabilities, binary, multilabel, logits or values
    PRIMARY KEY (name, version)
);

-- One row per constant tensor, flattened row-major as in Keras (Dense kernel: inputs x units), in float8:
-- a Keras weight is a float32 number, exact in float8, and a weight the exporter derives (a Normalization's
-- 1/sqrt(variance), W1·W2 of a folded chain) keeps its float64 digits (docs/numerics.md).
CREATE TABLE IF NOT EXISTS nnsql.tensors (
    model    text      NOT NULL,
    version  integer   NOT NULL,
    tensor   text      NOT NULL,  -- '<node>.<role>', e.g. 'hidden.kernel'
    shape    integer[] NOT NULL,
    layout   text      NOT NULL,
    value    float8[]  NOT NULL,
    PRIMARY KEY (model, version, tensor)
);

-- Each version's scoring code as it was installed, and the gate's answer check on a few of its sample
-- rows (export/registry/checks.py): nnsql.activate installs the code again and switches only once the
-- check passes (sql/postgres/activate.sql).
CREATE TABLE IF NOT EXISTS nnsql.installs (
    name        text    NOT NULL,
    version     integer NOT NULL,
    script      text    NOT NULL,
    gate_check  jsonb   NOT NULL,  -- {rows: [{inputs, expected, allowed, answers}]}
    PRIMARY KEY (name, version)
);

-- Registries made by earlier releases are brought up to date, and only then: ALTER TABLE needs the
-- tables' owner, which another exporting role may not be.
DO $upgrade$
DECLARE
    old pg_catalog.regprocedure;
BEGIN
    -- Every function, operator, type and catalog here is named with its schema, pg_catalog: what it
    -- resolves to never depends on a search path (the session's is pinned too, export/postgres/store.py).
    -- Weights in float8 (earlier releases: real[]), by the table's owner or a role with its privileges
    -- only: for another role the exporter refuses in one line (export/postgres/ownership.py). real to
    -- float8 is exact, so the versions already stored score as before. Storage in the same statement: the
    -- rewrite would otherwise compress every row with the type's default storage. The library's real[]
    -- overloads go with it: a version's stored code passing real[] variables then calls the float8[]
    -- ones, exactly as well.
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class c
                 ON c.oid OPERATOR(pg_catalog.=) a.attrelid
                WHERE a.attrelid OPERATOR(pg_catalog.=) 'nnsql.tensors'::pg_catalog.regclass
                  AND a.attname OPERATOR(pg_catalog.=) 'value'::pg_catalog.name
                  AND a.atttypid OPERATOR(pg_catalog.=) 'real[]'::pg_catalog.regtype
                  AND pg_catalog.pg_has_role(c.relowner, 'USAGE')) THEN
        ALTER TABLE nnsql.tensors ALTER COLUMN value TYPE float8[], ALTER COLUMN value SET STORAGE EXTERNAL;
        FOR old IN SELECT p.oid FROM pg_catalog.pg_proc p
                    WHERE p.pronamespace OPERATOR(pg_catalog.=) 'nnsql'::pg_catalog.regnamespace
                      AND p.proname OPERATOR(pg_catalog.=)
                          ANY ('{dense,gather,patch_dense,lookup,affine}'::pg_catalog.name[])
                      AND 'real[]'::pg_catalog.regtype OPERATOR(pg_catalog.=)
                          ANY (p.proargtypes::pg_catalog.oid[])
                      AND pg_catalog.pg_has_role(p.proowner, 'USAGE')
        LOOP
            EXECUTE pg_catalog.format('DROP FUNCTION %s', old);
        END LOOP;
    END IF;
    -- How a version computes its products: plpgsql, cube or plpython (export/postgres/kernels.py).
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                    WHERE attrelid OPERATOR(pg_catalog.=) 'nnsql.models'::pg_catalog.regclass
                      AND attname OPERATOR(pg_catalog.=) 'kernel'::pg_catalog.name AND NOT attisdropped) THEN
        ALTER TABLE nnsql.models ADD COLUMN kernel text;
    END IF;
    -- What the output means (export/ir/kinds.py); versions exported before hold probabilities.
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                    WHERE attrelid OPERATOR(pg_catalog.=) 'nnsql.models'::pg_catalog.regclass
                      AND attname OPERATOR(pg_catalog.=) 'output_kind'::pg_catalog.name AND NOT attisdropped) THEN
        ALTER TABLE nnsql.models ADD COLUMN output_kind text;
    END IF;
    -- Out of line and uncompressed: scoring functions read whole tensors on every call, and decompressing
    -- costs more than fetching (0.77 against 0.06 ms per call for MNIST's 784 x 100 layer, measured).
    IF EXISTS (SELECT 1 FROM pg_catalog.pg_attribute
                WHERE attrelid OPERATOR(pg_catalog.=) 'nnsql.tensors'::pg_catalog.regclass
                  AND attname OPERATOR(pg_catalog.=) 'value'::pg_catalog.name
                  AND attstorage OPERATOR(pg_catalog.<>) 'e'::pg_catalog."char") THEN
        ALTER TABLE nnsql.tensors ALTER COLUMN value SET STORAGE EXTERNAL;
    END IF;
END
$upgrade$;
