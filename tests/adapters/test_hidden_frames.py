"""A failing test shows its own frames and the message, not specguard's internals."""

from __future__ import annotations

import re
import traceback
from typing import Any, cast

import numpy as np
import pytest

from specguard import contracts

pytest_plugins = ["pytester"]

INTERNAL = ("_validate.py", "_delivery.py", "_contract.py", "_guard.py", "check_object",
            "_deliver_from_here", "_report", "config = Config", "violations = [")

TESTS = """
import numpy as np
import pytest
from specguard import adapters, contracts

def broken():
    return contracts.DrafterOutput(mtp_k=1, vocab_size=10, seq_ids=np.array([0]),
                                   draft_token_ids=np.array([[0, 1]]))

@adapters.guard(out=contracts.DrafterOutput)
def run_drafts(out: contracts.DrafterOutput) -> None:
    return None

def test_constructor():
    broken()

def test_guard():
    with contracts.checking(mode="off"):
        out = broken()
    run_drafts(out)

def test_validate():
    with contracts.checking(mode="off"):
        out = broken()
    contracts.validate(out)
"""


@pytest.mark.parametrize("style", ["long", "short", "auto"])
def test_failing_tests_under_the_plugin_hide_specguards_frames(pytester, style):
    pytester.makepyfile(test_hidden=TESTS)
    result = pytester.runpytest("--specguard=strict", f"--tb={style}", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=3)
    text = result.stdout.str()
    assert text.count("SG102 row width follows mtp_k") >= 3
    shown = [marker for marker in INTERNAL if marker in text]
    assert shown == []
    assert "test_hidden.py" in text  # the test's own frames are still there


def _frames(error: BaseException) -> list[str]:
    return [frame.filename for frame in traceback.extract_tb(error.__traceback__)]


def test_a_plain_traceback_ends_at_the_call_that_validated():
    """Outside pytest too, the traceback of a raised violation stops at the caller's call:
    specguard's frames below it are cut."""
    with pytest.raises(contracts.ContractViolation) as caught:
        contracts.DrafterOutput(mtp_k=1, vocab_size=10, seq_ids=np.array([0]),
                                draft_token_ids=np.array([[0, 1]]))
    frames = _frames(caught.value)
    assert not any(name.endswith(("_validate.py", "_delivery.py")) for name in frames)
    assert frames[0] == __file__
    with contracts.checking(mode="off"):
        out = contracts.DrafterOutput(mtp_k=1, vocab_size=10, seq_ids=np.array([0]),
                                      draft_token_ids=np.array([[0, 1]]))
    with pytest.raises(contracts.ContractViolation) as again:
        contracts.validate(out)
    assert not any(name.endswith("_delivery.py") for name in _frames(again.value))


def test_a_bare_guard_says_how_to_name_what_to_check():
    from specguard.adapters import guard

    @guard
    def run(out):
        return out

    with pytest.raises(TypeError, match=re.escape(
            "@guard was used without arguments on "
            "test_a_bare_guard_says_how_to_name_what_to_check.<locals>.run, which is then "
            "called with a int: name what to check, e.g. @guard(batch=ScheduledBatch)")):
        cast(Any, run)(3)
