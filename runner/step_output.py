"""A forward's outputs once they reach the host: what the scheduler receives a step later."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specguard.runner.step_relations import StepTrace

__all__ = ["StepResult"]


@dataclass(frozen=True)
class StepResult:
    """The sampled tokens and next drafts of one forward, rows in that forward's order."""

    seq_ids: np.ndarray
    """``[n]`` the forward's seqs, in its batch order."""
    token_ids: np.ndarray
    """``[n, width]`` new tokens per seq, ``-1`` padded; a middle prefill chunk has none."""
    draft_token_ids: np.ndarray
    """``[n, mtp_k]`` drafts proposed after each seq's last new token."""
    is_decode: np.ndarray
    """``[n]`` the row verified drafts (a decode seq) rather than ending a prefill."""
    num_drafts: np.ndarray
    """``[n]`` real drafts the verifier saw in each decode row (0 for prefill rows)."""
    num_proposed: np.ndarray | None = None
    """``[n]`` drafts the drafter really proposed per row (the rest of the row is
    placeholder); None when every row is a whole proposal."""
    trace: StepTrace | None = None
    """What the step tracker reads of the forward; recorded only when relations are checked."""

    @property
    def num_new_tokens(self) -> np.ndarray:
        """``[n]`` tokens each row produced."""
        return np.asarray((self.token_ids >= 0).sum(axis=1))

    def accepted_drafts(self) -> int:
        """Drafts accepted over all decode rows: a row's tokens minus its correction."""
        return int((self.num_new_tokens[self.is_decode] - 1).sum())

    def proposed_drafts(self) -> int:
        """Drafts verified over all decode rows."""
        return int(self.num_drafts[self.is_decode].sum())
