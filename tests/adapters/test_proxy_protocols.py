"""Guarded proxies stay transparent for copying, subscripting and ``with`` blocks."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import guard_runner, is_guarded, unwrap

SPECS = {"forward": {"out": contracts.DrafterOutput}}


class Runner:
    """A runner that is also a mapping of buffers and a context manager."""

    def __init__(self) -> None:
        self.buffers = {"ids": [1, 2]}
        self.depth = 0

    def forward(self, out):
        return out

    def __getitem__(self, key):
        return self.buffers[key]

    def __setitem__(self, key, value):
        self.buffers[key] = value

    def __delitem__(self, key):
        del self.buffers[key]

    def __enter__(self):
        self.depth += 1
        return self

    def __exit__(self, *exc_info):
        self.depth -= 1
        return False


class Plain:
    """A runner with none of those protocols."""

    def forward(self, out):
        return out


def _checks_forward(proxy) -> None:
    with pytest.raises(contracts.ContractViolation, match="SG001"):
        proxy.forward(out=np.zeros(3))


@pytest.mark.parametrize("copier", [copy.copy, copy.deepcopy], ids=["copy", "deepcopy"])
def test_a_copy_is_a_guarded_proxy_over_a_copy(copier):
    """copy.copy and copy.deepcopy give a proxy with the same checks over a new runner."""
    proxy = guard_runner(Runner(), SPECS)
    copied = copier(proxy)
    assert is_guarded(copied)
    assert unwrap(copied) is not unwrap(proxy)
    assert copied["ids"] == [1, 2]
    _checks_forward(copied)


def test_deepcopy_copies_the_runner_state():
    """A deep copy does not share the runner's buffers."""
    proxy = guard_runner(Runner(), SPECS)
    copied = copy.deepcopy(proxy)
    copied["ids"].append(3)
    assert proxy["ids"] == [1, 2]


def test_subscripts_reach_the_runner():
    """proxy[key], proxy[key] = value and del proxy[key] act on the wrapped runner."""
    proxy = guard_runner(Runner(), SPECS)
    proxy["slots"] = [7]
    assert proxy["slots"] == [7] and unwrap(proxy).buffers["slots"] == [7]
    del proxy["slots"]
    assert "slots" not in unwrap(proxy).buffers


def test_with_block_enters_the_runner_and_binds_the_proxy():
    """``with proxy as r`` enters the runner and binds the proxy, so r stays guarded."""
    proxy = guard_runner(Runner(), SPECS)
    with proxy as bound:
        assert unwrap(proxy).depth == 1
        assert bound is proxy
        _checks_forward(bound)
    assert unwrap(proxy).depth == 0


def test_protocols_the_runner_lacks_fail_as_they_would_without_the_proxy():
    """Subscripting or entering a proxy of a runner without them is Python's own TypeError."""
    proxy = guard_runner(Plain(), SPECS)
    with pytest.raises(TypeError, match="'Plain' object is not subscriptable"):
        proxy[0]  # pyright: ignore[reportIndexIssue] - the TypeError is the test
    with pytest.raises(TypeError, match="'Plain' object does not support the context"), \
            proxy:  # pyright: ignore[reportGeneralTypeIssues]
        pass


def test_pickling_a_proxy_is_refused_clearly():
    """A proxy cannot be pickled; the error says to pickle the unwrapped runner instead."""
    proxy = guard_runner(Runner(), SPECS)
    with pytest.raises(TypeError, match=r"pickle specguard.adapters.unwrap\(proxy\)"):
        pickle.dumps(proxy)
    assert pickle.loads(pickle.dumps(unwrap(proxy))).buffers == {"ids": [1, 2]}
