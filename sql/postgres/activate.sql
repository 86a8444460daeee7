-- Roll a model back or forward, as SQL a DBA can call:  CALL nnsql.activate('churn', 3);
-- Installs the version's scoring code again (nnsql.installs), checks its answers on the sample rows the
-- export kept (the same check the export passed: every value within its row's tolerance, every answer
-- a Keras user reads equal), and only then marks it active. Any failure raises and rolls the whole call
-- back: the version active before keeps scoring. Created by every export; safe to run again.

-- A JSON array of numbers as float8[].
CREATE OR REPLACE FUNCTION nnsql.float8s(items jsonb)
RETURNS float8[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT pg_catalog.array_agg(v::float8 ORDER BY i) FROM pg_catalog.jsonb_array_elements_text(items) WITH ORDINALITY AS t(v, i)
$fn$;

-- Whether every value lies within its bound of the JSON array's: `allowed` where the expected value
-- lies in [-1, 1], `allowed` times its magnitude beyond, as the export's gate bounds it (NaN never does).
CREATE OR REPLACE FUNCTION nnsql.close_to(actual float8[], expected jsonb, allowed float8)
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp AS $fn$
    SELECT coalesce(pg_catalog.cardinality(actual), 0) = pg_catalog.jsonb_array_length(expected)
       AND coalesce(pg_catalog.bool_and(pg_catalog.abs(a - (expected ->> (i::integer - 1))::float8)
                           <= allowed * greatest(1.0, pg_catalog.abs((expected ->> (i::integer - 1))::float8))), true)
      FROM pg_catalog.unnest(actual) WITH ORDINALITY AS t(a, i)
$fn$;

-- SECURITY INVOKER: the caller needs what the export needs (ownership of the model's schema and the
-- registry); objects of either schema owned by another role, or a trigger on their tables, are refused
-- as the export refuses them.
CREATE OR REPLACE PROCEDURE nnsql.activate(model text, wanted integer)
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp AS $proc$
DECLARE
    script     text;
    gate       jsonb;
    spec       jsonb;
    arguments  text;
    conditions text := '';
    asked      text;
    found_row  bigint;
    untrusted  record;
    creator    record;
BEGIN
    -- One export or activation at a time: the lock every export takes (export/postgres/store.py).
    LOCK TABLE nnsql.models IN SHARE ROW EXCLUSIVE MODE;
    -- Holding it, no wait is unbounded (export/postgres/store.py, LOCK_WAIT_SECONDS): a transaction of
    -- another role kept open would otherwise hold every export and activation behind this one.
    IF pg_catalog.current_setting('lock_timeout') = '0' THEN
        PERFORM pg_catalog.set_config('lock_timeout', '10s', true);
    END IF;
    SELECT o.kind, o.object, pg_catalog.pg_get_userbyid(o.owner) AS owner INTO untrusted FROM (
        SELECT 'schema' AS kind, n.nspname::text AS object, n.nspowner AS owner
          FROM pg_namespace n WHERE n.nspname IN ('nnsql', model)
        UNION ALL
        SELECT 'table', c.oid::regclass::text, c.relowner
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname IN ('nnsql', model)
        UNION ALL
        SELECT 'function', p.oid::regprocedure::text, p.proowner
          FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname IN ('nnsql', model)
        UNION ALL
        SELECT 'extension', e.extname::text, e.extowner
          FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE n.nspname IN ('nnsql', model)
    ) AS o
     WHERE o.owner <> (SELECT oid FROM pg_roles WHERE rolname = current_user)
       AND NOT (SELECT rolsuper FROM pg_roles WHERE oid = o.owner)
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'nnsql.activate: % % is owned by role %, not by % or a superuser: refusing to use it',
            untrusted.kind, untrusted.object, untrusted.owner, current_user
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                 JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE NOT t.tgisinternal AND n.nspname IN ('nnsql', model)) THEN
        RAISE EXCEPTION 'nnsql.activate: a table of schema nnsql or % has a trigger: refusing (a DBA should drop it)',
            model USING ERRCODE = 'insufficient_privilege';
    END IF;
    -- Nor may another role create objects in them, or in the cube extension's schema where a cube
    -- version's code calls it: what it adds later would be called instead, or make calls ambiguous.
    SELECT n.nspname::text AS schema_name,
           CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_catalog.pg_get_userbyid(a.grantee)::text END AS grantee
      INTO creator
      FROM pg_namespace n, pg_catalog.aclexplode(n.nspacl) AS a
     WHERE (n.nspname IN ('nnsql', model)
            OR (n.oid = (SELECT e.extnamespace FROM pg_extension e WHERE e.extname = 'cube')
                AND EXISTS (SELECT 1 FROM nnsql.models m
                             WHERE m.name = model AND m.version = wanted AND m.kernel = 'cube')))
       AND a.privilege_type = 'CREATE'
       AND (a.grantee = 0 OR NOT (
                a.grantee = (SELECT oid FROM pg_roles WHERE rolname = current_user)
                OR (SELECT rolsuper FROM pg_roles WHERE oid = a.grantee)
                OR (pg_catalog.pg_get_userbyid(a.grantee) = 'pg_database_owner'
                    AND (SELECT d.rolsuper OR d.rolname = current_user
                           FROM pg_database db JOIN pg_roles d ON d.oid = db.datdba
                          WHERE db.datname = pg_catalog.current_database()))))
     ORDER BY 1, 2
     LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'nnsql.activate: schema % lets role % create objects in it: refusing to use it (a DBA revokes it)',
            creator.schema_name, creator.grantee USING ERRCODE = 'insufficient_privilege';
    END IF;
    SELECT i.script, i.gate_check, m.input_spec INTO script, gate, spec
      FROM nnsql.models m JOIN nnsql.installs i ON i.name = m.name AND i.version = m.version
     WHERE m.name = model AND m.version = wanted;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'nnsql.activate: % has no version % to activate (nnsql.models lists them; versions '
            'published before activation existed cannot be)', model, wanted USING ERRCODE = 'no_data_found';
    END IF;
    EXECUTE script;
    SELECT pg_catalog.string_agg(pg_catalog.format('nnsql.float8s(r.value -> ''inputs'' -> %L)', s ->> 'name'), ', ' ORDER BY o)
      INTO arguments FROM pg_catalog.jsonb_array_elements(spec) WITH ORDINALITY AS t(s, o);
    FOR asked IN SELECT pg_catalog.jsonb_object_keys(gate -> 'rows' -> 0 -> 'answers') LOOP
        conditions := conditions || pg_catalog.format(
            ' OR (pg_catalog.jsonb_typeof(r.value -> ''answers'' -> %L) <> ''null'' AND %s)', asked,
            CASE asked
                WHEN 'score' THEN pg_catalog.format('(%I.score(%s))::float8 IS DISTINCT FROM (r.value -> ''answers'' ->> ''score'')::float8', model, arguments)
                WHEN 'label' THEN pg_catalog.format('%I.label(%s) IS DISTINCT FROM r.value -> ''answers'' ->> ''label''', model, arguments)
                WHEN 'labels' THEN pg_catalog.format('pg_catalog.to_jsonb(%I.labels(%s)) IS DISTINCT FROM r.value -> ''answers'' -> ''labels''', model, arguments)
                ELSE pg_catalog.format('NOT nnsql.close_to(%I.predict_proba(%s), r.value -> ''answers'' -> ''predict_proba'', (r.value ->> ''allowed'')::float8)', model, arguments)
            END);
    END LOOP;
    EXECUTE pg_catalog.format(
        'SELECT r.o FROM pg_catalog.jsonb_array_elements($1 -> ''rows'') WITH ORDINALITY AS r(value, o) '
        'WHERE NOT coalesce(nnsql.close_to(%I.predict(%s), r.value -> ''expected'', (r.value ->> ''allowed'')::float8), false)%s '
        'ORDER BY r.o LIMIT 1', model, arguments, conditions)
        INTO found_row USING gate;
    IF found_row IS NOT NULL THEN
        RAISE EXCEPTION 'nnsql.activate: % version % fails the answer check it was published with, on stored row %; not activated',
            model, wanted, found_row - 1 USING ERRCODE = 'data_exception';
    END IF;
    UPDATE nnsql.models SET active = (version = wanted) WHERE name = model;
END
$proc$;
