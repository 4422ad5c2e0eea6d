"""``LogitsRows``: per-row data of the logits laid against the runner's ``1 + K`` rows.

With speculative decoding the logits hold one row per draft plus one for the bonus (or
next) token of each request: ``1 + K`` rows, ``K`` the drafts the request is scheduled
this step. Everything that acts on the logits row by row (a structured-output grammar
bitmask, per-row penalties or temperatures) arrives from somewhere else, laid out by its
producer, and the runner has to find each request's rows in it. The producer counts a
request's drafts when it fills its rows, the runner counts them again when it lays out
the logits; when the two counts differ (drafts trimmed on one side only, a request
dropped between them) every request after the first difference gets its neighbour's
rows, and a grammar that lets a token through for one request lets it through for
another.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._boundaries._backend_neutral import host_value, value_text
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._arrays import array_kind
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import ValueChecks
from specguard.contracts._core._violation import Finding

__all__ = ["LogitsRows"]


@boundary_object(Boundary.MODEL_INPUT, minimums={"num_logits": 0, "num_rows": 0})
class LogitsRows(BoundaryObject):
    """Where each request's ``1 + K`` logits rows find their rows of per-row data.

    The requests are those the runner samples, in its batch order; request ``i`` owns
    ``1 + num_drafts[i]`` logits rows, and, when the per-row data covers it, the rows
    ``row_starts[i] : row_starts[i] + row_counts[i]`` of that data.
    """

    num_logits: int
    """Rows of the logits the runner samples from."""
    num_rows: int
    """Rows the per-row data holds (a grammar bitmask's first dimension)."""
    seq_ids: Index[Array, "num_seqs"]
    """The requests with logits rows, in the runner's batch order."""
    num_drafts: Index[Array, "num_seqs"]
    """Drafts each request is scheduled this step, as the runner lays out the logits."""
    row_starts: Index[Array, "num_seqs"]
    """First row of each request's rows in the per-row data; ``-1`` where it has none."""
    row_counts: Index[Array, "num_seqs"]
    """Rows the per-row data holds for each request, as its producer laid them out (one
    plus the drafts it counted); 0 where it has none."""


_ROWS = ("LogitsRows",)


@rule("SG311", "the logits hold one row per request plus one per draft",
      boundary=Boundary.MODEL_INPUT, applies_to=_ROWS,
      fields={"num_logits", "num_drafts"},
      bug="vLLM #49738: the runner trimmed draft slots the engine core had counted, so "
      "the logits no longer had the rows the grammar bitmask was laid out for.",
      depth=Depth.ESSENTIAL)
def _logits_layout(rows: LogitsRows, values: ValueChecks) -> Finding | None:
    """Every consumer of the logits (the rejection sampler, the bitmask, the logprobs)
    finds request ``i``'s rows by summing ``1 + K`` over the requests before it. A
    negative draft count, or logits with another number of rows, puts every later
    request's rows somewhere else."""
    drafts = rows.num_drafts
    found = values.below(drafts, 0, lambda i: Finding(
        f"draft count{value_text(drafts, i)}", "num_drafts", position=i, expected=">= 0"))
    if found:
        return found
    total = drafts.sum() + drafts.shape[0]  # stays on the device: the verdict is deferred

    def explain(_: int) -> Finding:
        expected = host_value(total.reshape(1), 0)
        counted = "their" if expected is None else str(expected - drafts.shape[0])
        return Finding(f"the logits have {rows.num_logits} rows for {drafts.shape[0]} "
                       f"requests and {counted} drafts", "num_logits",
                       expected=f"num_seqs + sum(num_drafts)={expected}",
                       actual=str(rows.num_logits))

    return values.any_true(total != rows.num_logits, explain)


@rule("SG312", "per-row data gives each request its 1 + K rows, inside the data",
      boundary=Boundary.MODEL_INPUT, applies_to=_ROWS,
      fields={"row_starts", "row_counts", "num_drafts", "num_rows"},
      bug="vLLM #49738 (fixes #49694): with async scheduling the engine core laid out the "
      "grammar bitmask with the drafts it scheduled while the runner had trimmed some, so "
      "later requests in the batch got the previous request's bitmask rows and "
      "grammar-invalid drafts passed verification.", depth=Depth.ESSENTIAL)
def _rows_of_requests(rows: LogitsRows, values: ValueChecks) -> Finding | None:
    """The runner applies the data's rows to a request's logits rows one to one. A
    request whose producer counted other drafts than the runner has too few rows (the
    last logits rows go unconstrained) or too many (every later request reads its
    neighbour's rows); rows past the end of the data, or rows two requests share, give a
    request rows that were never meant for it."""
    starts, counts, drafts = rows.row_starts, rows.row_counts, rows.num_drafts
    covered = starts >= 0
    found = values.any_true(starts < -1, lambda i: Finding(
        f"row start{value_text(starts, i)}", "row_starts", position=i,
        expected="a row of the data, or -1 for none"))
    if found:
        return found
    def explain_counts(i: int) -> Finding:
        drafted = host_value(drafts, i)
        rows = "another number" if drafted is None else str(drafted + 1)
        return Finding(f"the data holds {host_value(counts, i)} rows for it, the logits "
                       f"{rows}", "row_counts", position=i, expected="1 + num_drafts")

    found = values.any_true(covered & (counts != drafts + 1), explain_counts)
    if found:
        return found
    found = values.any_true(~covered & (counts != 0), lambda i: Finding(
        f"the data holds {host_value(counts, i)} rows for it but no first row",
        "row_counts", position=i, expected="0 rows for a request the data does not cover"))
    if found:
        return found
    ends = starts + counts
    found = values.any_true(covered & (ends > rows.num_rows), lambda i: Finding(
        f"its rows {host_value(starts, i)}..{host_value(ends, i)} run past the "
        f"{rows.num_rows} rows of the data", "row_starts", position=i,
        expected=f"rows within [0, num_rows={rows.num_rows})"))
    if found:
        return found
    return _overlap(starts, ends, covered, values)


def _overlap(starts: Any, ends: Any, covered: Any, values: ValueChecks) -> Finding | None:
    """The first request whose rows begin inside another request's rows: in order of
    their first rows, each covered request starts where the one before it ends, or
    after (uncovered requests sort last, out of the way)."""
    count = starts.shape[0]
    if count < 2:
        return None
    past = ends.max() + 1
    order: Any
    if array_kind(starts) == "torch":
        import torch

        order = torch.argsort(torch.where(covered, starts, past), stable=True)
    else:
        order = np.argsort(np.where(covered, starts, past), kind="stable")
    first, second = order[:-1], order[1:]
    clash = covered[first] & covered[second] & (starts[second] < ends[first])

    def explain(i: int) -> Finding:
        before, at = host_value(order, i), host_value(order, i + 1)
        if before is None or at is None:
            return Finding("two requests share rows of the data", "row_starts",
                           expected="rows of their own")
        return Finding(f"its rows start at {host_value(starts, at)}, inside the rows "
                       f"{host_value(starts, before)}..{host_value(ends, before)} of batch "
                       f"position {before}", "row_starts", position=at,
                       expected="rows of its own")

    return values.any_true(clash, explain)
