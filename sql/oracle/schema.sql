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
