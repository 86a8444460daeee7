"""`EXEC nnsql_admin.activate('mnist', 1)` runs with the rights of the schema that owns the models. A
version's package that was dropped by hand (its registry row left) while another schema made a public
synonym of the same name for its own package: an unqualified call in nnsql_admin resolves to that
synonym, and the other schema's code runs with the owner's rights. nnsql_admin names the owning schema
in every call ($$PLSQL_UNIT_OWNER, checked by DBMS_ASSERT), so the synonym is never consulted. Run in the
PL/SQL interpreter of tests/export/plsql (no Oracle server here), which resolves names as Oracle does."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.export.plsql.session import Session
from tests.export.plsql.values import PlsqlError
from tests.export.test_oracle_activate import activate, versions  # noqa: F401  (the fixture)

pytestmark = [
    pytest.mark.oracle,
    pytest.mark.filterwarnings("ignore:Layer .* was passed an input with a mask"),
]
OTHER = """
CREATE OR REPLACE PACKAGE other_check AS
    PROCEDURE check_stored;
END other_check;
/
CREATE OR REPLACE PACKAGE BODY other_check AS
    PROCEDURE check_stored IS
    BEGIN
        RAISE_APPLICATION_ERROR(-20999, 'the other schema''s code ran with the owner''s rights');
    END check_stored;
END other_check;
/
"""


def test_a_public_synonym_for_a_dropped_version_package_is_never_called(versions):  # noqa: F811
    directory, _ = versions
    session = Session()
    session.run_script(directory / "v1" / "install.sql")
    session.run_script(directory / "v2" / "install.sql")
    session.run_script(Path("other.sql"), OTHER)
    session.public_synonyms["MNIST_V1"] = session.packages.pop("OTHER_CHECK")  # another schema's
    del session.packages["MNIST_V1"]  # DROP PACKAGE mnist_v1, its registry row left
    with pytest.raises(PlsqlError) as refused:
        activate(session, "mnist", 1)
    assert "other schema" not in refused.value.message
    assert refused.value.code == -20033 and "cannot run its answer check" in refused.value.message
    assert session.call("mnist", "version") == 2


def test_activation_through_the_qualified_calls_still_switches(versions):  # noqa: F811
    directory, _ = versions
    session = Session()
    session.run_script(directory / "v1" / "install.sql")
    session.run_script(directory / "v2" / "install.sql")
    activate(session, "mnist", 1)  # the owner NNSQL exists: the call is qualified and runs
    assert session.call("mnist", "version") == 1
