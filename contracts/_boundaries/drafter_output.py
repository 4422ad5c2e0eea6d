"""``DrafterOutput``: the next drafts per seq, handed back to the scheduler."""

from __future__ import annotations

from specguard.contracts._boundaries._types import Array, Index
from specguard.contracts._core._contract import BoundaryObject, boundary_object
from specguard.contracts._core._registry import Boundary

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
