"""Banned token ids per request, applied to the logits as a per-row bitmask.

A request may ban tokens (:attr:`Request.banned_token_ids`): every token it is given,
drafted or not, is chosen among the others. The engine applies the bans the way vLLM
applies a structured-output grammar bitmask: the bitmask has one row per logits row of
each constrained request (``1 + K`` for a decode span, its drafts' rows and its bonus
row; one for a prefill's sampled row) and none for the others. Its producer lays the rows
out by its own count of each request's drafts; the runner finds a request's rows by its
own count of the logits rows before it. The two counts must agree: ``LogitsRows``
(SG311-SG312) holds both, and a producer that counts otherwise hands every later
constrained request its neighbour's rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specguard.runner import faults
from specguard.runner.workload import Request

__all__ = ["BanLayout", "TokenBans", "apply_bans"]


@dataclass(frozen=True)
class BanLayout:
    """One step's bitmask and where each sampling request's rows are in it."""

    row_starts: np.ndarray
    """Per sampling request, its first bitmask row as the producer laid it; -1 for none."""
    row_counts: np.ndarray
    """Per sampling request, the bitmask rows the producer gave it; 0 for none."""
    bitmask: torch.Tensor | None
    """``[num_rows, vocab_size]``, True where the row's request bans the token; None when
    no request of the step is constrained."""

    @property
    def num_rows(self) -> int:
        """Rows the bitmask holds."""
        return 0 if self.bitmask is None else int(self.bitmask.shape[0])


class TokenBans:
    """The banned ids of every constrained request, one vocabulary-wide mask each."""

    def __init__(self, vocab_size: int, mtp_k: int, device: torch.device,
                 fault: str | None = None) -> None:
        self.vocab_size = vocab_size
        self.mtp_k = mtp_k
        self.device = device
        self.fault = fault
        self._seq_ids = np.zeros(0, dtype=np.int64)
        """The constrained requests' ids, sorted."""
        self._masks = torch.zeros((0, vocab_size), dtype=torch.bool, device=device)
        """Row ``i``: the bans of request ``_seq_ids[i]``."""

    def add(self, requests: Sequence[Request]) -> None:
        """Register the bans of the requests that have any (their ids must be new).

        ValueError naming the first request whose bans name a token outside the
        vocabulary, or leave it no token at all.
        """
        constrained = [r for r in requests if r.banned_token_ids]
        if not constrained:
            return
        masks = torch.zeros((len(constrained), self.vocab_size), dtype=torch.bool)
        for row, request in enumerate(constrained):
            banned = np.asarray(request.banned_token_ids, dtype=np.int64)
            outside = banned[(banned < 0) | (banned >= self.vocab_size)]
            if outside.size:
                raise ValueError(f"request {request.request_id} bans token {int(outside[0])}, "
                                 f"outside the vocabulary [0, {self.vocab_size})")
            masks[row, torch.as_tensor(banned)] = True
            if bool(masks[row].all()):
                raise ValueError(f"request {request.request_id} bans every token of the "
                                 f"vocabulary ({self.vocab_size})")
        ids = np.concatenate([self._seq_ids, [r.request_id for r in constrained]])
        order = np.argsort(ids, kind="stable")
        self._seq_ids = ids[order]
        grown = torch.cat([self._masks, masks.to(self.device)])
        self._masks = grown[torch.as_tensor(order, device=self.device)]

    def mask_rows(self, seq_ids: np.ndarray) -> np.ndarray:
        """Each seq's row of the mask table, -1 for a seq that bans nothing."""
        rows = np.full(seq_ids.shape, -1, dtype=np.int64)
        if self._seq_ids.size == 0 or seq_ids.size == 0:
            return rows
        found = np.searchsorted(self._seq_ids, seq_ids).clip(max=self._seq_ids.size - 1)
        hit = self._seq_ids[found] == seq_ids
        rows[hit] = found[hit]
        return rows

    def layout(self, seq_ids: np.ndarray, is_decode: np.ndarray,
               num_scheduled: np.ndarray) -> BanLayout:
        """The producer's side: the bitmask of the sampling requests ``seq_ids`` (in the
        runner's order), ``1 +`` the drafts it counts for each constrained one, that is
        its scheduled tokens for a decode span and 1 for a prefill's sampled row."""
        count = seq_ids.shape[0]
        mask_rows = self.mask_rows(seq_ids)
        covered = mask_rows >= 0
        if not covered.any():
            return BanLayout(np.full(count, -1, dtype=np.int64),
                             np.zeros(count, dtype=np.int64), None)
        counted = np.where(is_decode, num_scheduled, 1).astype(np.int64)
        if self.fault == faults.MISALIGNED_LOGITS_ROWS:
            # Every request counted as a full decode span (its mtp_k drafts' rows and its
            # bonus row), a prefill that samples one row included.
            counted = np.full(count, 1 + self.mtp_k, dtype=np.int64)
        counts = np.where(covered, counted, 0)
        ends = np.cumsum(counts)
        starts = np.where(covered, ends - counts, -1)
        owners = np.repeat(mask_rows[covered], counts[covered])
        return BanLayout(starts, counts,
                         self._masks[torch.as_tensor(owners, device=self.device)])


def apply_bans(logits: torch.Tensor, layout: BanLayout, logits_counts: np.ndarray) -> None:
    """The runner's side: bans applied in place to ``logits``, whose rows are the
    sampling requests' rows in order, ``logits_counts`` of them per request.

    The runner takes the bitmask's rows in its own order, each constrained request's
    ``logits_counts`` rows after the previous one's, as vLLM's runner does: it counts
    the rows itself and never reads the producer's ``row_starts``.
    """
    if layout.bitmask is None:
        return
    covered = layout.row_starts >= 0
    counts = logits_counts[covered]
    firsts = (np.cumsum(logits_counts) - logits_counts)[covered]
    within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    rows = torch.as_tensor(np.repeat(firsts, counts) + within, device=logits.device)
    # By the runner's count, the constrained requests' rows follow each other from row 0.
    taken = torch.arange(rows.shape[0], device=logits.device)
    logits[rows] = logits[rows].masked_fill(layout.bitmask[taken], float("-inf"))
