"""Class names that stick: a new version exported without --classes or metadata.json's `classes` keeps
the names the active version was published with, when its output has as many classes."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ExportError
from ..frontend.model import check_labels
from ..ir.kinds import check_classes, class_count


def named(labels: Sequence[str]) -> bool:
    """True unless the labels are the defaults '0', '1', ... that an export without names writes."""
    return tuple(labels) != tuple(str(index) for index in range(len(labels)))


def carried_classes(
    kind: str, units: int, given: Sequence[str], previous: tuple[int, Sequence[str]] | None
) -> tuple[str, ...]:
    """The labels of a new version: those given, else the previous version's names (printed), else the
    defaults. A previous version with names and an output of another size is an error: the names cannot
    be carried and silently dropping them would turn every label() into a number."""
    if given or previous is None or not named(previous[1]):
        return check_classes(kind, units, tuple(given))
    version, labels = previous[0], tuple(previous[1])
    try:  # the stored names are checked as --classes would be: another writer may have put them there
        check_labels(list(labels))
    except ExportError as error:
        kept = f"version {version}'s class names cannot be kept"
        raise ExportError(f"{kept}: {error}; pass --classes") from None
    wanted = class_count(kind, units)
    if len(labels) != wanted:
        raise ExportError(
            f"version {version} names {len(labels)} classes ({', '.join(labels)}) and this model's output "
            f"has {wanted}: pass --classes with {wanted} labels (or 'classes' in metadata.json)"
        )
    print(f"classes kept from version {version}: {', '.join(labels)}")
    return labels
