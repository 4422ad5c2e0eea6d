"""Valid objects and one-rule mutations through the device path of every value check.

There is no accelerator in CI: emptying ``HOST_DEVICE_TYPES`` sends CPU tensors down the
path CUDA tensors take (a mask reduced on the device, its verdict read at once under
``sync`` or queued under ``deferred``). The strategies reach empty and one-seq objects.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st
from strategies.cases import Case
from strategies.mutations import MUTATIONS, Mutation, mutated
from strategies.valid import valid_cases

from specguard import contracts
from specguard.contracts._core import _values

pytest.importorskip("torch")

_POLICIES = ("sync", "deferred")


@contextlib.contextmanager
def _device_path() -> Iterator[None]:
    """Treat CPU tensors as device tensors; drop any verdict left behind."""
    saved = _values.HOST_DEVICE_TYPES
    _values.HOST_DEVICE_TYPES = set()
    try:
        yield
    finally:
        _values.HOST_DEVICE_TYPES = saved
        with contracts.checking(mode="off"):
            contracts.flush_deferred(wait=True)


def _on_torch(case: Case) -> Case:
    return dataclasses.replace(case, backend="torch")


def _codes(case: Case, policy: str, collect: str) -> list[str]:
    """Every code reported for ``case``: at construction, then at the next sync point."""
    with _device_path(), contracts.checking(mode="strict", depth="full", collect=collect,
                            device_values=policy):
        try:
            case.build()
        except contracts.ContractViolation as error:
            with contracts.checking(mode="off"):
                contracts.flush_deferred(wait=True)
            return list(error.codes)
        try:
            contracts.flush_deferred(wait=True)
        except contracts.DeferredViolation as error:
            return list(error.codes)
    return []


@pytest.mark.parametrize("cls", contracts.BOUNDARY_OBJECTS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("policy", _POLICIES)
@given(data=st.data())
def test_valid_objects_pass_on_the_device_path(
    cls: type, policy: str, data: st.DataObject
) -> None:
    """A valid object of any size (none, one, thousands of seqs) queues only clean verdicts."""
    case = _on_torch(data.draw(valid_cases(cls)))
    assert _codes(case, policy, "all") == []


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: f"{m.code}-{m.name}")
@pytest.mark.parametrize("policy", _POLICIES)
@given(data=st.data())
def test_a_mutation_is_named_on_the_device_path(
    mutation: Mutation, policy: str, data: st.DataObject
) -> None:
    """Each one-rule mutation is reported by its rule, never as SG000, on the device path."""
    _, broken = data.draw(mutated(mutation))
    codes = _codes(_on_torch(broken), policy, "all")
    assert mutation.code in codes and "SG000" not in codes, codes
