"""The naive baseline: the same rules, written the obvious way with off-the-shelf tools.

Shapes and dtypes are jaxtyping annotations checked by ``@jaxtyped(typechecker=beartype)``
on the constructor function (which binds the named dimensions across its arguments);
the object is a pydantic model whose fields carry the same annotations and whose
``model_validator`` checks the scalars' ranges and every value rule, one rule after the
other, as an engine author would write them without a contract layer. It accepts numpy
arrays and CPU torch tensors.
"""

from __future__ import annotations

from typing import Any, Union

import numpy as np
import pydantic
import torch
from beartype import beartype
from jaxtyping import Bool, Int, jaxtyped

__all__ = ["NaiveBatch", "naive_batch"]

_Array = Union[np.ndarray, torch.Tensor]


class NaiveBatch(pydantic.BaseModel):
    """A ScheduledBatch as a pydantic model with jaxtyping-annotated arrays."""

    model_config = pydantic.ConfigDict(arbitrary_types_allowed=True, frozen=True, strict=True)

    mtp_k: int = pydantic.Field(ge=1)
    vocab_size: int = pydantic.Field(ge=1)
    block_size: int = pydantic.Field(ge=1)
    num_decode: int = pydantic.Field(ge=0)
    num_tokens: int = pydantic.Field(ge=0)
    seq_ids: Int[_Array, "num_seqs"]
    is_decode: Bool[_Array, "num_seqs"]
    num_scheduled_tokens: Int[_Array, "num_seqs"]
    context_lens: Int[_Array, "num_seqs"]
    block_tables: Int[_Array, "num_seqs max_blocks"]
    token_ids: Int[_Array, "num_tokens"]
    draft_token_ids: Int[_Array, "num_decode mtp_k"]
    num_drafts: Int[_Array, "num_decode"]
    state_slots: Int[_Array, "num_seqs"] | None = None
    draft_placeholder: int | None = None
    draft_seq_ids: Int[_Array, "num_decode"] | None = None

    @pydantic.model_validator(mode="after")
    def _rules(self) -> NaiveBatch:
        _same_backend(self)
        _dimensions(self)
        _seq_ids(self)
        _phases(self)
        _drafts(self)
        _blocks(self)
        _tokens(self)
        _owners(self)
        return self


def _fail(code: str, reason: str) -> None:
    raise ValueError(f"{code}: {reason}")


def _same_backend(b: NaiveBatch) -> None:
    arrays = [b.seq_ids, b.is_decode, b.num_scheduled_tokens, b.context_lens, b.block_tables,
              b.token_ids, b.draft_token_ids, b.num_drafts]
    arrays += [a for a in (b.state_slots, b.draft_seq_ids) if a is not None]
    if len({type(a) for a in arrays}) != 1:
        _fail("SG005", "all arrays share one backend")


def _dimensions(b: NaiveBatch) -> None:
    if b.token_ids.shape[0] != b.num_tokens:
        _fail("SG104", "token_ids has num_tokens entries")
    if b.draft_token_ids.shape[0] != b.num_decode or b.num_drafts.shape[0] != b.num_decode:
        _fail("SG101", "one draft row per decode seq")
    if b.draft_token_ids.shape[1] != b.mtp_k:
        _fail("SG102", "draft rows are mtp_k wide")


def _unique(ids: Any) -> Any:
    return np.unique(ids) if isinstance(ids, np.ndarray) else torch.unique(ids)


def _seq_ids(b: NaiveBatch) -> None:
    if (b.seq_ids < 0).any():
        _fail("SG010", "seq ids are non-negative")
    if len(_unique(b.seq_ids)) != len(b.seq_ids):
        _fail("SG010", "seq ids are unique")


def _phases(b: NaiveBatch) -> None:
    decode, scheduled = b.is_decode, b.num_scheduled_tokens
    if (decode & (scheduled != b.mtp_k + 1)).any():
        _fail("SG103", "decode seqs are scheduled mtp_k+1 tokens")
    if int(scheduled.sum()) != b.num_tokens:
        _fail("SG106", "num_tokens is the sum of the per-seq counts")
    if int(decode.sum()) != b.num_decode:
        _fail("SG107", "is_decode counts num_decode seqs")
    if (~decode & (scheduled < 1)).any():
        _fail("SG107", "prefill seqs schedule at least one token")


