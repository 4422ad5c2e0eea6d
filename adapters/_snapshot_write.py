"""Writing violation snapshots: the offending object in a file, on the way to a raise.

Set ``SPECGUARD_SNAPSHOT_DIR`` and every violation an adapter or a guard is about to
raise is first written there (see :mod:`specguard.adapters.snapshots`, which also reads
them back). This module knows only the file format: it imports no check, so every
adapter can write a snapshot without depending on the ones that read it.

A file is created under an unpredictable name with ``O_CREAT | O_EXCL`` in the target
folder (``tempfile.mkstemp``), so a link planted there is never followed, then renamed
into place atomically: a reader sees a whole snapshot or none.
"""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, cast

from specguard.adapters import _snapshot_format as fmt
from specguard.contracts import BoundaryObject, ContractViolation, Violation, fields_of

__all__ = ["ENV_DIR", "MAX_PER_PROCESS", "built", "capture", "capture_object", "write"]

#: The environment variable naming the folder snapshots are written to.
ENV_DIR = "SPECGUARD_SNAPSHOT_DIR"
#: Snapshots one process writes at most (a violation in a loop must not fill a disk).
MAX_PER_PROCESS = 100

B = TypeVar("B", bound=BoundaryObject)

_log = logging.getLogger("specguard")
_written = 0


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


def built(cls: type[B], /, **fields: Any) -> B:
    """``cls(**fields)``; a violation it raises is first written to a snapshot.

    For engines that build boundary objects themselves: the object never exists when its
    constructor raises, so the fields it was given are what the snapshot keeps.
    """
    try:
        return cls(**fields)
    except ContractViolation as error:
        capture(cls.__name__, fields, error)
        raise


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
        "violations": [_violation_record(v) for v in violations],
    }
    text = json.dumps(document, allow_nan=False)
    directory.mkdir(parents=True, exist_ok=True)
    stem = re.sub(r"[^A-Za-z0-9_]", "_", subject)[:60]
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = directory / f"{stem}-{stamp}-{os.getpid()}-{_written + 1:04d}.json"
    # mkstemp: a random name, created exclusively (O_EXCL never follows a planted link).
    handle, partial = tempfile.mkstemp(dir=directory, prefix=f".{stem}-", suffix=".partial")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(partial, path)  # a rename replaces a link at ``path``, never its target
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return path


_INT64 = range(-(2**63), 2**63)


def _violation_record(violation: Violation) -> dict[str, object]:
    """The violation as the file holds it. An integer past int64 (a hostile seq id or
    binding) is left out: the bounded reason text already describes it, and a file that
    cannot be read back (or a number too long to print) would lose the whole snapshot."""
    record = violation.to_dict()
    for key in ("position", "seq_id", "token"):
        if isinstance(record[key], int) and record[key] not in _INT64:
            record[key] = None
    bindings = cast(dict[str, int], record["bindings"])
    record["bindings"] = {name: value for name, value in bindings.items() if value in _INT64}
    return record


def _record(obj: BoundaryObject, budget: fmt.Budget) -> dict[str, Any]:
    return {"type": type(obj).__name__,
            "fields": {f.name: fmt.encode(getattr(obj, f.name), budget)
                       for f in fields_of(type(obj))}}
