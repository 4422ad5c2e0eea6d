"""Small clean boundary objects for the contract tests, on either backend and id dtype.

Each builder returns the keyword arguments of one valid object; tests change a field or
two and construct it. Integer numpy arrays follow the requested backend and dtype; any
other value (a list, a float array, a string) is passed through as it is.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard import contracts

BACKENDS = ("numpy", "torch")
ID_DTYPES = ("int32", "int64")

# Five seqs, decode at batch positions 0, 2 and 4; ids differ from positions on purpose.
_SCHEDULED: dict[str, Any] = {
    "mtp_k": 2,
    "vocab_size": 32,
    "block_size": 4,
    "num_decode": 3,
    "num_tokens": 15,
    "seq_ids": np.array([40, 41, 42, 43, 44]),
    "is_decode": np.array([True, False, True, False, True]),
    "num_scheduled_tokens": np.array([3, 4, 3, 2, 3]),
    "context_lens": np.array([9, 4, 17, 6, 4]),
    "block_tables": np.array([
        [0, 1, 2, -1, -1],
        [3, -1, -1, -1, -1],
        [4, 5, 6, 7, 8],
        [9, 10, -1, -1, -1],
        [11, -1, -1, -1, -1],
    ]),
    "token_ids": np.arange(15) % 32,
    "draft_token_ids": np.array([[5, 6], [7, 8], [0, 0]]),
    "num_drafts": np.array([2, 2, 0]),
}
_DRAFTS: dict[str, Any] = {
    "mtp_k": 2,
    "vocab_size": 32,
    "seq_ids": np.array([40, 42, 44]),
    "draft_token_ids": np.array([[5, 6], [7, 8], [0, 0]]),
    "num_drafts": np.array([2, 2, 0]),
}
# Three seqs with token spans [0, 3), [3, 5) and [5, 6).
_MODEL_INPUT: dict[str, Any] = {
    "vocab_size": 32,
    "num_slots": 64,
    "num_tokens": 6,
    "seq_ids": np.array([7, 8, 9]),
    "input_ids": np.array([1, 2, 3, 4, 5, 6]),
    "positions": np.array([0, 1, 2, 5, 6, 0]),
    "slot_mapping": np.array([0, 1, 2, 10, 11, -1]),
    "query_start_loc": np.array([0, 3, 5, 6]),
}
_DRAFTER_INPUT: dict[str, Any] = {
    "vocab_size": 32,
    "num_tokens": 6,
    "seq_ids": np.array([7, 8, 9]),
    "input_ids": np.array([1, 2, 3, 4, 5, 6]),
    "positions": np.array([0, 1, 2, 5, 6, 0]),
    "query_start_loc": np.array([0, 3, 5, 6]),
    "sample_indices": np.array([2, 4, 5]),
}
_VERIFY: dict[str, Any] = {
    "mtp_k": 2,
    "vocab_size": 32,
    "seq_ids": np.array([40, 42, 44]),
    "token_ids": np.array([[5, 6, 9], [7, 1, -1], [3, -1, -1]]),
    "num_accepted": np.array([2, 1, 0]),
}
_DRAFTER_OUTPUT: dict[str, Any] = {
    "mtp_k": 2,
    "vocab_size": 32,
    "seq_ids": np.array([7, 8, 9]),
    "draft_token_ids": np.array([[1, 2], [3, 4], [5, 6]]),
}
# Three requests with 2, 0 and 1 drafts: 6 logits rows; the bitmask covers the first and
# the last, the last one's rows first.
_LOGITS_ROWS: dict[str, Any] = {
    "num_logits": 6,
    "num_rows": 5,
    "seq_ids": np.array([40, 42, 44]),
    "num_drafts": np.array([2, 0, 1]),
    "row_starts": np.array([2, -1, 0]),
    "row_counts": np.array([3, 0, 2]),
}
# Seq 42 stops at its end-of-sequence id 2; seq 44 reaches its limit of 4.
_REQUEST_OUTPUT: dict[str, Any] = {
    "vocab_size": 32,
    "seq_ids": np.array([40, 42, 44]),
    "token_ids": np.array([[5, 6, 9], [7, 2, -1], [3, -1, -1]]),
    "num_emitted": np.array([3, 2, 1]),
    "num_generated": np.array([0, 5, 3]),
    "max_new_tokens": np.array([16, 16, 4]),
    "stop_token_ids": np.array([[2], [2], [2]]),
    "finished": np.array([False, True, True]),
}
_TOKENS_ACROSS_RANKS: dict[str, Any] = {
    "dp_size": 3,
    "dp_rank": 2,
    "own_tokens": 6,
    "tokens_across_ranks": np.array([15, 0, 6]),
}

CLEAN: dict[type[contracts.BoundaryObject], dict[str, Any]] = {
    contracts.ScheduledBatch: _SCHEDULED,
    contracts.DraftTokens: _DRAFTS,
    contracts.ModelInput: _MODEL_INPUT,
    contracts.VerifyOutput: _VERIFY,
    contracts.DrafterInput: _DRAFTER_INPUT,
    contracts.DrafterOutput: _DRAFTER_OUTPUT,
    contracts.LogitsRows: _LOGITS_ROWS,
    contracts.RequestOutput: _REQUEST_OUTPUT,
    contracts.TokensAcrossRanks: _TOKENS_ACROSS_RANKS,
}


def convert(value: Any, backend: str = "numpy", dtype: str = "int64") -> Any:
    """An integer numpy array in the given backend and id dtype; anything else unchanged."""
    if not isinstance(value, np.ndarray):
        return value
    if np.issubdtype(value.dtype, np.integer):
        value = value.astype(dtype)
    if backend == "numpy":
        return value.copy()
    import torch

    return torch.from_numpy(value.copy())


def kwargs(
    cls: type[contracts.BoundaryObject], backend: str = "numpy", dtype: str = "int64",
    **changes: Any,
) -> dict[str, Any]:
    """The keyword arguments of a clean ``cls``, with ``changes`` applied."""
    merged = {**CLEAN[cls], **changes}
    return {name: convert(value, backend, dtype) for name, value in merged.items()}


def build(
    cls: type[contracts.BoundaryObject], backend: str = "numpy", dtype: str = "int64",
    **changes: Any,
) -> Any:
    """Construct (and so validate) a clean ``cls`` with ``changes`` applied."""
    return cls(**kwargs(cls, backend, dtype, **changes))


def decode_batch(
    seq_ids: np.ndarray, draft_rows: np.ndarray, num_drafts: np.ndarray, *, mtp_k: int = 3,
    backend: str = "numpy", dtype: str = "int32",
) -> contracts.ScheduledBatch:
    """A decode-only batch of ``len(seq_ids)`` seqs carrying the given draft arrays."""
    n = seq_ids.shape[0]
    width = mtp_k + 1
    return build(
        contracts.ScheduledBatch, backend, dtype,
        mtp_k=mtp_k, vocab_size=1000, block_size=16, num_decode=n, num_tokens=n * width,
        seq_ids=seq_ids, is_decode=np.ones(n, dtype=bool),
        num_scheduled_tokens=np.full(n, width), context_lens=np.full(n, 20),
        block_tables=np.arange(2 * n).reshape(n, 2), token_ids=np.arange(n * width) % 1000,
        draft_token_ids=draft_rows, num_drafts=num_drafts,
    )
