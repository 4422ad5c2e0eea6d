"""The pytest plugin, driven through pytester: options, ini, fixture, marker, report section."""

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


@pytest.fixture
def tests_dir(pytester: pytest.Pytester) -> pytest.Pytester:
    """A pytester folder with a module that builds a violating object."""
    pytester.makepyfile(broken_object=BROKEN)
    return pytester


def test_strict_option_makes_every_check_strict_and_collect_all(tests_dir):
    """``--specguard=strict`` is in force inside the test, with collect=all."""
    tests_dir.makepyfile(test_inner="""
        from specguard import contracts
        def test_config():
            config = contracts.current_config()
            assert (config.mode.value, config.collect.value) == ("strict", "all")
    """)
    result = tests_dir.runpytest("--specguard=strict", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["specguard: collect=all, mode=strict"])


def test_setting_holds_while_tests_are_collected(tests_dir):
    """Guards decorated at import (during collection) see the run's setting."""
    tests_dir.makepyfile(test_inner="""
        from specguard import contracts
        from specguard.adapters import guard

        AT_IMPORT = contracts.current_config()

        @guard(batch=contracts.ScheduledBatch)
        def forward(batch):
            return batch

        def test_config():
            assert (AT_IMPORT.mode.value, AT_IMPORT.collect.value) == ("warn", "all")
            assert hasattr(forward, "__sg_guarded__")
    """)
    tests_dir.runpytest("--specguard=warn").assert_outcomes(passed=1)


def test_depth_option_and_ini_settings(tests_dir):
    """The ini's ``specguard`` and ``--specguard-depth`` set warn mode at full depth."""
    tests_dir.makeini("[pytest]\nspecguard = warn\n")
    tests_dir.makepyfile(test_inner="""
        from specguard import contracts
        def test_config():
            config = contracts.current_config()
            assert (config.mode.value, config.depth.value) == ("warn", "full")
    """)
    tests_dir.runpytest("--specguard-depth=full").assert_outcomes(passed=1)


def test_settings_are_restored_after_each_test(tests_dir):
    """Outside a test the run's setting is not left behind."""
    tests_dir.makepyfile(test_inner="""
        from specguard import contracts
        def test_config():
            assert contracts.current_config().mode.value == "warn"
    """)
    from specguard import contracts
    before = contracts.current_config()
    tests_dir.runpytest("--specguard=warn").assert_outcomes(passed=1)
    assert contracts.current_config() == before


def test_fixture_sees_warn_and_caught_strict_violations(tests_dir):
    """``specguard_violations`` lists violations that were only logged or were caught."""
    tests_dir.makepyfile(test_inner="""
        import pytest
        from specguard import contracts
        from broken_object import broken

        def test_warned(specguard_violations):
            with contracts.checking(mode="warn"):
                broken()
            assert [v.code for v in specguard_violations] == ["SG102"]

        def test_caught(specguard_violations):
            with pytest.raises(contracts.ContractViolation):
                broken()
            assert [v.code for v in specguard_violations] == ["SG102"]

        def test_clean(specguard_violations):
            assert specguard_violations == []
    """)
    tests_dir.runpytest().assert_outcomes(passed=3)


def test_marker_turns_the_checks_off(tests_dir):
    """``@pytest.mark.specguard_off`` runs the test with mode off, even under --specguard."""
    tests_dir.makepyfile(test_inner="""
        import pytest
        from specguard import contracts
        from broken_object import broken

        @pytest.mark.specguard_off
        def test_off(specguard_violations):
            broken()
            assert contracts.current_config().mode.value == "off"
            assert specguard_violations == []

        def test_on():
            with pytest.raises(contracts.ContractViolation):
                broken()
    """)
    tests_dir.runpytest("--specguard=strict", "--strict-markers").assert_outcomes(passed=2)


def test_failing_test_report_lists_the_violations(tests_dir):
    """A failed test's report carries a specguard section with each violation's line."""
    tests_dir.makepyfile(test_inner="""
        from specguard import contracts
        from broken_object import broken

        def test_fails():
            with contracts.checking(mode="warn"):
                broken()
            assert False
    """)
    result = tests_dir.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*specguard*", "1 violation(s) reported:",
                                 "SG102 row width follows mtp_k*"])


def test_bad_ini_value_is_a_usage_error(tests_dir):
    """An unknown mode in the ini stops the run with the allowed values."""
    tests_dir.makeini("[pytest]\nspecguard = loud\n")
    tests_dir.makepyfile(test_inner="def test_x():\n    pass\n")
    result = tests_dir.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*specguard must be one of off, warn, strict; got 'loud'*"])


def test_without_options_nothing_changes(tests_dir):
    """With no option and no ini the environment's setting stays in force."""
    from specguard import contracts
    expected = contracts.current_config().mode.value
    tests_dir.makepyfile(test_inner=f"""
        from specguard import contracts
        def test_config():
            assert contracts.current_config().mode.value == {expected!r}
    """)
    tests_dir.runpytest().assert_outcomes(passed=1)
