"""Violation snapshots: the offending object in a file, and ``specguard check`` to re-read it.

Set ``SPECGUARD_SNAPSHOT_DIR`` and every violation an adapter or a guard is about to
raise is first written there as JSON: the boundary object's fields (arrays with dtype and
shape), the previous step's state it was checked against, and the violations reported.
Then, on any machine::

    specguard check ScheduledBatch-20260704-101500-4242-0001.json

re-validates the object (strict, full depth, every rule) and prints the report; the exit
status is 1 when a rule is broken, 0 when the object is clean and 2 when the file cannot
be read. Files are parsed by strict models with size limits (see
:mod:`specguard.adapters._snapshot_format`): a truncated, corrupt or hostile file is a
:class:`specguard.contracts.SnapshotError`, never code execution. Writing copies device arrays to
the host; it only happens on the way to raising.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specguard.adapters import _snapshot_format as fmt
from specguard.contracts import (
    BOUNDARY_OBJECTS,
    BoundaryObject,
    Collect,
    Config,
    ContractViolation,
    Depth,
    Mode,
    SnapshotError,
    Violation,
    checking,
    fields_of,
    validate,
)

__all__ = [
    "ENV_DIR",
    "Snapshot",
    "add_arguments",
    "capture",
    "capture_object",
    "load",
    "recheck",
    "run",
    "write",
]

#: The environment variable naming the folder snapshots are written to.
ENV_DIR = "SPECGUARD_SNAPSHOT_DIR"
#: Snapshots one process writes at most (a violation in a loop must not fill a disk).
MAX_PER_PROCESS = 100

_log = logging.getLogger("specguard")
_written = 0


@dataclass(frozen=True)
class Snapshot:
    """A snapshot read back: the object's type and fields, the state, what was reported."""

    type: str
    fields: dict[str, Any]
    state: BoundaryObject | None
    recorded: tuple[fmt.ViolationRecord, ...]
    written: str


class Opaque:
    """Stands in for a field value the snapshot only describes (it is not an array)."""

    def __init__(self, description: str) -> None:
        self.description = description

    def __repr__(self) -> str:
        return f"<{self.description}>"


def known_types() -> dict[str, type[BoundaryObject]]:
    """Every boundary object a snapshot may hold, by name."""
    from specguard.adapters._atom_layout import AtomLayout
    from specguard.adapters._step_rules import DraftRows, StepTransition, VerifyRows
    from specguard.adapters._vllm_schedule import VllmSchedule
    from specguard.adapters.ranks import RankAgreement
    from specguard.adapters.step_state import StepState

    extra = (StepState, StepTransition, VerifyRows, DraftRows, AtomLayout, VllmSchedule,
             RankAgreement)
    return {cls.__name__: cls for cls in (*BOUNDARY_OBJECTS, *extra)}


def capture(subject: str, fields: Mapping[str, Any], error: ContractViolation, *,
            state: BoundaryObject | None = None) -> Path | None:
    """Write a snapshot if ``SPECGUARD_SNAPSHOT_DIR`` is set; never raises."""
    global _written
    directory = os.environ.get(ENV_DIR, "").strip()
    if not directory or _written >= MAX_PER_PROCESS:
        return None
    try:
        path = write(Path(directory), subject, fields, error.violations, state=state)
    except (OSError, ValueError, TypeError) as problem:
        _log.warning("specguard: could not write a snapshot to %s: %s", directory, problem)
        return None
    _written += 1
    _log.warning("specguard: snapshot written to %s", path)
    return path


def capture_object(obj: BoundaryObject, error: ContractViolation) -> Path | None:
    """:func:`capture` for an object that exists (a guard re-validating an argument)."""
    fields = {f.name: getattr(obj, f.name) for f in fields_of(type(obj))}
    return capture(type(obj).__name__, fields, error)


def write(directory: Path, subject: str, fields: Mapping[str, Any],
          violations: tuple[Violation, ...] = (), *,
          state: BoundaryObject | None = None) -> Path:
    """Write one snapshot file into ``directory`` (created if needed); return its path."""
    budget = fmt.Budget()
    document = {
        "format": fmt.FORMAT, "version": fmt.VERSION,
        "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "object": {"type": subject,
                   "fields": {name: fmt.encode(value, budget) for name, value in fields.items()}},
        "state": None if state is None else _record(state, budget),
        "violations": [v.to_dict() for v in violations],
    }
    directory.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_]", "_", subject)[:60]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = directory / f"{stem}-{stamp}-{os.getpid()}-{_written + 1:04d}.json"
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(document, allow_nan=False), encoding="utf-8")
    os.replace(partial, path)
    return path


def _record(obj: BoundaryObject, budget: fmt.Budget) -> dict[str, Any]:
    return {"type": type(obj).__name__,
            "fields": {f.name: fmt.encode(getattr(obj, f.name), budget)
                       for f in fields_of(type(obj))}}


