"""A structured record of one broken rule, and how it reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from specguard.contracts._core._arrays import int_text

__all__ = ["Finding", "Violation"]


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


@dataclass(frozen=True)
class Violation:
    """One broken rule on one boundary object, with everything a reader needs."""

    code: str
    title: str
    boundary: str
    subject: str
    reason: str
    field: str | None = None
    position: int | None = None
    seq_id: int | None = None
    expected: str | None = None
    actual: str | None = None
    token: int | None = None
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
        return cls(
            code=code,
            title=title,
            boundary=boundary,
            subject=subject,
            reason=finding.reason,
            field=finding.field,
            position=finding.position,
            seq_id=finding.seq_id,
            expected=finding.expected,
            actual=finding.actual,
            token=finding.token,
            bindings=dict(bindings),
        )

    @property
    def where(self) -> str:
        """``seq 127 at batch position 127``, ``token 40`` or ``""``."""
        parts = []
        if self.seq_id is not None:
            parts.append(f"seq {int_text(self.seq_id)}")
        if self.position is not None:
            parts.append(f"at batch position {int_text(self.position)}")
        text = " ".join(parts)
        if self.token is not None:
            token = int_text(self.token)
            text = f"{text}, token {token}" if text else f"token {token}"
        return text

    def format(self) -> str:
        """The one-line form used in exception messages and logs."""
        target = f"{self.subject}.{self.field}" if self.field else self.subject
        head = f"{self.code} {self.title} [{target}, {self.boundary}]:"
        parts = [head, f"{self.where}: {self.reason}" if self.where else self.reason]
        detail = "; ".join(
            f"{label} {value}"
            for label, value in (("expected", self.expected), ("actual", self.actual))
            if value is not None
        )
        if detail:
            parts.append(f"({detail})")
        if self.bindings:
            parts.append("{" + ", ".join(f"{k}={int_text(v)}" for k, v in self.bindings.items())
                         + "}")
        return " ".join(parts)

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form, for snapshots and machine-readable reports."""
        return {
            "code": self.code,
            "title": self.title,
            "boundary": self.boundary,
            "subject": self.subject,
            "reason": self.reason,
            "field": self.field,
            "position": self.position,
            "seq_id": self.seq_id,
            "expected": self.expected,
            "actual": self.actual,
            "token": self.token,
            "bindings": dict(self.bindings),
        }
