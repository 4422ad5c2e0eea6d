"""``specguard run --dp N``: ranks as processes, each fault on one rank, every rank accounted for.

Every run is a ``specguard`` subprocess bounded by a timeout: a rank left hanging in a
collective fails the test by that timeout, never by a sleep. Workloads are tiny (gloo on
the CPU, a few requests, a few steps).
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from specguard._cli import _common as exits
from specguard.cli import main
from specguard.runner import faults
from specguard.runner.config import EngineConfig
from specguard.runner.data_parallel import RankJob, padded_size
from specguard.runner.workload import synthetic_requests

#: Well under the 60 s collective timeout: a hang cannot pass for a slow run.
HARNESS_TIMEOUT_S = 45
TINY = ["--requests", "8", "--min-prompt", "8", "--max-prompt", "60", "--max-tokens", "10",
        "--max-num-seqs", "4", "--num-blocks", "64", "--no-progress"]


def run_ranks(world: int, *args: str) -> subprocess.CompletedProcess[str]:
    """``specguard run --dp world`` in a subprocess; the harness timeout fails a hang."""
    command = [sys.executable, "-m", "specguard", "run", "--dp", str(world), *TINY, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=HARNESS_TIMEOUT_S,
                          check=False)


def rank_lines(out: str) -> dict[int, str]:
    """``{rank: its status line}`` from the per-rank block of the report."""
    lines = [line.strip() for line in out.splitlines() if line.startswith("  rank ")]
    return {int(line.split()[1].rstrip(":")): line for line in lines}


def test_clean_ranks_match_greedy_decoding():
    """Four clean ranks finish, each with its share, and match plain greedy decoding."""
    done = run_ranks(4, "--verify", "--contracts", "strict", "--depth", "full")
    assert done.returncode == exits.EXIT_OK, done.stdout + done.stderr
    assert "oracle: identical (80 tokens)" in done.stdout
    lines = rank_lines(done.stdout)
    assert sorted(lines) == [0, 1, 2, 3]
    assert all("finished at step" in line and "2 requests, 20 tokens" in line
               for line in lines.values())


@pytest.mark.parametrize(("fault", "world", "code", "named"), [
    (faults.RANK_MTP_K, 2, "SG703", "rank 1 runs mtp_k 2, but rank 0 runs mtp_k 3"),
    (faults.RANK_LOCAL_PADDING, 4, "SG704", "rank 3 pads to"),
    (faults.RANK_LOCAL_SEQ_IDS, 4, "SG706", "rank 3 schedules it as well as rank 0"),
])
def test_strict_contracts_stop_every_rank_naming_the_one_that_disagrees(fault, world, code,
                                                                         named):
    """A cross-rank fault on the last rank: every rank raises its rule, none hangs."""
    done = run_ranks(world, "--fault", fault, "--contracts", "strict")
    assert done.returncode == exits.EXIT_VIOLATION, done.stdout + done.stderr
    assert named in done.stdout
    assert "what each rank reported at the last check:" in done.stdout
    lines = rank_lines(done.stdout)
    assert sorted(lines) == list(range(world))
    assert all(f"stopped at step 1 by {code}" in line for line in lines.values()), lines


def test_a_violation_on_one_rank_stops_the_others_with_it():
    """A rank stopped by its own check (SG601) takes every rank down with SG701 naming it."""
    world = 4
    done = run_ranks(world, "--fault", faults.SKIPPED_REJECTION_ROLLBACK, "--contracts",
                     "strict")
    assert done.returncode == exits.EXIT_VIOLATION, done.stdout + done.stderr
    last = world - 1
    assert f"by a contract violation on rank {last}:" in done.stdout
    assert "SG601 a seq resumes where its previous step left off" in done.stdout
    lines = rank_lines(done.stdout)
    assert "by SG601" in lines[last]
    assert all("by SG701" in lines[rank] for rank in range(last)), lines
    assert ", stopped by SG601" in done.stdout


def test_a_stale_copy_of_the_token_counts_is_stopped_on_its_rank_by_default():
    """The last rank's copy of the counts is its previous step's: at the default depth it
    breaks SG708 on that rank, which tells the others in the same step's row (SG701)."""
    world = 2
    done = run_ranks(world, "--fault", faults.RANK_STALE_TOKEN_COUNTS, "--contracts",
                     "strict", "--depth", "essential")
    assert done.returncode == exits.EXIT_VIOLATION, done.stdout + done.stderr
    assert "stopped at step 2 by a contract violation on rank 1:" in done.stdout
    assert "SG708 this rank's entry is its own token count" in done.stdout
    lines = rank_lines(done.stdout)
    assert "stopped at step 2 by SG708" in lines[1]
    assert "stopped at step 2 by SG701" in lines[0]


