"""``DrafterOutput``: the next drafts per seq, handed back to the scheduler."""

from __future__ import annotations

from specguard.contracts._boundaries._backend_neutral import value_text
from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._config import Depth
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary, rule
from specguard.contracts._core._values import ValueChecks
from specguard.contracts._core._violation import Finding

__all__ = ["DrafterOutput"]


@boundary_object(Boundary.DRAFT_OUTPUT, minimums={"mtp_k": 1, "vocab_size": 1})
class DrafterOutput(BoundaryObject):
    """The MTP head's proposals: ``(num_seqs, mtp_k)`` ids, one row per seq it ran on.

    Rows follow the drafter's batch order; the scheduler matches them to requests through
    ``seq_ids`` (never by position alone). Rule SG108 keeps every id in the vocabulary,
    so a draft argmax over a padded lm_head cannot feed an out-of-range id back.
    """

    mtp_k: int
    """Draft tokens per seq."""
    vocab_size: int
    """Vocabulary size of the embedding the drafts will be fed to."""
    seq_ids: Index[Array, "num_seqs"]
    """The seqs the drafter ran on, in its batch order."""
    draft_token_ids: Index[Array, "num_seqs mtp_k"]
    """Proposed ids, every one in ``[0, vocab_size)``."""
    num_proposed: Index[Array, "num_seqs"] | None = None
    """Per row, how many of its drafts the drafter really proposed, in ``[0, mtp_k]``:
    the first ``num_proposed`` entries are drafts, the rest of the row is placeholder (a
    skipped or dummy drafter's zeros, a discarded chunked-prefill row, a seq past the
    drafter's context limit). None when every row is a whole proposal."""


@rule("SG116", "proposed counts are within [0, mtp_k]",
      boundary=Boundary.DRAFT_OUTPUT, applies_to=("DrafterOutput",),
      fields={"num_proposed", "mtp_k"},
      bug="vLLM GPUModelRunner: a step whose longest seq does not fit the drafter "
      "(input_fits_in_drafter=False) runs no drafter, and the drafts scheduled for it "
      "must be stripped; a count outside [0, mtp_k] schedules slots nobody proposed.",
      depth=Depth.ESSENTIAL)
def _proposed_counts(out: DrafterOutput, values: ValueChecks) -> Finding | None:
    """The scheduler takes a row's first ``num_proposed`` entries as the seq's next
    drafts and treats the rest as placeholders. A negative count, or one past the row,
    makes it schedule placeholder slots (a dummy drafter's zeros) as real drafts, or
    slice past the row. Checked at the default depth: one range check per seq."""
    counts = out.num_proposed
    if counts is None:
        return None
    return values.outside(counts, 0, int(out.mtp_k) + 1, lambda i: Finding(
        f"proposed count{value_text(counts, i)}", "num_proposed", position=i,
        expected=f"0..mtp_k={out.mtp_k}"))
