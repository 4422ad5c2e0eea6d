"""``specguard run`` and ``specguard faults`` through the command-line entry point."""

from __future__ import annotations

import pytest
import torch

from specguard import contracts
from specguard._cli import _common as exits
from specguard.cli import main
from specguard.runner.faults import FAULTS

SMALL_RUN = ["run", "--requests", "4", "--min-prompt", "8", "--max-prompt", "150",
             "--max-tokens", "12", "--max-batched-tokens", "64", "--num-blocks", "64",
             "--max-num-seqs", "4", "--no-progress"]


def test_default_sized_options_and_exit_codes_are_documented(capsys):
    """The help states the defaults of the main job and the exit-code convention."""
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    for snippet in ("requests (default 64)", "(2048)", "output tokens per request (128)",
                    "draft tokens per step, 1 to 128 (3)", "exit codes:",
                    "--fault implies --verify"):
        assert snippet in text
    for code in (exits.EXIT_OK, exits.EXIT_DIVERGED, exits.EXIT_USAGE,
                 exits.EXIT_VIOLATION, exits.EXIT_CRASH):
        assert f"\n  {code}  " in text


def test_run_prints_the_summary(capsys):
    """A clean run exits 0 and reports requests, tokens, steps, acceptance and checks."""
    assert main(SMALL_RUN) == exits.EXIT_OK
    out = capsys.readouterr().out
    for label in ("requests:         4", "output tokens:    48", "steps:", "acceptance rate:",
                  "tokens/s", "contract checks:", "violations:       0", "% of step time"):
        assert label in out
    assert "oracle" not in out


def test_verify_reports_identical_tokens(capsys):
    """--verify compares with plain greedy decoding: identical, with the token count."""
    assert main([*SMALL_RUN, "--verify", "--mtp-k", "2"]) == exits.EXIT_OK
    assert "\noracle: identical (48 tokens)\n" in capsys.readouterr().out


def test_fault_with_strict_contracts_prints_the_report_and_exits_3(capsys):
    """A violation stops the run: the report names rule, seq and batch position."""
    code = main([*SMALL_RUN, "--fault", "compact-block-tables", "--contracts", "strict"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_VIOLATION
    assert "contracts strict (depth full)" in out
    assert "stopped at step 1 by a contract violation:" in out
    assert "SG105 one entry per seq in every per-seq array" in out
    assert "seq 0 at batch position 0" in out


def test_fault_without_contracts_shows_the_crash_and_exits_4(capsys):
    """Without contracts the engine's own failure is shown: type, message, location."""
    code = main([*SMALL_RUN, "--fault", "sentinel-to-embedding", "--contracts", "off"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_CRASH
    assert "engine crashed at step 1: IndexError: index out of range in self" in out
    assert "(in runner/model.py:" in out


def test_fault_without_contracts_that_does_not_crash_reports_the_divergence(capsys):
    """A silent fault is exposed by the oracle comparison --fault implies (exit 1)."""
    args = [*SMALL_RUN, "--num-blocks", "14", "--requests", "4", "--min-prompt", "40",
            "--max-prompt", "40", "--max-tokens", "40", "--fault", "duplicate-seq-id",
            "--contracts", "off"]
    assert main(args) == exits.EXIT_DIVERGED
    assert "\noracle: DIVERGED at request " in capsys.readouterr().out


def test_step_fault_names_the_step_it_found_and_the_step_it_was_checked_in(capsys):
    """A step rule checks a forward when its outputs arrive: both steps are printed."""
    code = main([*SMALL_RUN, "--fault", "skipped-rejection-rollback"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_VIOLATION
    assert ("stopped at step 7 by a contract violation in step 6, checked against step 5 "
            "as its outputs reached the host:\nStepTransition broke 1 rule:") in out
    assert "SG601 a seq resumes where its previous step left off" in out
    assert "seq 1 at batch position 2: starts at position 103" in out


def _acceptance(out: str) -> float:
    line = next(line for line in out.splitlines() if "acceptance rate:" in line)
    return float(line.split()[2].rstrip("%"))


def test_silent_fault_without_contracts_matches_greedy_but_accepts_less(capsys):
    """stale-drafts: the oracle sees identical tokens (exit 0); acceptance collapses."""
    assert main([*SMALL_RUN, "--verify"]) == exits.EXIT_OK
    clean = _acceptance(capsys.readouterr().out)
    code = main([*SMALL_RUN, "--fault", "stale-drafts", "--contracts", "off"])
    out = capsys.readouterr().out
    assert code == exits.EXIT_OK
    assert "\noracle: identical (48 tokens)\n" in out
    assert _acceptance(out) < clean / 4


def test_contract_mode_is_restored_after_a_run():
    """--contracts changes the mode for the run only."""
    before = contracts.current_config()
    main([*SMALL_RUN, "--contracts", "off", "--depth", "full"])
    assert contracts.current_config() == before


def test_bad_options_exit_2(capsys):
    """A cache too small for a request, or bad prompt bounds, are usage errors."""
    assert main([*SMALL_RUN, "--num-blocks", "2"]) == exits.EXIT_USAGE
    assert "may need" in capsys.readouterr().err
    assert main([*SMALL_RUN, "--min-prompt", "9", "--max-prompt", "8"]) == exits.EXIT_USAGE
    with pytest.raises(SystemExit) as exited:
        main([*SMALL_RUN, "--fault", "no-such-fault"])
    assert exited.value.code == 2


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present")
def test_unavailable_device_exits_2(capsys):
    """Asking for CUDA without a GPU is refused before anything runs."""
    assert main([*SMALL_RUN, "--device", "cuda"]) == exits.EXIT_USAGE
    assert "'cuda' is not available" in capsys.readouterr().err


def test_faults_command_lists_every_fault(capsys):
    """``specguard faults`` prints one line per fault: name, then what it does."""
    assert main(["faults"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == list(FAULTS)
    assert all(FAULTS[line.split()[0]].summary in line for line in lines)


def test_faults_verbose_names_sites_rules_and_origins(capsys):
    """``specguard faults -v`` adds each fault's sites, rule and contracts-off outcome."""
    assert main(["faults", "-v"]) == 0
    out = capsys.readouterr().out
    for fault in FAULTS.values():
        assert f"caught by {' or '.join(fault.rules)} on {fault.subject}" in out
        assert fault.origin in out
        assert f"contracts off: {fault.unguarded}" in out
