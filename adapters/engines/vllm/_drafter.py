"""The token stream vLLM's ``EagleProposer.propose`` embeds, rebuilt from its inputs.

``propose`` shifts the target's ids left by one (``input_ids[:n-1] = target_token_ids[1:]``)
and writes each request's next token at its ``last_token_indices`` entry; the MTP head
then embeds that buffer. Rebuilding it is one vectorised copy of the target ids, on
their own backend and device (no sync). The slot left free by the shift holds a stale
value in vLLM; here it holds the first target id.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts import Finding, report
from specguard.contracts.ops import arange_like

__all__ = ["attention_fields", "drafter_fields", "span_ends"]


def drafter_fields(*, vocab_size: int, target_token_ids: Any, target_positions: Any,
                   next_token_ids: Any, last_token_indices: Any,
                   query_start_loc: Any) -> dict[str, Any]:
    """The fields of a ``specguard.contracts.DrafterInput`` for one ``propose()`` call.

    ``last_token_indices=None`` is what ``GPUModelRunner.propose_draft_token_ids`` passes
    when the step has no spec-decode metadata, and always on the non-padded drafter path;
    ``propose`` then samples at ``query_start_loc[1:] - 1``, each request's last token
    (vLLM 0.11.0 and 0.11.1 ``EagleProposer.propose``; 0.33.0 calls the argument
    ``token_indices_to_sample``, ``SpecDecodeBaseProposer.propose``). The view does the same.
    """
    if last_token_indices is None:
        last_token_indices = span_ends(query_start_loc)
    ids = _embedded(target_token_ids, next_token_ids, last_token_indices)
    seqs = _length(query_start_loc) - 1
    return {
        "vocab_size": vocab_size, "num_tokens": _length(target_token_ids),
        "seq_ids": arange_like(query_start_loc, max(seqs, 0)), "input_ids": ids,
        "positions": target_positions, "query_start_loc": query_start_loc,
        "sample_indices": last_token_indices,
    }


def attention_fields(common_attn_metadata: Any) -> dict[str, Any]:
    """The first pass's attention metadata, as ``propose`` hands it to the drafter's
    attention builder (``build_for_drafting(common_attn_metadata, draft_index=0)``):
    ``seq_lens`` and ``max_seq_len``, when the metadata has them. Nothing is read from
    a device: the contract compares them there."""
    seq_lens = getattr(common_attn_metadata, "seq_lens", None)
    if seq_lens is None or not _is_vector(seq_lens):
        return {}
    fields: dict[str, Any] = {"seq_lens": seq_lens, "draft_step": 0}
    longest = getattr(common_attn_metadata, "max_seq_len", None)
    if isinstance(longest, int) and not isinstance(longest, bool):
        fields["max_seq_len"] = longest
    return fields


def span_ends(query_start_loc: Any) -> Any:
    """``query_start_loc[1:] - 1`` on its own backend and device, or None when it is not
    a vector (the contract then reports the malformed field)."""
    if not _is_vector(query_start_loc) or _length(query_start_loc) < 1:
        return None
    return query_start_loc[1:] - 1


def _length(array: Any) -> int:
    shape = tuple(getattr(array, "shape", ()))
    return int(shape[0]) if len(shape) == 1 else 0


def _is_vector(array: Any) -> bool:
    return len(tuple(getattr(array, "shape", ()))) == 1 and hasattr(array, "dtype")


def _integer(array: Any) -> bool:
    name = str(array.dtype).removeprefix("torch.")
    return name in {"int32", "int64"}


def _embedded(target: Any, next_ids: Any, last: Any) -> Any:
    """Shifted target ids with next tokens scattered in, or ``target`` when it cannot be
    built (the contract then reports the malformed field)."""
    arrays = (target, next_ids, last)
    if not all(_is_vector(a) for a in arrays) or not all(_integer(a) for a in arrays):
        return target
    if type(target) is not type(next_ids) or type(target) is not type(last):
        return target
    n = _length(target)
    if _length(next_ids) != _length(last):
        report("DrafterInput", [("SG004", Finding(
            f"{_length(next_ids)} next tokens for {_length(last)} sample indices",
            "next_token_ids", expected=f"{_length(last)} entries"))])
        return target
    if n == 0:
        return target
    if isinstance(target, np.ndarray):
        return _scatter_numpy(target, next_ids, last)
    return _scatter_torch(target, next_ids, last)


def _scatter_numpy(target: np.ndarray, next_ids: np.ndarray, last: np.ndarray) -> np.ndarray:
    n = target.shape[0]
    ids = np.roll(target, -1)
    inside = (last >= 0) & (last < n)
    ids[last[inside]] = next_ids[inside]
    return ids


def _scatter_torch(target: Any, next_ids: Any, last: Any) -> Any:
    import torch

    if target.device != next_ids.device or target.device != last.device:
        return target
    n = target.shape[0]
    ids = torch.roll(target, -1)
    # Out-of-range indices write the value already there: no data-dependent shapes, no sync.
    inside = (last >= 0) & (last < n)
    at = last.clamp(0, n - 1).long()
    values = torch.where(inside, next_ids.to(ids.dtype), ids[at])
    return ids.index_put((at,), values)
