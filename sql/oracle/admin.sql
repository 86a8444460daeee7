-- nnsql_admin: roll a model back or forward from SQL*Plus, with no nnsql installed:
--   EXEC nnsql_admin.activate('mnist', 1)
-- Runs the version's answer check again in the database (the rows and answers its export checked,
-- kept in nnsql_check_rows), and only then switches the entry package and the registry's active flags.
-- Definer's rights: it runs as the schema that owns the models, as the export does; grant EXECUTE on it
-- only to whoever may switch versions. Every call it builds names that schema ($$PLSQL_UNIT_OWNER,
-- checked by DBMS_ASSERT), so a synonym or package of the same name elsewhere (a public synonym for a
-- version's package that was dropped) is never what runs with its rights. Created by every export; safe
-- to run again.
CREATE OR REPLACE PACKAGE nnsql_admin AUTHID DEFINER AS
    PROCEDURE activate(p_model IN VARCHAR2, p_version IN NUMBER);
END nnsql_admin;
/
CREATE OR REPLACE PACKAGE BODY nnsql_admin AS
    -- A name the caller gave, as an identifier a dynamic statement may hold: a simple SQL name
    -- (DBMS_ASSERT), in double quotes. Anything else is refused before any statement is built.
    FUNCTION identifier(p_name IN VARCHAR2) RETURN VARCHAR2 IS
    BEGIN
        RETURN SYS.DBMS_ASSERT.ENQUOTE_NAME(SYS.DBMS_ASSERT.SIMPLE_SQL_NAME(p_name));
    EXCEPTION WHEN OTHERS THEN
        IF SQLCODE = -44003 THEN
            RAISE_APPLICATION_ERROR(-20030, 'nnsql_admin.activate: not a model name nnsql exports (a letter, '
                || 'then letters, digits and _); nothing changed');
        END IF;
        RAISE;
    END identifier;

    -- The schema that owns this package and the models' packages, quoted: the qualifier of every call.
    FUNCTION owner RETURN VARCHAR2 IS
    BEGIN
        RETURN SYS.DBMS_ASSERT.ENQUOTE_NAME(SYS.DBMS_ASSERT.SCHEMA_NAME($$PLSQL_UNIT_OWNER), FALSE);
    END owner;

    -- The version's answer check, in its own package; an error other than the check's own refusal (a
    -- package that cannot run, or one published before the check was kept) refuses as well.
    PROCEDURE check_version(p_package IN VARCHAR2, p_unit IN VARCHAR2) IS
    BEGIN
        EXECUTE IMMEDIATE 'BEGIN ' || owner || '.' || p_package || '.check_stored; END;';
    EXCEPTION WHEN OTHERS THEN
        IF SQLCODE >= -20999 AND SQLCODE <= -20000 THEN RAISE; END IF;
        RAISE_APPLICATION_ERROR(-20033, 'nnsql_admin.activate: ' || p_unit || ' cannot run its answer check ('
            || SQLERRM || '); export the version again; nothing changed');
    END check_version;

    -- One statement of the text the version generated for the entry package (p_entry, as identifier
    -- quotes it): 1, its specification; 2, its body. Refused unless it replaces that package.
    FUNCTION entry_statement(p_package IN VARCHAR2, p_entry IN VARCHAR2, p_part IN PLS_INTEGER)
        RETURN CLOB IS
        ddl    CLOB;
        wanted VARCHAR2(32767);
    BEGIN
        EXECUTE IMMEDIATE 'BEGIN :ddl := ' || owner || '.' || p_package || '.entry_ddl(:part); END;'
            USING OUT ddl, IN p_part;
        wanted := 'CREATE OR REPLACE PACKAGE ' || CASE WHEN p_part = 2 THEN 'BODY ' END
            || REPLACE(p_entry, '"') || ' ';
        IF UPPER(SUBSTR(ddl, 1, LENGTH(wanted))) <> wanted THEN
            RAISE_APPLICATION_ERROR(-20034, 'nnsql_admin.activate: ' || p_package || '.entry_ddl does not '
                || 'replace the entry package ' || p_entry || '; nothing changed');
        END IF;
        RETURN ddl;
    END entry_statement;

    -- The switch: the entry package's specification and body replaced by the version's, both read and
    -- checked before either runs (each is one atomic DDL statement).
    PROCEDURE switch_entry(p_package IN VARCHAR2, p_entry IN VARCHAR2) IS
        spec CLOB := entry_statement(p_package, p_entry, 1);
        body CLOB := entry_statement(p_package, p_entry, 2);
    BEGIN
        EXECUTE IMMEDIATE spec;
        EXECUTE IMMEDIATE body;
    END switch_entry;

    PROCEDURE activate(p_model IN VARCHAR2, p_version IN NUMBER) IS
        entry VARCHAR2(32767) := identifier(p_model);  -- a hostile name stops here, before anything reads it
        unit  VARCHAR2(32767);
        found PLS_INTEGER;
    BEGIN
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
        switch_entry(identifier(unit), entry);
        UPDATE nnsql_models SET active = 'N' WHERE name = p_model;
        UPDATE nnsql_models SET active = 'Y' WHERE name = p_model AND version = p_version;
        COMMIT;
    END activate;
END nnsql_admin;
/
