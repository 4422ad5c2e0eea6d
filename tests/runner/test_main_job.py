"""The main job as a function: it returns how it ended, tells a listener, prints nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace

from specguard import contracts
from specguard.runner.main_job import (
    Ending,
    JobOutcome,
    JobSettings,
    JobStart,
    run_main_job,
)

SMALL = JobSettings(requests=4, min_prompt=8, max_prompt=150, max_tokens=12,
                    max_batched_tokens=64, num_blocks=64, max_num_seqs=4)


class Recorder:
    """A listener that writes down what it is told."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def started(self, start: JobStart) -> None:
        self.events.append(("started", start))

    @contextmanager
    def phase(self, name: str, total: int) -> Iterator[Callable[[int], object]]:
        done: list[int] = []
        self.events.append((f"phase {name}", total))
        yield done.append
        self.events.append((f"end {name}", sum(done)))

    def ran(self, outcome: JobOutcome) -> None:
        self.events.append(("ran", outcome.ending))


def test_a_clean_job_finishes_and_prints_nothing(capsys):
    """The outcome holds the figures; stdout and stderr stay empty."""
    outcome = run_main_job(SMALL)
    assert outcome.ending is Ending.FINISHED and outcome.completed
    assert outcome.stats is not None and outcome.stats.output_tokens == 48
    assert outcome.start is not None and outcome.start.requests == 4
    assert outcome.start.mode is contracts.Mode.STRICT
    assert not outcome.compared and outcome.violation is None and outcome.error is None
    assert capsys.readouterr() == ("", "")


def test_the_listener_hears_the_start_each_phase_and_the_end_of_the_run():
    """started, the engine's tokens, ran, then the oracle's tokens: in that order."""
    recorder = Recorder()
    outcome = run_main_job(replace(SMALL, verify=True), recorder)
    assert [name for name, _ in recorder.events] == [
        "started", "phase engine", "end engine", "ran", "phase oracle", "end oracle"]
    assert recorder.events[1][1] == recorder.events[2][1] == 48
    assert recorder.events[3][1] is Ending.FINISHED
    assert outcome.ending is Ending.FINISHED and outcome.compared
    assert outcome.compared_tokens == 48 and outcome.divergence is None


def test_a_fault_under_strict_contracts_is_a_violation_outcome(capsys):
    """The violation that stopped the engine is in the outcome, with the step."""
    outcome = run_main_job(replace(SMALL, fault="compact-block-tables"))
    assert outcome.ending is Ending.VIOLATION and not outcome.completed
    assert outcome.violation is not None and outcome.violation.codes == ("SG105",)
    assert outcome.step == 1 and outcome.start is not None
    assert outcome.start.depth is contracts.Depth.FULL  # a fault implies full depth
    assert not outcome.compared
    assert capsys.readouterr() == ("", "")


def test_a_crash_keeps_the_exception():
    """With contracts off the engine's own exception is the outcome's error."""
    outcome = run_main_job(replace(SMALL, fault="compact-block-tables", contracts="off"))
    assert outcome.ending is Ending.CRASH
    assert isinstance(outcome.error, Exception) and outcome.violation is None


def test_settings_that_cannot_run_are_refused_with_the_reason():
    """Refused before anything runs: no start, no figures, one reason."""
    outcome = run_main_job(replace(SMALL, requests=10**9))
    assert outcome.ending is Ending.REFUSED and outcome.start is None
    assert outcome.problem is not None and outcome.problem.startswith("--requests 1000000000")
    refused = run_main_job(replace(SMALL, fault="rank-mtp-k"))
    assert refused.ending is Ending.REFUSED
    assert refused.problem == "fault rank-mtp-k only shows across ranks: add --dp 2 or more"


def test_the_contract_settings_are_restored_after_the_job():
    """The job's mode and depth hold for the job only."""
    before = contracts.current_config()
    run_main_job(replace(SMALL, contracts="warn", depth="full"))
    assert contracts.current_config() == before
