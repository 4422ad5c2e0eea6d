"""Build a boundary object the way every adapter hands one over.

Three things happen around the constructor, and nowhere else:

* violations that locate a batch position also name the engine's own request id (vLLM
  keys requests by strings; contract seq ids are their batch positions);
* a violation that is about to be raised is first written to a snapshot file when
  ``SPECGUARD_SNAPSHOT_DIR`` is set, with the previous step's state it was checked against;
* the mode is honoured exactly as the contracts do: strict raises, warn logs and returns
  the object anyway, off builds it without looking.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from specguard.adapters._snapshot_write import capture
from specguard.contracts import (
    BoundaryObject,
    ContractViolation,
    Mode,
    Violation,
    checking,
    current_config,
    warn,
)

__all__ = ["build", "made", "name_violations"]

B = TypeVar("B", bound=BoundaryObject)
T = TypeVar("T")



def build(
    cls: type[B],
    fields: Mapping[str, Any],
    *,
    state: BoundaryObject | None = None,
    names: Sequence[str] | None = None,
    snapshot_fields: Callable[[], Mapping[str, Any]] | None = None,
) -> B:
    """Construct ``cls(**fields)``, validated under the current mode.

    ``names[i]`` is the engine's id of seq ``i`` (see :func:`name_violations`); ``state``
    is the previous step's state the object was derived from, kept in a snapshot.
    ``snapshot_fields`` gives the fields a snapshot keeps instead of ``fields``, computed
    only when one is written (an adapter that checked a stand-in of a field it did not
    read at this depth hands the field itself to the snapshot's full re-check).
    """
    return made(lambda: cls(**fields), snapshot=(cls.__name__, fields, state), names=names,
                snapshot_fields=snapshot_fields)


def made(
    factory: Callable[[], T],
    *,
    snapshot: tuple[str, Mapping[str, Any], Any] | None = None,
    names: Sequence[str] | None = None,
    snapshot_fields: Callable[[], Mapping[str, Any]] | None = None,
) -> T:
    """Run ``factory`` (which builds boundary objects) the way :func:`build` does.

    ``snapshot`` is ``(type name, fields, previous state)``: what to write when a
    violation is about to be raised.
    """
    mode = current_config().mode
    if mode is Mode.OFF:
        return factory()
    try:
        if mode is Mode.STRICT:  # already raising: no override to set up per object
            return factory()
        with checking(mode=Mode.STRICT):
            return factory()
    except ContractViolation as error:
        named = name_violations(error, names)
        if mode is Mode.STRICT:
            if snapshot is not None:
                _snapshot(*snapshot, named, snapshot_fields)
            raise named from None
        for violation in named.violations:
            warn(violation)
    with checking(mode=Mode.OFF):
        return factory()


def name_violations(error: ContractViolation, names: Sequence[str] | None) -> ContractViolation:
    """The same violations, each reason prefixed with the engine's id of its seq.

    ``names[i]`` names seq id ``i`` (adapters that need names use batch positions as seq
    ids); a violation without a seq id is named by its batch position.
    """
    if not names or not error.violations:
        return error
    renamed = [_named(v, names) for v in error.violations]
    return type(error).from_violations(error.violations[0].subject, renamed)


def _named(violation: Violation, names: Sequence[str]) -> Violation:
    index = violation.seq_id if violation.seq_id is not None else violation.position
    if index is None or not 0 <= index < len(names):
        return violation
    return dataclasses.replace(violation, reason=f"request {names[index]!r}: {violation.reason}")


def _snapshot(
    subject: str, fields: Mapping[str, Any], state: Any, error: ContractViolation,
    snapshot_fields: Callable[[], Mapping[str, Any]] | None = None,
) -> None:
    if snapshot_fields is not None:
        # The violation being raised matters more than a better snapshot.
        with contextlib.suppress(Exception):
            fields = snapshot_fields()
    capture(subject, fields, error, state=state)