@pytest.mark.parametrize(("fault", "world"), [(faults.RANK_MTP_K, 4),
                                               (faults.RANK_LOCAL_PADDING, 2),
                                               (faults.RANK_STALE_TOKEN_COUNTS, 2)])
def test_without_contracts_a_padding_disagreement_breaks_the_collective(fault, world):
    """Contracts off: the mismatched exchange kills the group (gloo aborts; NCCL would hang)."""
    done = run_ranks(world, "--fault", fault, "--contracts", "off")
    assert done.returncode == exits.EXIT_CRASH, done.stdout + done.stderr
    assert "engine crashed at step" in done.stdout
    lines = rank_lines(done.stdout)
    assert sorted(lines) == list(range(world))
    assert all(" crashed at step " in line for line in lines.values()), lines


def test_without_contracts_clashing_seq_ids_change_the_tokens():
    """Contracts off: outputs merged by seq id overwrite each other; greedy disagrees."""
    done = run_ranks(2, "--fault", faults.RANK_LOCAL_SEQ_IDS, "--contracts", "off")
    assert done.returncode == exits.EXIT_DIVERGED, done.stdout + done.stderr
    assert "oracle: DIVERGED at request" in done.stdout


def test_cross_rank_fault_needs_ranks(capsys):
    """A fault that only shows across ranks is refused on a single engine."""
    assert main(["run", *TINY, "--fault", faults.RANK_MTP_K]) == exits.EXIT_USAGE
    assert "add --dp 2 or more" in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--dp", "0"], ["--dp", "2", "--dp-timeout", "0"]])
def test_bad_rank_options_are_usage_errors(flags, capsys):
    """No ranks, or no time to wait in a collective, is refused before anything runs."""
    assert main(["run", *TINY, *flags]) == exits.EXIT_USAGE
    assert "must be" in capsys.readouterr().err


def test_padding_rounds_up_to_a_whole_decode_span():
    """The step is padded to the largest count, rounded up to mtp_k + 1."""
    assert padded_size(np.array([5, 12, 3]), 3) == 12
    assert padded_size(np.array([5, 13, 3]), 3) == 16
    assert padded_size(np.array([4, 4]), 2) == 6


def test_each_rank_gets_every_nth_request_and_faults_hit_the_last():
    """Round-robin shares; the cross-rank faults change only the last rank."""
    requests = tuple(synthetic_requests(7, vocab_size=64, max_prompt=20, max_tokens=4))
    job = RankJob(EngineConfig(mtp_k=3), requests, 3, "strict", "full",
                  fault=faults.RANK_LOCAL_SEQ_IDS)
    assert [r.request_id for r in job.requests_of(0)] == [0, 3, 6]
    assert [r.request_id for r in job.requests_of(2)] == [0, 1]
    mtp = RankJob(EngineConfig(mtp_k=1), requests, 2, "off", "metadata", fault=faults.RANK_MTP_K)
    assert (mtp.config_of(0).mtp_k, mtp.config_of(1).mtp_k) == (1, 2)
    assert (mtp.fault_of(0), mtp.fault_of(1)) == (None, faults.RANK_MTP_K)
    gpu = RankJob(EngineConfig(device="cuda"), requests, 2, "strict", "metadata")
    assert [gpu.config_of(r).device for r in (0, 1)] == ["cuda:0", "cuda:1"]
