"""Violation snapshots: the offending object in a file, and reading it back.

Set ``SPECGUARD_SNAPSHOT_DIR`` and every violation delivered about a boundary object
(raised in strict mode, logged in warn mode) is first written there as JSON: the
object's fields (arrays with dtype and shape), the previous step's state it was checked
against, and the violations reported; the exception's ``next:`` line names the file.
Then, on any machine::

    specguard check ScheduledBatch-20260704-101500-4242-0001.json

re-validates the object (strict, full depth, every rule) and prints the report; the exit
status is 1 when a rule is broken, 0 when the object is clean and 2 when the file cannot
be read. Files are parsed by strict models with size limits (see
:mod:`specguard.adapters._snapshot_format`): a truncated, corrupt, ambiguous or hostile
file is a :class:`SnapshotError`, never code execution. Writing
(:func:`capture`, :func:`write`, :func:`built`) copies device arrays to the host; it only
happens when a violation is delivered. Reading a file back writes none.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specguard.adapters import _snapshot_format as fmt
from specguard.adapters._snapshot_write import (
    ENV_DIR,
    MAX_PER_PROCESS,
    built,
    capture,
    keeping_nothing,
    write,
)
from specguard.adapters.step_tracker import StepState
from specguard.contracts import (
    REGISTRY,
    BoundaryObject,
    Collect,
    Config,
    ContractViolation,
    Depth,
    Mode,
    SpecguardError,
    Violation,
    boundary_classes,
    checking,
    fields_of,
    validate,
)

__all__ = [
    "ENV_DIR",
    "MAX_PER_PROCESS",
    "Snapshot",
    "SnapshotError",
    "built",
    "capture",
    "load",
    "recheck",
    "write",
]


class SnapshotError(SpecguardError, ValueError):
    """A snapshot file is truncated, corrupt, ambiguous, of an unknown version or hostile."""


SnapshotError.__module__ = "specguard.adapters"


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
    """Every boundary object a snapshot may hold, by name: every class declared with
    ``@boundary_object`` by specguard (importing this module imports every layer that
    declares one) and by the modules of the ``specguard.rules`` entry points."""
    len(REGISTRY)  # reading the catalogue whole imports the entry points' modules
    return boundary_classes()


def load(path: str | Path) -> Snapshot:
    """Read and validate a snapshot file; any problem is a :class:`SnapshotError`."""
    raw = _read_bytes(Path(path))
    try:
        model = fmt.read_model(raw)
    except fmt.ValidationError as error:
        raise SnapshotError(f"snapshot {path} is not valid: {_summary(error)}") from None
    duplicate = fmt.duplicate_key(raw)
    if duplicate is not None:  # a JSON reader keeps the last value, another the first
        raise SnapshotError(f"snapshot {path} is ambiguous: the key {duplicate!r} appears "
                            "twice in one object")
    total = sum(len(v.data) for record in (model.object, model.state) if record is not None
                for v in record.fields.values() if isinstance(v, fmt.ArrayValue))
    if total > fmt.MAX_ELEMENTS:
        raise SnapshotError(f"snapshot {path} holds {total} array elements; the limit is "
                            f"{fmt.MAX_ELEMENTS}")
    fields = _fields(model.object, path)
    state = None if model.state is None else _state(model.state, path)
    return Snapshot(model.object.type, fields, state, tuple(model.violations), model.written)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"))


def _kind_of(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _kind(path: Path) -> str | None:
    """What ``path`` is when it exists and is not a regular file, else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else _kind_of(mode)


def _read_bytes(path: Path) -> bytes:
    """The file's bytes, from a regular file only: anything else (a FIFO, a device, a
    directory) is refused before a byte is read, so nothing can block the reader. The
    file is opened without blocking and checked through its descriptor, so a path
    swapped for a FIFO after a check is refused too."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(path, flags)
    except OSError as error:
        kind = _kind(path)
        if kind is not None:  # a socket cannot even be opened; a directory may not be
            raise SnapshotError(f"snapshot {path} is not a regular file ({kind}): specguard "
                                "check reads snapshot files only") from None
        raise SnapshotError(f"cannot read snapshot {path}: {error.strerror or error}") from None
    try:
        mode = os.fstat(descriptor).st_mode
        if not stat.S_ISREG(mode):
            kind = _kind_of(mode)
            raise SnapshotError(f"snapshot {path} is not a regular file ({kind}): "
                                "specguard check reads snapshot files only")
        if hasattr(os, "set_blocking"):
            os.set_blocking(descriptor, True)
        with os.fdopen(descriptor, "rb") as handle:
            descriptor = -1  # closed with the handle
            raw = handle.read(fmt.MAX_FILE_BYTES + 1)
    except OSError as error:
        raise SnapshotError(f"cannot read snapshot {path}: {error.strerror or error}") from None
    finally:
        if descriptor >= 0:
            os.close(descriptor)
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
    if record.type != StepState.__name__:
        raise SnapshotError(f"snapshot {path}: state must be a StepState, not {record.type!r}")
    fields = _fields(record, path)
    with checking(mode=Mode.OFF):
        state = StepState(**fields)
    try:
        with keeping_nothing():
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
        with keeping_nothing():
            validate(obj, config=Config(mode=Mode.STRICT, depth=Depth.FULL,
                                        collect=Collect.ALL))
    except ContractViolation as error:
        return list(error.violations)
    return []
