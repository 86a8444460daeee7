-- nnsql_admin: roll a model back or forward from SQL*Plus, with no nnsql installed:
--   EXEC nnsql_admin.activate('mnist', 1)
-- Runs the version's answer check again in the database (the rows and answers its export checked,
-- kept in nnsql_check_rows), and only then switches the entry package and the registry's active flags.
-- Definer's rights: it runs as the schema that owns the models, as the export does; grant EXECUTE on it
-- only to whoever may switch versions. Created by every export; safe to run again.
CREATE OR REPLACE PACKAGE nnsql_admin AUTHID DEFINER AS
    PROCEDURE activate(p_model IN VARCHAR2, p_version IN NUMBER);
END nnsql_admin;
/
CREATE OR REPLACE PACKAGE BODY nnsql_admin AS
    -- A name the caller gave, as an identifier a dynamic statement may hold: a simple SQL name
    -- (DBMS_ASSERT), in double quotes. Anything else is refused before any statement is built.
    FUNCTION identifier(p_name IN VARCHAR2) RETURN VARCHAR2 IS
    BEGIN
        RETURN DBMS_ASSERT.ENQUOTE_NAME(DBMS_ASSERT.SIMPLE_SQL_NAME(p_name));
    EXCEPTION WHEN OTHERS THEN
        IF SQLCODE = -44003 THEN
            RAISE_APPLICATION_ERROR(-20030, 'nnsql_admin.activate: not a model name nnsql exports (a letter, '
                || 'then letters, digits and _); nothing changed');
        END IF;
        RAISE;
    END identifier;

    PROCEDURE require_name(p_name IN VARCHAR2) IS
        quoted VARCHAR2(300) := identifier(p_name);
    BEGIN
        NULL;
    END require_name;

    -- The version's answer check, in its own package; an error other than the check's own refusal (a
    -- package that cannot run, or one published before the check was kept) refuses as well.
    PROCEDURE check_version(p_package IN VARCHAR2, p_unit IN VARCHAR2) IS
    BEGIN
        EXECUTE IMMEDIATE 'BEGIN ' || p_package || '.check_stored; END;';
    EXCEPTION WHEN OTHERS THEN
        IF SQLCODE >= -20999 AND SQLCODE <= -20000 THEN RAISE; END IF;
        RAISE_APPLICATION_ERROR(-20033, 'nnsql_admin.activate: ' || p_unit || ' cannot run its answer check ('
            || SQLERRM || '); export the version again; nothing changed');
    END check_version;

    -- Replace the entry package with the text the version generated for it: its specification, then its
    -- body, each statement checked to replace the model's own entry package and nothing else.
    PROCEDURE switch_entry(p_package IN VARCHAR2, p_model IN VARCHAR2) IS
        ddl    VARCHAR2(32767);
        wanted VARCHAR2(300);
    BEGIN
        FOR part IN 1 .. 2 LOOP
            EXECUTE IMMEDIATE 'BEGIN :ddl := ' || p_package || '.entry_ddl(:part); END;' USING OUT ddl, IN part;
            wanted := 'CREATE OR REPLACE PACKAGE ' || CASE WHEN part = 2 THEN 'BODY ' END || p_model || ' ';
            IF UPPER(SUBSTR(ddl, 1, LENGTH(wanted))) <> UPPER(wanted) THEN
                RAISE_APPLICATION_ERROR(-20034, 'nnsql_admin.activate: ' || p_package || '.entry_ddl does not '
                    || 'replace the entry package ' || p_model || '; nothing changed');
            END IF;
            EXECUTE IMMEDIATE ddl;
        END LOOP;
    END switch_entry;

    PROCEDURE activate(p_model IN VARCHAR2, p_version IN NUMBER) IS
        unit  VARCHAR2(200);
        found PLS_INTEGER;
    BEGIN
        require_name(p_model);  -- a hostile name stops here, before anything reads it
        SELECT COUNT(*) INTO found FROM nnsql_models WHERE name = p_model AND version = p_version;
        IF found = 0 THEN
            RAISE_APPLICATION_ERROR(-20031, 'nnsql_admin.activate: ' || p_model || ' has no version '
                || NVL(TO_CHAR(p_version), 'NULL') || ' (SELECT version FROM nnsql_models WHERE name = '''
                || p_model || '''); nothing changed');
        END IF;
        unit := p_model || '_v' || TO_CHAR(p_version);
        SELECT COUNT(*) INTO found FROM user_errors WHERE name = UPPER(unit) AND attribute = 'ERROR';
        IF found > 0 THEN
            RAISE_APPLICATION_ERROR(-20032, 'nnsql_admin.activate: package ' || unit || ' is invalid ('
                || found || ' compilation error(s): SELECT * FROM user_errors); nothing changed');
        END IF;
        check_version(identifier(unit), unit);
        switch_entry(identifier(unit), p_model);
        UPDATE nnsql_models SET active = 'N' WHERE name = p_model;
        UPDATE nnsql_models SET active = 'Y' WHERE name = p_model AND version = p_version;
        COMMIT;
    END activate;
END nnsql_admin;
/
