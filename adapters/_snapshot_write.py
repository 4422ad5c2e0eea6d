"""Writing violation snapshots: the offending object in a file, as a violation is delivered.

Set ``SPECGUARD_SNAPSHOT_DIR`` and every violation delivered about an object (raised in
strict mode, logged in warn mode) is first written there, with the object: this
module's :func:`keep` is a listener of every delivery, registered when
``specguard.adapters`` is imported. It reads what the delivery is about
(``Delivery.about``: the object validated, or the one an adapter's ``build`` describes
with its previous state) and notes the file in the delivery, so the exception's
``next:`` line names it (:mod:`specguard.adapters.snapshots` reads files back). This
module knows only the file format: it imports no check, so every adapter can write a
snapshot without depending on the ones that read it.

A file is created under an unpredictable name with ``O_CREAT | O_EXCL`` in the target
folder (``tempfile.mkstemp``), so a link planted there is never followed, then renamed
into place atomically: a reader sees a whole snapshot or none.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

from specguard.adapters import _snapshot_format as fmt
from specguard.contracts import (
    BoundaryObject,
    ContractViolation,
    Delivery,
    DeliveryContext,
    Violation,
    fields_of,
    listen,
)

__all__ = ["ENV_DIR", "MAX_PER_PROCESS", "built", "capture", "keep", "keeping_nothing",
           "write"]

#: The environment variable naming the folder snapshots are written to.
ENV_DIR = "SPECGUARD_SNAPSHOT_DIR"
#: Snapshots one process writes at most (a violation in a loop must not fill a disk).
MAX_PER_PROCESS = 100

B = TypeVar("B", bound=BoundaryObject)

_log = logging.getLogger("specguard")
_written = 0
_muted: ContextVar[bool] = ContextVar("specguard_snapshots_muted", default=False)


def keep(delivery: Delivery) -> None:
    """The snapshot listener: write the object ``delivery`` is about when
    ``SPECGUARD_SNAPSHOT_DIR`` is set, in strict and warn mode alike, and note the file
    in the delivery. Never raises."""
    if _muted.get() or not os.environ.get(ENV_DIR, "").strip() or _written >= MAX_PER_PROCESS:
        return
    about = delivery.about()
    if about is None:
        return
    state = about.state if isinstance(about.state, BoundaryObject) else None
    path = capture(about.type_name, about.fields, delivery.violations, state=state)
    if path is not None:
        delivery.kept_at = str(path)


@contextlib.contextmanager
def keeping_nothing() -> Iterator[None]:
    """No snapshot is written for what is delivered inside the block (in this thread or
    task): re-checking a snapshot must not write another."""
    token = _muted.set(True)
    try:
        yield
    finally:
        _muted.reset(token)


def capture(subject: str, fields: Mapping[str, Any],
            violations: ContractViolation | Sequence[Violation], *,
            state: BoundaryObject | None = None) -> Path | None:
    """Write a snapshot if ``SPECGUARD_SNAPSHOT_DIR`` is set; never raises.

    ``violations`` are those reported (a :class:`ContractViolation` stands for its own).
    """
    global _written
    directory = os.environ.get(ENV_DIR, "").strip()
    if not directory or _written >= MAX_PER_PROCESS:
        return None
    found = violations.violations if isinstance(violations, ContractViolation) \
        else tuple(violations)
    try:
        path = write(Path(directory), subject, fields, found, state=state)
    except (OSError, ValueError, TypeError) as problem:
        _log.warning("specguard: could not write a snapshot to %s: %s", directory, problem)
        return None
    _written += 1
    _log.warning("specguard: snapshot written to %s", path)
    return path


def built(cls: type[B], /, **fields: Any) -> B:
    """``cls(**fields)``; a violation it delivers keeps ``fields`` in a snapshot.

    For engines that build boundary objects themselves: what the constructor reports
    before the object exists keeps the fields it was given.
    """
    return DeliveryContext(None, cls.__name__, fields).construct(cls, fields)


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
    for key, value in record.items():
        if isinstance(value, int) and value not in _INT64:
            record[key] = None
    bindings = violation.bindings
    record["bindings"] = {name: value for name, value in bindings.items() if value in _INT64}
    return record


def _record(obj: BoundaryObject, budget: fmt.Budget) -> dict[str, Any]:
    return {"type": type(obj).__name__,
            "fields": {f.name: fmt.encode(getattr(obj, f.name), budget)
                       for f in fields_of(type(obj))}}


listen(keep)
