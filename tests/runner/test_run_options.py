"""``specguard run`` and ``bench`` options: bad values are usage errors (exit 2) naming the
flag, and the summary of a run that stopped early says only what means something."""

from __future__ import annotations

import pytest

from specguard import contracts
from specguard._cli import _common as exits
from specguard.cli import main
from specguard.runner.engine import Engine

SMALL_RUN = ["run", "--requests", "4", "--min-prompt", "8", "--max-prompt", "150",
             "--max-tokens", "12", "--max-batched-tokens", "64", "--num-blocks", "64",
             "--max-num-seqs", "4", "--no-progress"]


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--device", "gpu", "the reference engine runs on cpu, cuda or cuda:N, not 'gpu'"),
    ("--device", "mps", "the reference engine runs on cpu, cuda or cuda:N, not 'mps'"),
    ("--threads", "0", "must be at least 1, got 0"),
    ("--threads", "-1", "must be at least 1, got -1"),
])
def test_device_and_threads_are_usage_errors_not_divergence(flag, value, says, capsys):
    """An unknown device or a thread count below 1 exits 2 naming the flag, not 1."""
    with pytest.raises(SystemExit) as exited:
        main([*SMALL_RUN, flag, value])
    assert exited.value.code == exits.EXIT_USAGE
    assert f"argument {flag}: {says}" in capsys.readouterr().err


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--max-tokens", "-1", "must be at least 1, got -1"),
    ("--max-tokens", "0", "must be at least 1, got 0"),
    ("--requests", "-5", "must be at least 1, got -5"),
    ("--seed", "-1", "must be at least 0, got -1"),
    ("--mtp-k", "1000", "must be at most 128, got 1000"),
    ("--mtp-k", "0", "must be at least 1, got 0"),
])
def test_counts_out_of_range_are_usage_errors_naming_the_flag(flag, value, says, capsys):
    """Counts and seeds outside their range exit 2 with argparse's line for the flag."""
    with pytest.raises(SystemExit) as exited:
        main([*SMALL_RUN, flag, value])
    assert exited.value.code == exits.EXIT_USAGE
    assert f"argument {flag}: {says}" in capsys.readouterr().err


def test_workload_that_cannot_fit_in_memory_is_refused(capsys):
    """A billion requests are refused from an estimate before anything is allocated."""
    assert main([*SMALL_RUN, "--requests", "1000000000"]) == exits.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith("specguard run: --requests 1000000000 needs about ")
    assert "GiB available" in err


def test_bench_refuses_zero_repeats(capsys):
    """bench --repeats 0 is a usage error rather than silently clamped to 1."""
    with pytest.raises(SystemExit) as exited:
        main(["bench", "--repeats", "0"])
    assert exited.value.code == 2
    assert "argument --repeats: must be at least 1, got 0" in capsys.readouterr().err


def test_ctrl_c_prints_the_summary_so_far_and_exits_130(monkeypatch, capsys):
    """Ctrl-C during the run: the partial summary, then exit 130."""
    step = Engine.step

    def interrupted_after_two(self: Engine) -> None:
        if self.stats.steps == 2:
            raise KeyboardInterrupt
        step(self)

    monkeypatch.setattr(Engine, "step", interrupted_after_two)
    assert main(SMALL_RUN) == exits.EXIT_INTERRUPTED == 130
    out = capsys.readouterr().out
    assert "\ninterrupted at step 3\n" in out
    assert "  steps:            2 (0 preemptions)\n" in out
    assert "tokens/s" not in out


def test_progress_bars_stay_off_a_pipe(capsys):
    """Progress goes to a terminal only: a captured stderr gets no carriage returns."""
    args = [a for a in SMALL_RUN if a != "--no-progress"]
    assert main([*args, "--verify"]) == exits.EXIT_OK
    err = capsys.readouterr().err
    assert "\r" not in err
    assert "tok/s" not in err


def test_early_stop_summary_prints_no_noise(capsys):
    """A violation at step 1: no 0-of-0 acceptance, no tokens/s, no contract-time share."""
    code = main([*SMALL_RUN, "--fault", "compact-block-tables"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_VIOLATION
    summary = out[out.index("  requests:"):]
    assert "acceptance rate" not in summary
    assert "tokens/s" not in summary
    assert "contract time" not in summary
    assert "  violations:       1\n" in summary


def test_header_with_contracts_off_shows_no_depth(capsys):
    """'contracts off (depth full)' said two things at once: off shows no depth."""
    assert main([*SMALL_RUN, "--contracts", "off", "--depth", "full"]) == exits.EXIT_OK
    out = capsys.readouterr().out
    assert ", contracts off, device cpu\n" in out
    assert "(depth" not in out
    assert "  contract checks:  0 (mode off)\n" in out


def test_crash_at_metadata_depth_names_the_value_rule_that_was_off(capsys):
    """A crash a value rule would have stopped at full depth says so, and how to turn it on."""
    code = main([*SMALL_RUN, "--fault", "sentinel-to-embedding", "--depth", "metadata"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_CRASH
    assert ("engine crashed at step 1: IndexError: index out of range in self" in out)
    assert ("  SG301 would stop this at the boundary, but it reads array values and the "
            "depth is metadata: rerun with --depth full\n") in out


def test_warn_mode_summary_counts_repeats_it_did_not_log(capsys):
    """Under warn, the summary says how many repeats of a logged violation were only counted."""
    code = main([*SMALL_RUN, "--fault", "stale-drafts", "--contracts", "warn"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_OK
    assert contracts.STATS.repeats_not_logged > 0
    assert f"({contracts.STATS.repeats_not_logged} repeats counted, not logged)" in out


def test_sentinel_fault_is_stopped_at_the_default_depth(capsys):
    """The vLLM seed's -1 is SG301 at the boundary with the default depth, not a crash."""
    code = main([*SMALL_RUN, "--fault", "sentinel-to-embedding", "--depth", "essential"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_VIOLATION
    assert "SG301 no sentinel reaches an embedding" in out
    assert "engine crashed" not in out
