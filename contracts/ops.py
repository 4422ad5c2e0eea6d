"""Helpers for rule authors: backend-neutral array operations that never sync a device.

A rule's check receives arrays that may be numpy arrays or torch tensors on any device.
These helpers answer the questions every check asks, once, for both backends:

* :func:`arange_like` builds ``arange(n)`` on the backend and device of an array, so a
  comparison against it stays on that device;
* :func:`host_value` reads one element for a message when that costs no device sync (and
  says None otherwise), :func:`value_text` / :func:`number_text` format it;
* :func:`is_int` is the integer test of ids and counts (a bool is not one);
* :func:`unique_non_negative` answers "are these host ids distinct and non-negative?" in
  the cheapest way for their count (a set, a table over a compact span, or one sort);
* :data:`UNSIGNED` maps each index dtype to its unsigned twin, so one maximum over the
  unsigned view bounds an array on both sides;
* :data:`PLACEHOLDER` is the padding id of verify rows and async draft stand-ins (``-1``).

Rules themselves are declared with :func:`specguard.contracts.rule`; see the checklist
in the design page's "Adding a rule".
"""

from specguard.contracts._boundaries._backend_neutral import arange_like as arange_like
from specguard.contracts._boundaries._backend_neutral import ceil_div as ceil_div
from specguard.contracts._boundaries._backend_neutral import clip_columns as clip_columns
from specguard.contracts._boundaries._backend_neutral import number_text as number_text
from specguard.contracts._boundaries._backend_neutral import row_col as row_col
from specguard.contracts._boundaries._backend_neutral import row_entries as row_entries
from specguard.contracts._boundaries._backend_neutral import value_text as value_text
from specguard.contracts._boundaries._backend_neutral import within_columns as within_columns
from specguard.contracts._boundaries._seq_ids import unique_non_negative as unique_non_negative
from specguard.contracts._boundaries.verify_output import PLACEHOLDER as PLACEHOLDER
from specguard.contracts._core._arrays import UNSIGNED as UNSIGNED
from specguard.contracts._core._arrays import array_kind as array_kind
from specguard.contracts._core._arrays import host_value as host_value
from specguard.contracts._core._arrays import is_host as is_host
from specguard.contracts._core._arrays import is_int as is_int

__all__ = [
    "PLACEHOLDER",
    "UNSIGNED",
    "arange_like",
    "array_kind",
    "ceil_div",
    "clip_columns",
    "host_value",
    "is_host",
    "is_int",
    "number_text",
    "row_col",
    "row_entries",
    "unique_non_negative",
    "value_text",
    "within_columns",
]
