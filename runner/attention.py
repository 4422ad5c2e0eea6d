"""Causal attention over the paged KV cache, one group of equal-length queries at a time.

A group is ``n`` seqs with ``q`` query tokens each (all decode spans of a step share
``q = mtp_k + 1``; a prefill chunk is a group of its own). Keys are gathered through each
seq's slots and masked by position, so a key is visible to a query exactly when its
position is not later than the query's: stale slots past a seq's context never count.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["AttentionGroup", "attend", "make_group"]


@dataclass(frozen=True)
class AttentionGroup:
    """Queries of ``n`` seqs, ``q`` tokens each, against the first ``c`` slots of each seq."""

    token_index: torch.Tensor
    """``[n, q]`` rows of the flat token stream that are this group's queries."""
    key_slots: torch.Tensor
    """``[n, c]`` KV-cache slots holding each seq's keys, in position order."""
    visible: torch.Tensor
    """``[n, 1, q, c]`` True where the key's position is not after the query's."""


def make_group(
    token_index: torch.Tensor, key_slots: torch.Tensor, positions: torch.Tensor
) -> AttentionGroup:
    """A group whose query positions are read from the step's flat ``positions``."""
    query_positions = positions[token_index]
    key_positions = torch.arange(key_slots.shape[1], device=key_slots.device)
    visible = key_positions[None, None, :] <= query_positions[:, :, None]
    return AttentionGroup(token_index, key_slots, visible[:, None])


def attend(
    queries: torch.Tensor, keys: torch.Tensor, values: torch.Tensor,
    groups: list[AttentionGroup],
) -> torch.Tensor:
    """Attention output for every token of the flat stream: ``[tokens, heads, dim]``.

    ``queries`` is ``[tokens, heads, dim]``; ``keys`` and ``values`` are one layer's cache.
    """
    out = torch.zeros_like(queries)
    for group in groups:
        q = queries[group.token_index].transpose(1, 2)          # [n, heads, q, dim]
        k = keys[group.key_slots].transpose(1, 2)                # [n, heads, c, dim]
        v = values[group.key_slots].transpose(1, 2)
        mixed = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=group.visible)
        out[group.token_index] = mixed.transpose(1, 2)
    return out
