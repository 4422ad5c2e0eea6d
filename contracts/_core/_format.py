"""How violations read: the one-line form, the report of one object, the repeat line.

Kept apart from where violations go (:mod:`._delivery` decides that): the exception
message, the warn-mode log, the pytest plugin's report section and ``specguard check``
all print through these functions, so one violation reads the same everywhere.
``specguard check`` escapes what it takes from a file before it formats it here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from specguard.contracts._core._arrays import int_text

if TYPE_CHECKING:
    from specguard.contracts._core._violation import Violation

__all__ = ["format_report", "header", "line", "next_line", "repeat_line", "rules_command",
           "target", "where"]


def target(violation: Violation) -> str:
    """``ScheduledBatch.draft_token_ids``, or the object alone when no field is named."""
    return f"{violation.subject}.{violation.field}" if violation.field else violation.subject


def where(violation: Violation) -> str:
    """``seq 127 at batch position 127``, ``token 40`` or ``""``."""
    parts = []
    if violation.seq_id is not None:
        parts.append(f"seq {int_text(violation.seq_id)}")
    if violation.position is not None:
        parts.append(f"at batch position {int_text(violation.position)}")
    text = " ".join(parts)
    if violation.token is not None:
        token = int_text(violation.token)
        text = f"{text}, token {token}" if text else f"token {token}"
    return text


def line(violation: Violation) -> str:
    """The one-line form: rule, object and field, hand-over, where, reason, details."""
    head = f"{violation.code} {violation.title} [{target(violation)}, {violation.boundary}]:"
    at = where(violation)
    parts = [head, f"{at}: {violation.reason}" if at else violation.reason]
    detail = "; ".join(
        f"{label} {value}"
        for label, value in (("expected", violation.expected), ("actual", violation.actual))
        if value is not None
    )
    if detail:
        parts.append(f"({detail})")
    if violation.bindings:
        parts.append("{" + ", ".join(f"{k}={int_text(v)}" for k, v in violation.bindings.items())
                     + "}")
    return " ".join(parts)


def header(subject: str, count: int) -> str:
    """``ScheduledBatch broke 2 rules:``."""
    return f"{subject} broke {count} {'rule' if count == 1 else 'rules'}:"


def rules_command(violations: Sequence[Violation]) -> str:
    """``specguard rules SG101 SG102``: each rule broken, once, in the order found."""
    return "specguard rules " + " ".join(dict.fromkeys(v.code for v in violations))


def docs_url() -> str | None:
    """The published docs site, from ``SPECGUARD_DOCS_URL`` (read at each report, which
    is rare; a value that is not an http(s) URL is ignored here and refused by
    ``specguard``'s settings check), ending in a slash."""
    import os  # only on the way to a report

    value = os.environ.get("SPECGUARD_DOCS_URL", "").strip()
    if not value.startswith(("https://", "http://")) or any(c.isspace() for c in value):
        return None
    return value if value.endswith("/") else value + "/"


def next_line(violations: Sequence[Violation], kept_at: str | None = None, *,
              rules_only: bool = False) -> str:
    """The last line of a report: how to read up on the rules, and how to get the object.

    ``kept_at`` is where a listener kept the object (a snapshot file): the line then
    says how to re-check it instead of how to keep it. ``rules_only`` names the rules
    alone, for a report on an object that is already kept (``specguard check``'s).
    """
    rules = rules_command(violations)
    if rules_only:
        return f"  next: {rules}"
    if kept_at is None:
        keep = "set SPECGUARD_SNAPSHOT_DIR to keep the object for specguard check"
    else:
        import shlex  # only on the way to raising

        keep = f"specguard check {shlex.quote(kept_at)}"
    return f"  next: {rules}{_docs_link(violations[0].code)}; {keep}"


def _docs_link(code: str) -> str:
    """`` (docs: <SPECGUARD_DOCS_URL>rules/#sg101)`` where the docs site is published, else
    nothing: a path inside the repository means nothing to who installed the wheel, and
    ``specguard rules`` explains the rule wherever specguard runs."""
    base = docs_url()
    return f" (docs: {base}rules/#{code.lower()})" if base else ""


def format_report(subject: str, violations: Sequence[Violation], *,
                  kept_at: str | None = None, rules_only: bool = False) -> str:
    """The report on one object: a header line naming it, one line per violation, then
    where to look next (:func:`next_line`). A :class:`ContractViolation`'s message."""
    lines = [header(subject, len(violations))]
    lines.extend(f"  {line(v)}" for v in violations)
    if violations:
        lines.append(next_line(violations, kept_at, rules_only=rules_only))
    return "\n".join(lines)


def repeat_line(violation: Violation, seen: int) -> str:
    """Warn mode's line for the 10th, 100th... sighting of one violation."""
    at = f" at batch position {violation.position}" if violation.position is not None else ""
    return (f"{violation.code} on {target(violation)}{at} seen {seen} times (repeats are "
            f"counted, not logged; next line at {seen * 10})")
