"""The pytest plugin's strict mode holds against code that relaxes it, and against
guards decorated before the run's mode could be applied."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

BROKEN = """
import numpy as np
from specguard import contracts
def broken():
    # draft rows two wide for mtp_k=1: SG102, a metadata rule
    return contracts.DrafterOutput(mtp_k=1, vocab_size=10, seq_ids=np.array([0]),
                                   draft_token_ids=np.array([[0, 1]]))
"""

GUARDED = """
import numpy as np
from specguard import contracts
from specguard.adapters import guard

@guard(contracts.DrafterOutput)
def propose():
    return np.array([[0, 1]])
"""


@pytest.fixture
def tests_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester folder with a module that builds a violating object."""
    pytester.makepyfile(broken_object=BROKEN)
    return pytester


def test_strict_fails_a_test_whose_code_switches_to_warn(tests_dir):
    """Under --specguard=strict a violation only logged by warn mode fails the test."""
    tests_dir.makepyfile(test_inner="""
        from specguard import contracts
        from broken_object import broken

        def test_relaxed():
            with contracts.checking(mode="warn"):
                broken()
    """)
    result = tests_dir.runpytest("--specguard=strict", "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*--specguard=strict: 1 violation(s) were only logged (the code under test switched "
        "specguard to warn mode), and strict fails them:",
        "*SG102 row width follows mtp_k*"])


def test_strict_hears_deliveries_not_log_lines(tests_dir):
    """The plugin is told each delivery's mode: a warn-mode violation fails the test with
    the specguard logger muted, and a log line that only looks like one does not."""
    tests_dir.makepyfile(test_inner="""
        import logging
        from specguard import contracts
        from broken_object import broken

        def test_muted_log():
            logging.getLogger("specguard").setLevel(logging.CRITICAL)
            try:
                with contracts.checking(mode="warn"):
                    broken()
            finally:
                logging.getLogger("specguard").setLevel(logging.NOTSET)

        def test_lookalike_line():
            logging.getLogger("specguard").warning("specguard: SG102 is only a log line")
    """)
    result = tests_dir.runpytest("--specguard=strict", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_muted_log*", "*1 violation(s) were only logged*"])


def test_strict_leaves_caught_violations_and_warn_runs_alone(tests_dir):
    """A strict violation the test catches passes; without the option, warn only logs."""
    tests_dir.makepyfile(test_inner="""
        import pytest
        from specguard import contracts
        from broken_object import broken

        def test_caught():
            with pytest.raises(contracts.ContractViolation):
                broken()

        def test_relaxed():
            with contracts.checking(mode="warn"):
                broken()
    """)
    tests_dir.runpytest("--specguard=strict").assert_outcomes(passed=1, failed=1)
    tests_dir.runpytest().assert_outcomes(passed=2)


def test_conftest_guards_wrap_though_the_environment_says_off(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    """SPECGUARD_MODE=off and a conftest importing a @guard module: strict still checks it."""
    monkeypatch.setenv("SPECGUARD_MODE", "off")
    pytester.makepyfile(guarded=GUARDED)
    pytester.makeconftest("import guarded  # noqa: F401  (decorates at import)\n")
    pytester.makepyfile(test_inner="""
        import pytest
        from specguard import contracts
        from guarded import propose

        def test_checked():
            assert hasattr(propose, "__sg_guarded__")
            with pytest.raises(contracts.ContractViolation, match="SG001"):
                propose()
    """)
    result = pytester.runpytest_subprocess("--specguard=strict", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_guards_decorated_before_the_run_are_named(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
):
    """A @guard imported by another plugin while the mode was off is named in a warning."""
    monkeypatch.setenv("SPECGUARD_MODE", "off")
    pytester.makepyfile(guarded=GUARDED)
    pytester.makepyfile(test_inner="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--specguard=strict", "-p", "guarded",
                                           "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([
        "*specguard: 1 guarded function(s) were decorated while the mode was off, before "
        "this run could switch it on, and stay unchecked: propose.*"])
