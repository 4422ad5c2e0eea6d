"""The rule authors' helper set (specguard.contracts.ops): one of each, both backends."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specguard import contracts
from specguard.contracts import ops


@pytest.mark.parametrize("like", [np.zeros(3, np.int32), torch.zeros(3, dtype=torch.int32)],
                         ids=["numpy", "torch"])
def test_arange_like_builds_on_the_backend_of_its_argument(like):
    """arange_like(a, n) is 0..n-1 on a's backend (and, for a tensor, a's device)."""
    built = ops.arange_like(like, 4)
    assert type(built) is type(like)
    assert list(built.tolist()) == [0, 1, 2, 3]
    if isinstance(like, torch.Tensor):
        assert built.device == like.device


def test_arange_like_of_a_non_array_is_numpy():
    """Something that is not an array (an engine's list) gets a numpy range, not a crash."""
    assert ops.arange_like([7, 8], 2).tolist() == [0, 1]


def test_unsigned_view_bounds_both_ends_with_one_maximum():
    """Viewed through UNSIGNED, a negative id is larger than any vocabulary bound."""
    ids = np.array([3, -1], dtype=np.int64)
    assert ids.view(ops.UNSIGNED[ids.dtype]).max() >= 1000
    assert set(ops.UNSIGNED) == {np.dtype(np.int32), np.dtype(np.int64)}


@pytest.mark.parametrize(("value", "expected"), [
    (3, True), (np.int32(3), True), (np.int64(-1), True),
    (True, False), (np.bool_(True), False), (3.0, False), ("3", False), (None, False),
])
def test_is_int_accepts_python_and_numpy_integers_only(value, expected):
    """Ids and counts are ints or numpy integers; a bool, float or string is not one."""
    assert ops.is_int(value) is expected


def test_host_value_reads_host_arrays_and_declines_the_rest():
    """An element in range is read as int; out of range, non-arrays and None give None."""
    assert ops.host_value(np.array([5, 6, 7]), 1) == 6
    assert ops.host_value(torch.tensor([[1, 2], [3, 4]]), 3) == 4
    assert ops.host_value(np.array([5]), 1) is None
    assert ops.host_value([5, 6], 0) is None
    assert ops.host_value(None, 0) is None


def test_placeholder_is_the_contracts_one():
    """One padding id for the whole project: the adapters reuse the contracts' constant."""
    from specguard.adapters.engines.vllm import view as vllm

    assert ops.PLACEHOLDER == contracts.PLACEHOLDER == vllm.PLACEHOLDER == -1
