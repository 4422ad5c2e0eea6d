"""A structured record of one broken rule: a rule's finding, and the violation it becomes.

A :class:`Violation` *is* the :class:`Finding` its rule returned, with the rule and the
object it belongs to: the finding's fields are declared once, here, and the validator
turns one into the other by copying them. How either reads is :mod:`._format`'s.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from dataclasses import field as dataclass_field

from specguard.contracts._core import _format

__all__ = ["RECORD_FIELDS", "Finding", "Violation"]


@dataclass(frozen=True)
class Finding:
    """What a rule's check returns when it fails: the reason and where it happened.

    ``position`` is the batch position of the offending seq and ``token`` the index in a
    flat token stream; the validator fills in whichever of ``position`` and ``seq_id`` it
    can derive when the ids live on the host.
    """

    reason: str
    field: str | None = None
    position: int | None = None
    seq_id: int | None = None
    expected: str | None = None
    actual: str | None = None
    token: int | None = None


_FINDING_FIELDS = tuple(f.name for f in dataclasses.fields(Finding))


@dataclass(frozen=True)
class Violation(Finding):
    """One broken rule on one boundary object, with everything a reader needs: the
    finding of the rule, the rule's code and title, the hand-over and the object, and
    the dimension bindings read from the object."""

    _: KW_ONLY
    code: str
    title: str
    boundary: str
    subject: str
    bindings: Mapping[str, int] = dataclass_field(default_factory=dict)

    @classmethod
    def from_finding(
        cls,
        finding: Finding,
        *,
        code: str,
        title: str,
        boundary: str,
        subject: str,
        bindings: Mapping[str, int],
    ) -> Violation:
        """Attach a rule's identity and the dimension bindings to a finding."""
        return cls(**{name: getattr(finding, name) for name in _FINDING_FIELDS},
                   code=code, title=title, boundary=boundary, subject=subject,
                   bindings=dict(bindings))

    @property
    def where(self) -> str:
        """``seq 127 at batch position 127``, ``token 40`` or ``""``."""
        # pyright reads the TYPE_CHECKING import of this class, in _format, through the
        # namespace link as a second class of the same name.
        return _format.where(self)  # pyright: ignore[reportArgumentType]

    def format(self) -> str:
        """The one-line form used in exception messages and logs."""
        return _format.line(self)  # pyright: ignore[reportArgumentType]  (as above)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form, for snapshots and machine-readable reports (keys in
        :data:`RECORD_FIELDS` order)."""
        record: dict[str, object] = {name: getattr(self, name) for name in RECORD_FIELDS}
        record["bindings"] = dict(self.bindings)
        return record


#: A violation's fields in the order its records list them (``to_dict``, snapshot files,
#: ``specguard check --json``): who broke what, then the finding, then the bindings.
RECORD_FIELDS: tuple[str, ...] = ("code", "title", "boundary", "subject", *_FINDING_FIELDS,
                                  "bindings")
