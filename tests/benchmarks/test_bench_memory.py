"""Validation reads the token arrays where they are: it never copies them."""

from __future__ import annotations

import tracemalloc

import numpy as np
import torch

from specguard import contracts
from specguard.benchmarks.workload import build, decode_batch, to_torch
from specguard.contracts._core._values import host_twin


def _long_prefill() -> dict:
    """One prefill seq of 2**18 tokens among a few decode seqs: token ids dominate memory."""
    fields = decode_batch(4, num_prefill=1)
    extra = 2**18 - int(fields["num_scheduled_tokens"][0])
    fields["num_scheduled_tokens"] = fields["num_scheduled_tokens"].copy()
    fields["num_scheduled_tokens"][0] += extra
    fields["context_lens"] = np.maximum(fields["context_lens"], fields["num_scheduled_tokens"])
    fields["block_tables"] = np.zeros((4, 2**14), dtype=np.int32)
    fields["num_tokens"] += extra
    fields["token_ids"] = np.zeros(fields["num_tokens"], dtype=np.int32)
    return fields


def _peak(call) -> int:
    call()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_full_validation_allocates_far_less_than_the_token_array():
    """Peak extra memory of a full validation is a small fraction of token_ids' size."""
    batch = build(_long_prefill())
    with contracts.checking(mode="strict", depth="full"):
        assert contracts.validate(batch) == []
        peak = _peak(lambda: contracts.validate(batch))
    assert peak < batch.token_ids.nbytes // 64


def test_an_out_of_vocabulary_token_is_still_found_without_a_copy():
    """The bounds check that finds a bad id reads the same memory (the view trick)."""
    fields = _long_prefill()
    fields["token_ids"][-1] = -1
    batch = build(fields)
    with contracts.checking(mode="warn", depth="full"):
        found = contracts.validate(batch)
    assert [(v.code, v.token) for v in found] == [("SG112", fields["num_tokens"] - 1)]


def test_cpu_tensors_are_read_through_views_of_their_memory():
    """Rules read CPU tensors through numpy views that share the tensors' memory."""
    batch = build(to_torch(decode_batch(16)))
    names = tuple(f.name for f in batch.__dataclass_fields__.values())
    twin = host_twin(batch, "seq_ids", names)
    assert twin is not batch
    assert isinstance(twin.token_ids, np.ndarray) and isinstance(batch.token_ids, torch.Tensor)
    assert np.shares_memory(twin.token_ids, batch.token_ids.numpy())
    assert twin.mtp_k == batch.mtp_k


def test_numpy_objects_are_read_as_they_are():
    """A numpy object needs no twin: rules read the object itself."""
    batch = build(decode_batch(16))
    assert host_twin(batch, "seq_ids", ("seq_ids",)) is batch


def test_tensors_numpy_cannot_view_are_read_as_tensors():
    """A tensor without a numpy view (bfloat16 here) leaves the object as it is."""
    fields = to_torch(decode_batch(4))
    odd = dict(fields, token_ids=fields["token_ids"].to(torch.bfloat16))
    batch = build(odd)
    names = tuple(f.name for f in batch.__dataclass_fields__.values())
    assert host_twin(batch, "seq_ids", names) is batch
