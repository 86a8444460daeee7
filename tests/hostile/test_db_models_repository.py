"""`nnsql models activate --repo` in a repository others may write: the `active` file is written through
a temporary file, and that file's name was predictable (`.active.<pid>.tmp`). A link left under it had
the activating user write the version number into the link's target, any file of theirs."""

from __future__ import annotations

import os

from nnsql.export.registry.repository import ACTIVE_FILE, active_version, set_active


def test_a_link_under_the_temporary_name_is_never_written_through(tmp_path):
    victim = tmp_path / "precious.txt"  # a file of the activating user's, outside the repository
    victim.write_text("precious\n")
    model_dir = tmp_path / "repository" / "churn"
    for version in (1, 2):
        (model_dir / str(version)).mkdir(parents=True)
        (model_dir / str(version) / "metadata.json").write_text("{}")
    (model_dir / f".{ACTIVE_FILE}.{os.getpid()}.tmp").symlink_to(victim)
    set_active(model_dir, 1)
    assert victim.read_text() == "precious\n"
    active = model_dir / ACTIVE_FILE
    assert not active.is_symlink() and active.read_text() == "1\n"
    assert active_version(model_dir) == 1
