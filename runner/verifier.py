"""Greedy verification: accept drafts while they match the target's own argmax.

Row ``i`` of the result holds the accepted drafts, then the target's token at the first
mismatch (or the bonus token when every draft matched), then ``-1``: the left-packed
layout of a rejection sampler. Placeholder slots (past a row's real drafts) are never
accepted, so a seq without drafts still gains exactly one token.
"""

from __future__ import annotations

import torch

from specguard import contracts
from specguard.runner._timing import CLOCK

__all__ = ["verify_greedy"]


def verify_greedy(
    *, seq_ids: torch.Tensor, draft_token_ids: torch.Tensor, target_token_ids: torch.Tensor,
    num_drafts: torch.Tensor, mtp_k: int, vocab_size: int,
) -> contracts.VerifyOutput:
    """Verify ``[n, mtp_k]`` drafts against the target's ``[n, mtp_k + 1]`` argmax tokens.

    ``target_token_ids[:, j]`` is the target's choice after the span's ``j``-th token, so
    draft ``j`` is accepted when it equals ``target_token_ids[:, j]`` and every draft
    before it was accepted.
    """
    columns = torch.arange(mtp_k, device=draft_token_ids.device)
    match = (draft_token_ids == target_token_ids[:, :mtp_k]) & (columns < num_drafts[:, None])
    num_accepted = match.to(torch.int64).cumprod(dim=1).sum(dim=1)
    width = torch.arange(mtp_k + 1, device=draft_token_ids.device)
    keep = width[None, :] <= num_accepted[:, None]
    rows = torch.where(keep, target_token_ids, torch.full_like(target_token_ids,
                                                               contracts.PLACEHOLDER))
    return CLOCK.build(contracts.VerifyOutput, mtp_k=mtp_k, vocab_size=vocab_size,
                    seq_ids=seq_ids, token_ids=rows, num_accepted=num_accepted)
