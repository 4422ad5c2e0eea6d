"""``specguard run`` refuses what the machine cannot do, in one line, exit 2, before any
rank or engine starts."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specguard.cli import main
from specguard.runner import main_job


def _refused(capsys, *argv: str) -> str:
    assert main(["run", "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err  # one line
    return err.strip()


def test_more_ranks_than_the_machine_holds_are_refused(capsys, monkeypatch):
    monkeypatch.setattr(main_job.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(main_job, "_available_memory", lambda: 64 * 2**30)
    assert _refused(capsys, "--dp", "100000") == (
        "specguard run: --dp 100000 is more ranks than this machine can hold (this machine "
        "has 2 cores, at most 8 ranks each): use --dp 16 or fewer")
    monkeypatch.setattr(main_job, "_available_memory", lambda: 2 * 2**30)
    assert _refused(capsys, "--dp", "12") == (
        "specguard run: --dp 12 is more ranks than this machine can hold (each rank holds "
        "about 512 MiB and 2.0 GiB are available): use --dp 4 or fewer")


def test_ranks_the_machine_holds_are_not_refused_by_the_bound(monkeypatch):
    monkeypatch.setattr(main_job.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(main_job, "_available_memory", lambda: 64 * 2**30)
    assert main_job._ranks_problem(16) is None and main_job._ranks_problem(17) is not None


@pytest.mark.parametrize("value", ["nan", "inf", "NaN", "Infinity", "0", "-1", "-0.5"])
def test_a_dp_timeout_that_is_not_a_positive_finite_number_is_refused(capsys, value):
    err = _refused(capsys, "--dp", "2", f"--dp-timeout={value}")
    assert err == ("specguard run: --dp-timeout must be a positive, finite number of "
                   f"seconds, got {float(value)}")


@given(st.floats(allow_nan=True, allow_infinity=True).filter(
    lambda x: not (math.isfinite(x) and x > 0)))
def test_no_non_positive_or_non_finite_timeout_reaches_a_rank(value):
    """Every such number is a usage error, never a traceback from a rank."""
    settings = main_job.JobSettings(dp=2, dp_timeout=value)
    problem = main_job._usage_error(settings)
    assert problem is not None and problem.startswith("--dp-timeout must be a positive")


@pytest.mark.parametrize(("variable", "value", "message"), [
    ("SPECGUARD_VLLM_VERSION", "latest", "specguard: SPECGUARD_VLLM_VERSION: 'latest' is not a "
     "vLLM version (expected X.Y.Z, optionally with rc, dev, post or +local parts)"),
    ("SPECGUARD_DOCS_URL", "docs/rules.md", "specguard: SPECGUARD_DOCS_URL must be an http(s) "
     "URL of the docs site; got 'docs/rules.md'"),
])
def test_engine_and_docs_settings_are_validated_like_the_others(capsys, monkeypatch, variable,
                                                                value, message):
    monkeypatch.setenv(variable, value)
    assert main(["rules"]) == 2
    assert capsys.readouterr().err.strip() == message
    monkeypatch.setenv(variable, "0.24.0rc1" if variable == "SPECGUARD_VLLM_VERSION"
                       else "https://docs.example.org/specguard/")
    assert main(["rules"]) == 0


def test_help_texts_are_plain_and_check_lists_its_exit_codes(capsys):
    for argv in (["--help"], ["check", "--help"], ["run", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        out = capsys.readouterr().out
        assert "``" not in out
    with pytest.raises(SystemExit):
        main(["check", "--help"])
    out = capsys.readouterr().out
    assert "exit status:\n  0  the object is clean" in out
    assert "  1  the object breaks one or more rules" in out and "\n  2  " in out


def test_a_clean_run_ends_with_a_next_step(capsys):
    assert main(["run", "--no-progress", "--requests", "4", "--max-tokens", "8"]) == 0
    out = capsys.readouterr().out
    assert out.rstrip().splitlines()[-1] == (
        "next: specguard run --fault compact-draft-rows (a real bug, stopped at the "
        "boundary); specguard faults lists the others")


def test_a_data_parallel_summary_says_the_cross_rank_rules_ran_and_agreed(capsys):
    assert main(["run", "--no-progress", "--dp", "2", "--requests", "4",
                 "--max-tokens", "8"]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.startswith("  ranks agreed:"))
    steps = int(line.split()[2])
    assert steps > 0
    assert line == (f"  ranks agreed:     {steps} steps checked across 2 ranks (SG701-SG706), "
                    "every one in agreement")
    assert main(["run", "--no-progress", "--dp", "2", "--requests", "4", "--max-tokens",
                 "8", "--contracts", "off"]) == 0
    assert "ranks agreed" not in capsys.readouterr().out  # nothing ran: nothing claimed
