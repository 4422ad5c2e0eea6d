"""numpy arrays and CPU torch tensors, int32 and int64 ids: one contract for all four."""

from __future__ import annotations

import re

import numpy as np
import pytest
from contract_builders import BACKENDS, CLEAN, ID_DTYPES, build, convert, kwargs

from specguard import contracts

torch = pytest.importorskip("torch")

_COMBINATIONS = [(b, d) for b in BACKENDS for d in ID_DTYPES]


@pytest.mark.parametrize(("backend", "dtype"), _COMBINATIONS)
@pytest.mark.parametrize("cls", contracts.BOUNDARY_OBJECTS, ids=lambda c: c.__name__)
def test_clean_objects_pass_at_full_depth(cls, backend, dtype):
    """Every clean boundary object validates on every backend and id dtype."""
    with contracts.checking(depth="full", collect="all"):
        obj = build(cls, backend, dtype)
        assert contracts.validate(obj) == []
    assert contracts.STATS.violations == 0


@pytest.mark.parametrize(("backend", "dtype"), _COMBINATIONS)
def test_value_violation_reads_the_same_on_every_backend(backend, dtype):
    """A bad token id gives the same message, seq and position whatever holds the ids."""
    tokens = np.arange(15)
    tokens[12] = 40
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        build(contracts.ScheduledBatch, backend, dtype, token_ids=tokens)
    assert re.search(re.escape(
        "[ScheduledBatch.token_ids, scheduler → runner]: seq 44 at batch position 4, "
        "token 12: token id is 40 (expected 0 <= id < vocab_size=32)"), str(caught.value))


@pytest.mark.parametrize(("backend", "dtype"), _COMBINATIONS)
def test_shape_violation_names_the_backend_dtype(backend, dtype):
    """Shape messages describe the offending array compactly in its own dtype."""
    short = {"int32": "i32", "int64": "i64"}[dtype]
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        f"token_ids is {short}[14] but num_tokens=15"
    )):
        build(contracts.ScheduledBatch, backend, dtype, token_ids=np.arange(14))


def test_int32_and_int64_may_mix_within_one_object():
    """Each field accepts either id dtype; engines keep counts and ids in different widths."""
    fields = {name: convert(value, "numpy", "int64") for name, value in
              CLEAN[contracts.ScheduledBatch].items()}
    fields["token_ids"] = fields["token_ids"].astype(np.int32)
    with contracts.checking(depth="full"):
        contracts.ScheduledBatch(**fields)


@pytest.mark.parametrize("dtype", ["int16", "uint8", "float64"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_other_dtypes_are_rejected_not_cast(backend, dtype):
    """Narrow, unsigned or float ids are SG002 on both backends."""
    fields = kwargs(contracts.ScheduledBatch, backend)
    seq_ids = np.arange(40, 45).astype(dtype)
    fields["seq_ids"] = seq_ids if backend == "numpy" else torch.from_numpy(seq_ids)
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG002 array has an allowed dtype [ScheduledBatch.seq_ids, scheduler → runner]: "
        "expected dtype int32|int64, got "
    )) as caught:
        contracts.ScheduledBatch(**fields)
    assert caught.value.violations[0].actual == dtype


def test_torch_then_numpy_is_sg005():
    """An object whose first array is a tensor rejects a later numpy array."""
    fields = {name: convert(value, "torch") for name, value in
              CLEAN[contracts.DrafterOutput].items()}
    fields["draft_token_ids"] = fields["draft_token_ids"].numpy()
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "seq_ids is torch on cpu but draft_token_ids is numpy (expected torch on cpu; "
        "actual numpy)"
    )):
        contracts.DrafterOutput(**fields)
