"""The rule catalogue through the device path, on empty, one-seq and pinned objects.

There is no accelerator in CI, so ``HOST_DEVICE_TYPES`` is emptied: CPU tensors then take
exactly the path CUDA tensors take. Every clean object must leave only passing verdicts
(an empty mask included: a prefill-only step has no decode seqs), and every case of the
catalogue must be named by its own rule.
"""

from __future__ import annotations

from typing import Any

import contract_builders
import numpy as np
import pytest
from contract_builders import CLEAN, build
from test_rule_catalogue import CASES

from specguard import contracts
from specguard.contracts._core import _values

pytest.importorskip("torch")

_POLICIES = ("sync", "deferred")
# Cases whose point is a mix of backends or a non-array value: forcing every array onto
# torch changes what they test, and the host tests cover them.
_HOST_ONLY = {"SG005"}


@pytest.fixture
def device_path(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Treat CPU tensors as device tensors; drop any verdict a test leaves behind."""
    monkeypatch.setattr(_values, "HOST_DEVICE_TYPES", set())
    yield
    with contracts.checking(mode="off"):
        contracts.flush_deferred(wait=True)


@pytest.fixture
def torch_builders(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every clean-object builder makes torch tensors, whatever backend it is asked for."""
    original = contract_builders.kwargs

    def on_torch(cls: Any, backend: str = "numpy", dtype: str = "int64", **changes: Any) -> Any:
        return original(cls, "torch", dtype, **changes)

    monkeypatch.setattr(contract_builders, "kwargs", on_torch)


def _codes(make: Any, policy: str) -> tuple[str, ...]:
    """The codes reported at construction, else at the next sync point."""
    with contracts.checking(depth="full", device_values=policy):
        try:
            make()
        except contracts.ContractViolation as error:
            return error.codes
        try:
            contracts.flush_deferred(wait=True)
        except contracts.DeferredViolation as error:
            return error.codes
    return ()


def _empty(cls: type) -> dict[str, Any]:
    """A clean object of ``cls`` with no seqs at all."""
    clean = CLEAN[cls]
    changes: dict[str, Any] = {}
    for name, value in clean.items():
        if isinstance(value, np.ndarray):
            shape = (0, *value.shape[1:])
            changes[name] = np.zeros(shape, dtype=value.dtype)
    if "num_decode" in clean:
        changes.update(num_decode=0)
    if "num_tokens" in clean:
        changes.update(num_tokens=0)
    if "query_start_loc" in clean:
        changes["query_start_loc"] = np.zeros(1, dtype=np.int64)
    if cls is contracts.ScheduledBatch:
        changes["block_tables"] = np.zeros((0, 5), dtype=np.int64)
    if cls is contracts.LogitsRows:
        changes.update(num_logits=0)
    if cls is contracts.TokensAcrossRanks:  # a group has one rank at least: only this one
        changes.update(dp_size=1, dp_rank=0, own_tokens=0,
                       tokens_across_ranks=np.zeros(1, dtype=np.int64))
    return changes


def _one_seq(cls: type) -> dict[str, Any]:
    """A clean object of ``cls`` cut down to its first seq (or first decode seq)."""
    clean = CLEAN[cls]
    if cls is contracts.ScheduledBatch:
        return {"num_decode": 1, "num_tokens": 3, "seq_ids": np.array([40]),
                "is_decode": np.array([True]), "num_scheduled_tokens": np.array([3]),
                "context_lens": np.array([9]), "block_tables": clean["block_tables"][:1],
                "token_ids": clean["token_ids"][:3], "draft_token_ids":
                clean["draft_token_ids"][:1], "num_drafts": clean["num_drafts"][:1]}
    if cls in (contracts.ModelInput, contracts.DrafterInput):
        one = {"num_tokens": 3, "seq_ids": np.array([7]), "input_ids": np.array([1, 2, 3]),
               "positions": np.array([0, 1, 2]), "query_start_loc": np.array([0, 3])}
        if cls is contracts.ModelInput:
            one["slot_mapping"] = np.array([0, 1, 2])
        else:
            one["sample_indices"] = np.array([2])
        return one
    if cls is contracts.LogitsRows:
        return {"num_logits": 3, "seq_ids": np.array([40]), "num_drafts": np.array([2]),
                "row_starts": np.array([0]), "row_counts": np.array([3])}
    if cls is contracts.TokensAcrossRanks:
        return {"dp_size": 1, "dp_rank": 0, "tokens_across_ranks": np.array([6])}
    return {name: value[:1] for name, value in clean.items() if isinstance(value, np.ndarray)}


@pytest.mark.parametrize("policy", _POLICIES)
@pytest.mark.parametrize("size", ["empty", "one seq", "clean"])
@pytest.mark.parametrize("cls", contracts.BOUNDARY_OBJECTS, ids=lambda c: c.__name__)
def test_clean_objects_of_every_size_pass_on_the_device_path(device_path, cls, size, policy):
    """No seqs, one seq or several: every rule evaluates on the device and passes."""
    changes = {"empty": _empty, "one seq": _one_seq, "clean": lambda c: {}}[size](cls)
    assert _codes(lambda: build(cls, "torch", **changes), policy) == ()


@pytest.mark.parametrize("policy", _POLICIES)
def test_draft_tokens_without_decode_seqs_at_full_depth(device_path, policy):
    """A prefill-only step's DraftTokens (no rows) passes on the device: no argmax of nothing."""
    drafts = contracts.DraftTokens.from_mapping([], {}, mtp_k=3, vocab_size=10, placeholder=0)
    import torch

    tensors = {name: torch.from_numpy(getattr(drafts, name))
               for name in ("seq_ids", "draft_token_ids", "num_drafts")}
    assert _codes(lambda: contracts.DraftTokens(mtp_k=3, vocab_size=10, **tensors),
                  policy) == ()


@pytest.mark.parametrize("policy", _POLICIES)
@pytest.mark.parametrize(("code", "make"), [
    pytest.param(code, make, id=f"{code}-{name}") for code, name, make, _ in CASES
    if code not in _HOST_ONLY])
def test_every_catalogue_case_is_named_on_the_device_path(
    device_path, torch_builders, code, make, policy
):
    """Each violating object of the catalogue, on torch through the device path, is its rule.

    Deferred verdicts are read after every rule has run, so a violation that also breaks
    a later rule reports that one too; the rule of the case still comes first.
    """
    codes = _codes(make, policy)
    if policy == "sync":
        assert codes == (code,)
    else:
        assert codes[0] == code and "SG000" not in codes, codes