def _drafts(b: NaiveBatch) -> None:
    drafts = b.draft_token_ids
    out = (drafts < 0) | (drafts >= b.vocab_size)
    if b.draft_placeholder is not None:
        out = out & (drafts != b.draft_placeholder)
    if out.any():
        _fail("SG108", "draft ids are in the vocabulary")
    if ((b.num_drafts < 0) | (b.num_drafts > b.mtp_k)).any():
        _fail("SG109", "real-draft counts are within [0, mtp_k]")


def _blocks(b: NaiveBatch) -> None:
    tables, lens = b.block_tables, b.context_lens
    if ((lens < b.num_scheduled_tokens)
            | (b.is_decode & (lens == b.num_scheduled_tokens))).any():
        _fail("SG111", "context lengths cover the scheduled tokens")
    if len(lens) == 0:
        return
    needed = (lens + b.block_size - 1) // b.block_size
    if tables.shape[1] == 0 or (needed > tables.shape[1]).any():
        _fail("SG110", "block tables cover the context")
    rows = np.arange(len(lens)) if isinstance(lens, np.ndarray) else torch.arange(len(lens))
    last = (needed - 1).clip(0, tables.shape[1] - 1)
    if (tables[:, 0] < 0).any() or (tables[rows, last] < 0).any():
        _fail("SG110", "block tables cover the context")
    columns = torch.arange(tables.shape[1]) if isinstance(tables, torch.Tensor) \
        else np.arange(tables.shape[1])
    if ((columns[None, :] < needed[:, None]) & (tables < 0)).any():
        _fail("SG110", "block tables cover the context")


def _tokens(b: NaiveBatch) -> None:
    tokens = b.token_ids
    if ((tokens < 0) | (tokens >= b.vocab_size)).any():
        _fail("SG112", "token ids are in the vocabulary")
    if b.state_slots is not None and (b.state_slots < 0).any():
        _fail("SG113", "state slots are real slots")


def _owners(b: NaiveBatch) -> None:
    if b.draft_seq_ids is None:
        return
    mismatch: Any = b.seq_ids[b.is_decode] != b.draft_seq_ids
    if mismatch.any():
        _fail("SG115", "draft row i belongs to decode seq i")


@jaxtyped(typechecker=beartype)
def naive_batch(
    *,
    mtp_k: int,
    vocab_size: int,
    block_size: int,
    num_decode: int,
    num_tokens: int,
    seq_ids: Int[_Array, "num_seqs"],
    is_decode: Bool[_Array, "num_seqs"],
    num_scheduled_tokens: Int[_Array, "num_seqs"],
    context_lens: Int[_Array, "num_seqs"],
    block_tables: Int[_Array, "num_seqs max_blocks"],
    token_ids: Int[_Array, "num_tokens"],
    draft_token_ids: Int[_Array, "num_decode mtp_k"],
    num_drafts: Int[_Array, "num_decode"],
    state_slots: Int[_Array, "num_seqs"] | None = None,
    draft_placeholder: int | None = None,
    draft_seq_ids: Int[_Array, "num_decode"] | None = None,
) -> NaiveBatch:
    """Build (and so validate) a batch; raises on the first broken rule."""
    return NaiveBatch(
        mtp_k=mtp_k, vocab_size=vocab_size, block_size=block_size, num_decode=num_decode,
        num_tokens=num_tokens, seq_ids=seq_ids, is_decode=is_decode,
        num_scheduled_tokens=num_scheduled_tokens, context_lens=context_lens,
        block_tables=block_tables, token_ids=token_ids, draft_token_ids=draft_token_ids,
        num_drafts=num_drafts, state_slots=state_slots, draft_placeholder=draft_placeholder,
        draft_seq_ids=draft_seq_ids,
    )
