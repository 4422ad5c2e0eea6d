"""What the scheduler hands the runner each step, and its view as a contract object.

The engine keeps its own plain record (numpy arrays, as ATOM's and vLLM's schedulers
do). The runner's entry point is guarded with :func:`scheduled_batch`, a view that builds
the :class:`specguard.contracts.ScheduledBatch` from it: the batch is validated once, where it is
received, and not built at all when contracts are off.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from specguard import contracts
from specguard.adapters import snapshots

__all__ = ["SchedulerOutput", "scheduled_batch"]


@dataclass(frozen=True)
class SchedulerOutput:
    """One step's batch, every per-seq array in batch order (see ScheduledBatch)."""

    mtp_k: int
    vocab_size: int
    block_size: int
    seq_ids: np.ndarray
    is_decode: np.ndarray
    num_scheduled_tokens: np.ndarray
    context_lens: np.ndarray
    """Decode seqs: an upper bound (outputs in flight count as delivered and accepted)."""
    block_tables: np.ndarray
    token_ids: np.ndarray
    """Decode spans hold the anchor repeated: the runner fills in the drafts."""
    draft_token_ids: np.ndarray
    num_drafts: np.ndarray
    samples: np.ndarray
    """bool per seq: it produces a token this step (decode, or its prompt's last chunk)."""
    backup_token_ids: np.ndarray
    """Per seq: the prompt token after a middle chunk, which the drafter reads in place of
    a sampled token (others hold their last scheduled token)."""
    draft_placeholder: int | None = None
    draft_seq_ids: np.ndarray | None = None
    """The seq each draft row was made for, so the contract checks rows are in order."""
    drafts_handed_over: np.ndarray | None = None
    """bool per decode row: its drafts came with a seq prefilled on another instance."""

    @property
    def num_decode(self) -> int:
        """Decode seqs in the batch."""
        return int(np.count_nonzero(self.is_decode))

    @property
    def num_tokens(self) -> int:
        """Scheduled tokens in the batch."""
        return int(self.token_ids.shape[0])


def scheduled_batch(out: SchedulerOutput) -> contracts.ScheduledBatch:
    """The contract view of a step's batch (building it validates it).

    Fields are read by name, so anything shaped like a SchedulerOutput can be checked,
    and a missing field is reported by the contract (SG001) instead of an AttributeError.
    """
    def field(name: str) -> Any:
        return getattr(out, name, None)

    return snapshots.built(contracts.ScheduledBatch,
                           **{name: field(name) for name in _BATCH_FIELDS})


_BATCH_FIELDS = (
    "mtp_k", "vocab_size", "block_size", "num_decode", "num_tokens", "seq_ids", "is_decode",
    "num_scheduled_tokens", "context_lens", "block_tables", "token_ids", "draft_token_ids",
    "num_drafts", "draft_placeholder", "draft_seq_ids", "drafts_handed_over",
)
