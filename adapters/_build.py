"""Build a boundary object the way every adapter hands one over: inside a delivery context.

The constructor validates the object under the current mode, and a violation is
delivered as every violation is (``specguard.contracts.DeliveryContext``): strict raises,
warn logs and the object is returned as built, off looks at nothing. What the adapter
knows and the object does not rides along in the context, read only when a violation is
delivered:

* the engine's own request ids, so that a violation that locates a batch position also
  names the request (vLLM keys requests by strings; contract seq ids are their batch
  positions);
* the fields and the previous step's state, for the snapshot writer, which keeps them
  when ``SPECGUARD_SNAPSHOT_DIR`` is set.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from specguard.contracts import BoundaryObject, DeliveryContext

__all__ = ["build"]

B = TypeVar("B", bound=BoundaryObject)


def build(
    cls: type[B],
    fields: Mapping[str, Any],
    *,
    state: BoundaryObject | None = None,
    names: Sequence[str] | None = None,
    snapshot_fields: Callable[[], Mapping[str, Any]] | None = None,
) -> B:
    """Construct ``cls(**fields)``, validated under the current mode.

    ``names[i]`` is the engine's id of seq ``i``: each violation of that seq names it.
    ``state`` is the previous step's state the object was derived from, kept in a
    snapshot. ``snapshot_fields`` gives the fields a snapshot keeps instead of
    ``fields``, computed only when one is written (an adapter that checked a stand-in of
    a field it did not read at this depth hands the field itself to the snapshot's full
    re-check).
    """
    __tracebackhide__ = True
    return DeliveryContext(names, cls.__name__, fields, state, snapshot_fields).construct(
        cls, fields)