def load(path: str | Path) -> Snapshot:
    """Read and validate a snapshot file; any problem is a :class:`SnapshotError`."""
    raw = _read_bytes(Path(path))
    try:
        model = fmt.read_model(raw)
    except fmt.ValidationError as error:
        raise SnapshotError(f"snapshot {path} is not valid: {_summary(error)}") from None
    total = sum(len(v.data) for record in (model.object, model.state) if record is not None
                for v in record.fields.values() if isinstance(v, fmt.ArrayValue))
    if total > fmt.MAX_ELEMENTS:
        raise SnapshotError(f"snapshot {path} holds {total} array elements; the limit is "
                            f"{fmt.MAX_ELEMENTS}")
    fields = _fields(model.object, path)
    state = None if model.state is None else _state(model.state, path)
    return Snapshot(model.object.type, fields, state, tuple(model.violations), model.written)


def _read_bytes(path: Path) -> bytes:
    try:
        with path.open("rb") as handle:
            raw = handle.read(fmt.MAX_FILE_BYTES + 1)
    except OSError as error:
        raise SnapshotError(f"cannot read snapshot {path}: {error.strerror or error}") from None
    if len(raw) > fmt.MAX_FILE_BYTES:
        raise SnapshotError(f"snapshot {path} is larger than {fmt.MAX_FILE_BYTES} bytes")
    return raw


def _summary(error: fmt.ValidationError) -> str:
    problems = error.errors(include_url=False, include_input=False)
    parts = [f"{'.'.join(str(p) for p in e['loc']) or 'file'}: {e['msg']}" for e in problems[:3]]
    more = len(problems) - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def _fields(record: fmt.ObjectRecord, path: str | Path) -> dict[str, Any]:
    types = known_types()
    cls = types.get(record.type)
    if cls is None:
        raise SnapshotError(f"snapshot {path} holds an unknown object type {record.type!r}; "
                            f"known: {', '.join(sorted(types))}")
    specs = {f.name: f for f in fields_of(cls)}
    unknown = sorted(set(record.fields) - set(specs))
    missing = sorted(n for n, f in specs.items() if n not in record.fields and not f.optional)
    if unknown or missing:
        raise SnapshotError(f"snapshot {path}: {record.type} fields do not match "
                            f"(unknown: {unknown or 'none'}, missing: {missing or 'none'})")
    try:
        return {name: _value(value) for name, value in record.fields.items()}
    except ValueError as error:
        raise SnapshotError(f"snapshot {path}: {record.type}: {error}") from None


def _value(value: Any) -> Any:
    if isinstance(value, fmt.ArrayValue):
        return fmt.decode_array(value)
    if isinstance(value, fmt.IntValue | fmt.BoolValue):
        return value.value
    if isinstance(value, fmt.ListValue):
        return list(value.value)
    if isinstance(value, fmt.OpaqueValue):
        return Opaque(value.type)
    return None


def _state(record: fmt.ObjectRecord, path: str | Path) -> BoundaryObject:
    from specguard.adapters.step_state import StepState

    if record.type != StepState.__name__:
        raise SnapshotError(f"snapshot {path}: state must be a StepState, not {record.type!r}")
    fields = _fields(record, path)
    with checking(mode=Mode.OFF):
        state = StepState(**fields)
    try:
        validate(state, config=Config(mode=Mode.STRICT, depth=Depth.METADATA))
    except ContractViolation as error:
        raise SnapshotError(f"snapshot {path}: the previous step's state is malformed: "
                            f"{error}") from None
    return state


def recheck(snapshot: Snapshot) -> list[Violation]:
    """Re-validate the snapshot's object: strict, full depth, every rule."""
    cls = known_types()[snapshot.type]
    with checking(mode=Mode.OFF):
        obj = cls(**snapshot.fields)
    try:
        validate(obj, config=Config(mode=Mode.STRICT, depth=Depth.FULL, collect=Collect.ALL))
    except ContractViolation as error:
        return list(error.violations)
    return []


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard check``."""
    parser.add_argument("file", help="a snapshot written under SPECGUARD_SNAPSHOT_DIR")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def run(args: argparse.Namespace) -> int:
    """Re-validate one snapshot; exit 1 on violations, 0 when clean, 2 when unreadable."""
    try:
        snapshot = load(args.file)
    except SnapshotError as error:
        print(f"specguard check: {error}", file=sys.stderr)
        return 2
    violations = recheck(snapshot)
    if args.json:
        print(json.dumps({"file": str(args.file), "type": snapshot.type,
                          "violations": [v.to_dict() for v in violations]}, indent=2))
    else:
        print(_report(args.file, snapshot, violations))
    return 1 if violations else 0


def _report(path: str, snapshot: Snapshot, violations: list[Violation]) -> str:
    lines = [f"snapshot {path}", f"  {snapshot.type}, written {snapshot.written}"]
    state = snapshot.state
    if state is not None:
        lines.append(f"  previous step: step {getattr(state, 'step', '?')}, "
                     f"{len(getattr(state, 'seq_ids', ()))} seqs")
    for record in snapshot.recorded:
        lines.append(f"  recorded: {Violation(**record.model_dump()).format()}")
    lines.append("re-validated (strict, depth full, collect all):")
    if violations:
        lines.append(ContractViolation.from_violations(snapshot.type, violations).args[0])
    else:
        lines.append(f"{snapshot.type} is clean: no rule is broken")
    return "\n".join(lines)
