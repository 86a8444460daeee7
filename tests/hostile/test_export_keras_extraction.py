"""A `.keras` archive whose extra members expand on extraction. Found by the fifth hostile pass of issue
32: Keras 3 extracts every member of an archive holding more than its three files into a temporary
directory, and bounds each member's expansion only beyond 256 MiB: five members of 250 MiB of zeros in a
1.3 MB file made an export write 1.2 GB to the exporting user's temporary directory (and then publish),
so a file of the size the model copy allows (1.86 GB at the default --max-parameters) would write
terabytes. The members' declared sizes are now bounded in all, and their number, before Keras opens it."""

from __future__ import annotations

import zipfile

import pytest

from nnsql.export.errors import ExportError
from nnsql.export.frontend import model_limits, model_snapshot
from nnsql.export.frontend.model_file import ModelFile

LIMITS = model_limits.Limits(max_parameters=1_000_000)  # a model file may then hold 16 MB + 256 MiB


def archive(path, members: dict[str, int]) -> ModelFile:
    """A .keras-shaped archive with members of the given sizes in zeros (deflated: kilobytes each)."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("config.json", "{}")
        zf.writestr("metadata.json", "{}")
        for name, size in members.items():
            with zf.open(name, "w", force_zip64=True) as member:
                for _ in range(size >> 20):
                    member.write(bytes(1 << 20))
    return ModelFile(path=path, format="keras", library="keras", config=None, shown=str(path))


def test_members_that_expand_beyond_what_a_model_file_holds_are_refused(tmp_path):
    most = model_snapshot.max_bytes(LIMITS.max_parameters)
    each = 100 << 20  # under Keras's own floor for one member (256 MiB)
    count = most // each + 1
    model = archive(tmp_path / "bomb.keras", {f"assets/pad{i}": each for i in range(count)})
    assert model.path.stat().st_size < 2 << 20
    with pytest.raises(ExportError, match=r"members declare [\d,]+ bytes in all"):
        model_limits.check_sizes(model, LIMITS, trust_code=False)


def test_more_members_than_a_model_holds_are_refused(tmp_path):
    names = {f"assets/f{i}": 0 for i in range(model_snapshot.MAX_ENTRIES)}
    model = archive(tmp_path / "many.keras", names)
    with pytest.raises(ExportError, match="at most 10,000 members"):
        model_limits.check_sizes(model, LIMITS, trust_code=False)


def test_an_archive_within_the_bounds_passes(tmp_path):
    model = archive(tmp_path / "fine.keras", {"assets/vocabulary.txt": 1 << 20})
    model_limits.check_sizes(model, LIMITS, trust_code=False)
