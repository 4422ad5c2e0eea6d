"""The benchmark's input: a decode batch as a scheduler would hand it over.

Every seq is decoding: ``mtp_k + 1`` scheduled tokens, one draft row and the seq it
belongs to, a block table padded with -1 to the longest context and a per-request state
slot (so that every rule
of :class:`specguard.contracts.ScheduledBatch` has something to check). numpy batches use int32
throughout; torch batches keep int64 token ids, as ``F.embedding`` wants them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard import contracts

__all__ = [
    "BLOCK_SIZE",
    "MAX_CONTEXT",
    "MTP_K",
    "VOCAB_SIZE",
    "Fields",
    "build",
    "decode_batch",
    "to_torch",
]

MTP_K = 3
VOCAB_SIZE = 129280
BLOCK_SIZE = 16
#: Longest context of the batch; block tables are padded to cover it.
MAX_CONTEXT = 4096

Fields = dict[str, Any]

_TORCH_INT64 = frozenset({"seq_ids", "token_ids", "draft_token_ids", "draft_seq_ids"})


def decode_batch(num_seqs: int, *, num_prefill: int = 0, seed: int = 0) -> Fields:
    """Keyword arguments of a clean :class:`specguard.contracts.ScheduledBatch` (numpy, int32).

    The first ``num_prefill`` seqs are prefill chunks of 1 to 32 tokens; the rest decode.
    """
    rng = np.random.default_rng(seed)
    num_decode = num_seqs - num_prefill
    seq_ids = rng.permutation(4 * num_seqs)[:num_seqs].astype(np.int32)
    is_decode = np.arange(num_seqs) >= num_prefill
    scheduled = np.where(is_decode, MTP_K + 1, rng.integers(1, 33, num_seqs)).astype(np.int32)
    context = rng.integers(MTP_K + 1, MAX_CONTEXT + 1, num_seqs).astype(np.int32)
    # A decode seq continues a prompt prefilled before it: one token more than it schedules.
    context = np.maximum(context, scheduled + is_decode)
    num_tokens = int(scheduled.sum())
    num_drafts = rng.integers(0, MTP_K + 1, num_decode).astype(np.int32)
    return {
        "mtp_k": MTP_K,
        "vocab_size": VOCAB_SIZE,
        "block_size": BLOCK_SIZE,
        "num_decode": num_decode,
        "num_tokens": num_tokens,
        "seq_ids": seq_ids,
        "is_decode": is_decode,
        "num_scheduled_tokens": scheduled,
        "context_lens": context,
        "block_tables": _block_tables(context, rng),
        "token_ids": rng.integers(0, VOCAB_SIZE, num_tokens).astype(np.int32),
        "draft_token_ids": _drafts(num_drafts, rng),
        "num_drafts": num_drafts,
        "state_slots": rng.permutation(num_seqs).astype(np.int32),
        "draft_seq_ids": seq_ids[is_decode],
    }


def _block_tables(context: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    max_blocks = -(-MAX_CONTEXT // BLOCK_SIZE)
    needed = -(-context // BLOCK_SIZE)
    ids = rng.permutation(context.shape[0] * max_blocks).astype(np.int32)
    ids = ids.reshape(context.shape[0], max_blocks)
    used = np.arange(max_blocks)[None, :] < needed[:, None]
    return np.where(used, ids, np.int32(-1))


def _drafts(num_drafts: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    drafts = rng.integers(0, VOCAB_SIZE, (num_drafts.shape[0], MTP_K)).astype(np.int32)
    real = np.arange(MTP_K)[None, :] < num_drafts[:, None]
    return np.where(real, drafts, np.int32(0))


def to_torch(fields: Fields) -> Fields:
    """The same batch as CPU tensors sharing no memory with the numpy arrays."""
    import torch

    converted: Fields = {}
    for name, value in fields.items():
        if isinstance(value, np.ndarray):
            tensor = torch.from_numpy(value.copy())
            converted[name] = tensor.long() if name in _TORCH_INT64 else tensor
        else:
            converted[name] = value
    return converted


def build(fields: Fields) -> contracts.ScheduledBatch:
    """A ScheduledBatch of ``fields``, built without validation (for re-validation)."""
    with contracts.checking(mode="off"):
        return contracts.ScheduledBatch(**fields)
