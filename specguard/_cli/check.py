"""``specguard check FILE``: re-validate a violation snapshot and print the report.

Every string in the report that comes from the file (the time it was written, the
violations it records, descriptions of opaque values) is printed with control and
format characters escaped: a file cannot clear the screen, move the cursor or print a
line of the report's own (a fake "is clean"). The escaped violations then read as every
violation does (``specguard.contracts.format_report``); the last line names the rules
only, since the object is already kept.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from specguard.adapters import snapshots
from specguard.contracts import Violation, format_report

__all__ = ["EPILOG", "HELP", "add_arguments", "printable", "run"]

HELP = "re-validate a violation snapshot and print the report"
EPILOG = """exit status:
  0  the object is clean: no rule is broken
  1  the object breaks one or more rules (the report lists them)
  2  the file cannot be read as a snapshot (missing, not a regular file, not valid),
     or bad options or SPECGUARD_* settings"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard check``."""
    parser.add_argument("file", help="a snapshot written under SPECGUARD_SNAPSHOT_DIR")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    """Re-validate one snapshot; exit 1 on violations, 0 when clean, 2 when unreadable."""
    try:
        snapshot = snapshots.load(args.file)
    except snapshots.SnapshotError as error:
        print(f"specguard check: {printable(str(error))}", file=sys.stderr)
        return 2
    violations = snapshots.recheck(snapshot)
    if args.json:  # JSON escapes control characters itself
        print(json.dumps({"file": str(args.file), "type": snapshot.type,
                          "violations": [v.to_dict() for v in violations]}, indent=2))
    else:
        print(report(str(args.file), snapshot, violations))
    return 1 if violations else 0


def report(path: str, snapshot: snapshots.Snapshot, violations: list[Violation]) -> str:
    """The text report: what the file recorded, then what re-validation finds."""
    lines = [f"snapshot {printable(path)}",
             f"  {snapshot.type}, written {printable(snapshot.written)}"]
    state = snapshot.state
    if state is not None:
        lines.append(f"  previous step: step {getattr(state, 'step', '?')}, "
                     f"{len(getattr(state, 'seq_ids', ()))} seqs")
    for record in snapshot.recorded:
        lines.append(f"  recorded: {_safe(Violation(**record.model_dump())).format()}")
    lines.append("re-validated (strict, depth full, collect all):")
    if violations:
        lines.append(format_report(snapshot.type, [_safe(v) for v in violations],
                                   rules_only=True))
    else:
        lines.append(f"{snapshot.type} is clean: no rule is broken")
    return "\n".join(lines)


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\x1b``, ``\\n``, ``\\u202e``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii")
                   for c in text)


def _safe(violation: Violation) -> Violation:
    """The violation with each of its strings made printable."""
    changes: dict[str, Any] = {f.name: printable(value) for f in dataclasses.fields(violation)
                               if isinstance(value := getattr(violation, f.name), str)}
    return dataclasses.replace(violation, **changes)
