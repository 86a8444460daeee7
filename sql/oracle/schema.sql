-- nnsql storage for Oracle (19c to 23ai): registry, tensors, and the row types of the batch path.
-- Idempotent: every statement tolerates "already exists". Run as the owning user.
-- UTL_NLA_ARRAY_FLT is Oracle's VARRAY(1000000) OF BINARY_FLOAT; tensors over 1,000,000 values are
-- stored in several chunks (whole output units per chunk).
BEGIN
    EXECUTE IMMEDIATE q'[
        CREATE TABLE nnsql_models (
            name                     VARCHAR2(128)  NOT NULL,
            version                  NUMBER(10)     NOT NULL,
            created                  TIMESTAMP      DEFAULT SYSTIMESTAMP NOT NULL,
            active                   CHAR(1)        NOT NULL CHECK (active IN ('Y', 'N')),
            sha256                   VARCHAR2(64)   NOT NULL,
            input_spec               CLOB           NOT NULL,
            classes                  CLOB           NOT NULL,
            source                   VARCHAR2(4000),
            metadata                 CLOB,
            parity_rows              NUMBER(10)     NOT NULL,
            parity_max_abs_diff      BINARY_DOUBLE  NOT NULL,
            parity_argmax_agreement  BINARY_DOUBLE  NOT NULL,
            parity_tolerance         BINARY_DOUBLE  NOT NULL,
            parity_sample_source     VARCHAR2(400)  NOT NULL,
            output_kind              VARCHAR2(20),
            CONSTRAINT nnsql_models_pk PRIMARY KEY (name, version)
        )]';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -955 THEN RAISE; END IF;
END;
/
-- What a version's output means (probabilities, binary, multilabel, logits, values): registries made
-- before output kinds gain the column (their versions are probabilities).
BEGIN
    EXECUTE IMMEDIATE 'ALTER TABLE nnsql_models ADD (output_kind VARCHAR2(20))';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -1430 THEN RAISE; END IF;
END;
/
BEGIN
    EXECUTE IMMEDIATE q'[
        CREATE TABLE nnsql_tensors (
            model    VARCHAR2(128)  NOT NULL,
            version  NUMBER(10)     NOT NULL,
            tensor   VARCHAR2(256)  NOT NULL,
            chunk    NUMBER(10)     NOT NULL,
            shape    VARCHAR2(200)  NOT NULL,
            layout   VARCHAR2(200)  NOT NULL,
            value    UTL_NLA_ARRAY_FLT NOT NULL,
            CONSTRAINT nnsql_tensors_pk PRIMARY KEY (model, version, tensor, chunk)
        ) VARRAY value STORE AS SECUREFILE LOB]';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -955 THEN RAISE; END IF;
END;
/
-- The answer check each version was published with, kept for activating it again later (nnsql_admin):
-- per sample row its inputs (every input's values one after the other), what Keras's model.predict
-- returned (the float64 reference on a row at scale), the row's tolerance and near-tie margin, and the
-- answers a Keras user reads (NULL where the row is a near-tie, or the kind does not offer the function).
BEGIN
    EXECUTE IMMEDIATE q'[
        CREATE TABLE nnsql_check_rows (
            model     VARCHAR2(128)      NOT NULL,
            version   NUMBER(10)         NOT NULL,
            row_no    NUMBER(10)         NOT NULL,
            inputs    UTL_NLA_ARRAY_FLT  NOT NULL,
            expected  UTL_NLA_ARRAY_DBL  NOT NULL,
            allowed   BINARY_DOUBLE      NOT NULL,
            tie       BINARY_DOUBLE      NOT NULL,
            score     NUMBER,
            label     VARCHAR2(800),
            labels    VARCHAR2(4000),
            proba     UTL_NLA_ARRAY_DBL,
            CONSTRAINT nnsql_check_rows_pk PRIMARY KEY (model, version, row_no)
        ) VARRAY inputs STORE AS SECUREFILE LOB VARRAY expected STORE AS SECUREFILE LOB]';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -955 THEN RAISE; END IF;
END;
/
BEGIN
    EXECUTE IMMEDIATE q'[CREATE TYPE nnsql_score_row AS OBJECT (id NUMBER, class NUMBER, proba UTL_NLA_ARRAY_FLT)]';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -955 THEN RAISE; END IF;
END;
/
BEGIN
    EXECUTE IMMEDIATE q'[CREATE TYPE nnsql_score_tab AS TABLE OF nnsql_score_row]';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -955 THEN RAISE; END IF;
END;
/
-- What NAME.labels returns: the labels of a multi-label model above the threshold (200 characters each).
BEGIN
    EXECUTE IMMEDIATE q'[CREATE TYPE nnsql_labels AS TABLE OF VARCHAR2(800)]';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -955 THEN RAISE; END IF;
END;
/
-- What NAME.predict and the other functions also take for a sequence or an image: one UTL_NLA_ARRAY_FLT
-- per step (or row), nnsql_rows(UTL_NLA_ARRAY_FLT(...), UTL_NLA_ARRAY_FLT(...), ...).
BEGIN
    EXECUTE IMMEDIATE q'[CREATE TYPE nnsql_rows AS VARRAY(1000000) OF UTL_NLA_ARRAY_FLT]';
EXCEPTION WHEN OTHERS THEN IF SQLCODE != -955 THEN RAISE; END IF;
END;
/
