"""Data-parallel ranks of the reference engine: one process per rank, on torch.distributed.

``specguard run --dp N`` starts N rank processes. Each rank owns an engine (scheduler,
runner, KV cache, the same seeded model) and every N-th request, and schedules them on
its own; every step the ranks meet in collectives, DP-attention style:

1. they all-gather their token counts (and whether they still have work): each rank's
   copy of the counts is a :class:`specguard.contracts.TokensAcrossRanks` (its own entry
   is its own count, SG707-SG709); the step is padded to the largest count, rounded up to
   a whole decode span (``mtp_k + 1``, the uniform-decode size), and the group stops when
   no rank has work left;
2. with contracts on, they all-gather one row of metadata, the rank's copy of the counts
   included, and check it on every rank (:func:`specguard.adapters.check_ranks`,
   SG701-SG706 and SG710);
3. the forward, padded to the agreed size, joins the step's exchange
   (:meth:`RankGroup.exchange`). A rank with nothing scheduled runs a dummy forward of
   ``mtp_k + 1`` padding rows (one decode span, the convention vLLM settled on for idle
   ranks; they write no KV) so the others do not wait for it.

A violation that only one rank sees (its batch, its forward) stops that rank: it
finishes the step's collectives, reports the rule in its next row, and every rank stops
there with SG701 naming it. No rank is left in a collective; the process group's
timeout is only the backstop for a rank that died outright.

Ranks are forked on the CPU (no second import of torch: a rank is up in milliseconds)
and spawned on a GPU (CUDA cannot be forked). They meet through a ``file://`` rendezvous
in a private temporary folder, so no port is chosen and none can be taken.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import multiprocessing
import os
import queue
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from specguard import contracts
from specguard.adapters import RankStep, check_ranks
from specguard.runner import faults
from specguard.runner._timing import CLOCK
from specguard.runner.config import EngineConfig
from specguard.runner.engine import Engine, EngineStalled, RunStats
from specguard.runner.model import TinyLM
from specguard.runner.rank_group import RankGroup
from specguard.runner.scheduler_output import SchedulerOutput
from specguard.runner.step_output import StepResult
from specguard.runner.workload import Request

__all__ = ["CRASHED", "FINISHED", "HUNG", "STOPPED", "RankEngine", "RankJob", "RankOutcome",
           "merged_outputs", "merged_stats", "run_ranks"]

FINISHED = "finished"
STOPPED = "stopped"
"""Stopped by a contract violation (its own, or another rank's, via SG701)."""
CRASHED = "crashed"
HUNG = "hung"
"""Gave no report in time after another rank stopped; ended by the launcher."""

_EXIT = {FINISHED: 0, STOPPED: 3, CRASHED: 4}


def padded_size(counts: np.ndarray, mtp_k: int) -> int:
    """The step's size on every rank: the largest count, up to a whole decode span."""
    unit = mtp_k + 1
    return -(-int(counts.max()) // unit) * unit


class _ExchangingLM(TinyLM):
    """The tiny model, whose forward joins the step's exchange at the agreed size."""

    def __init__(self, config: Any, device: str, group: RankGroup) -> None:
        super().__init__(config, device)
        self.group = group
        self.padded = 0

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        hidden = super().forward(*args, **kwargs)
        return self.group.exchange(hidden, self.padded)


class RankEngine(Engine):
    """One rank's engine: its own scheduler and runner, stepping with the group."""

    def __init__(self, config: EngineConfig, group: RankGroup, *,
                 fault: str | None = None) -> None:
        model = _ExchangingLM(config.model, config.device, group)
        super().__init__(config, fault=fault, model=model)
        self.fault = faults.check_name(fault)
        self.group = group
        self.exchanging = model
        self.dummy_tokens = config.mtp_k + 1
        """What a dummy step runs: one decode span."""
        self.group_step = 0
        """Steps the group has run, dummy steps included."""
        self.rows: np.ndarray | None = None
        """The rows gathered for the latest checked step."""
        self.agreement_seconds = 0.0
        """Time spent gathering and checking the rows (the contracts' collective)."""
        self.agreements = 0
        """Steps whose gathered rows every cross-rank rule passed."""
        self.stopped_at: int | None = None
        """The group step in which this rank's own check stopped it, once one has."""
        self._done = False
        self._joined: set[str] = set()
        self._told = False
        """This step's row already told the group that this rank stopped."""
        self._counts: np.ndarray | None = None
        """The counts gathered for the previous step (what ``rank-stale-token-counts``
        keeps using)."""

    # -- the loop ------------------------------------------------------------------------

    def step(self) -> None:
        """One group step; a violation only this rank saw stops every rank with it."""
        self._joined, self._told = set(), False
        try:
            super().step()
        except contracts.ContractViolation as violation:
            if "rows" in self._joined and self.rows is not None and _shared(violation):
                raise  # every rank checked the same rows and raises the same violation
            if self._told:
                self.stopped_at = self.group_step
                raise  # this step's row said so: every rank stops at this same gather
            self._stop_group(violation)
            raise

    def _more_steps(self) -> bool:
        return not self._done

    def _forward(self, scheduled: SchedulerOutput | None) -> StepResult | None:
        busy = self.scheduler.has_unfinished()
        tokens = scheduled.num_tokens if scheduled is not None else self.dummy_tokens
        counts = self.group.gather_counts(tokens, busy)
        self._joined.add("counts")
        if not counts[:, 1].any():
            self._done = True  # no rank has work: every rank stops here, together
            return None
        self.group_step += 1
        across = self._tokens_across_ranks(counts[:, 0])
        local: contracts.ContractViolation | None = None
        try:
            CLOCK.build(contracts.TokensAcrossRanks, dp_size=self.group.world,
                        dp_rank=self.group.rank, own_tokens=tokens, tokens_across_ranks=across)
        except contracts.ContractViolation as violation:
            local = violation  # told to every rank in this step's row, then raised here
        padded = self._padded(across, tokens)
        if local is None:
            self._check(padded, tokens, scheduled, across=across)
        else:
            self._told = True
            with contextlib.suppress(contracts.ContractViolation):  # SG701 naming this rank
                self._check(padded, tokens, scheduled, stopped=_rule_number(local),
                            across=across)
            raise local
        self.exchanging.padded = padded
        self.runner.pad_to = padded  # every rank's forward is the agreed size
        if scheduled is not None:
            result = self.runner.execute(scheduled)
            self._joined.add("exchange")
            return result
        self.runner.dummy_forward(self.dummy_tokens)  # padding rows only: writes no KV
        self._joined.add("exchange")
        result = self.runner.flush()
        if result is None and busy:
            raise EngineStalled("nothing can be scheduled and nothing is in flight")
        return result

    def _tokens_across_ranks(self, gathered: np.ndarray) -> np.ndarray:
        """This rank's copy of every rank's token count (``rank-stale-token-counts``: the
        last rank keeps the copy of its previous step)."""
        previous, self._counts = self._counts, gathered
        if self.fault == faults.RANK_STALE_TOKEN_COUNTS and self._faulty \
                and previous is not None:
            return previous
        return gathered

    def _padded(self, counts: np.ndarray, own: int) -> int:
        if self.fault == faults.RANK_LOCAL_PADDING and self._faulty:
            return padded_size(np.array([own]), self.config.mtp_k)
        return padded_size(counts, self.config.mtp_k)

    @property
    def _faulty(self) -> bool:
        return self.group.rank == self.group.world - 1

    def _dummy_step(self, padded: int) -> None:
        like = self.model.embed_tokens  # the dtype and device of real hidden states
        self.group.exchange(like.new_zeros(self.dummy_tokens, like.shape[1]), padded)
        self._joined.add("exchange")

    # -- the checks across ranks ---------------------------------------------------------

    def _check(self, padded: int, tokens: int, scheduled: SchedulerOutput | None,
               stopped: int = 0, across: np.ndarray | None = None) -> None:
        """Gather every rank's row and check them (nothing at all with contracts off)."""
        settings = contracts.current_config()
        if settings.mode is contracts.Mode.OFF:
            self._joined.add("rows")
            return
        full = settings.depth is contracts.Depth.FULL
        seq_ids = scheduled.seq_ids if scheduled is not None and full else ()
        row = RankStep(step=self.group_step, mtp_k=self.config.mtp_k, num_tokens=tokens,
                       padded_tokens=padded, dummy=scheduled is None,
                       dummy_tokens=self.dummy_tokens, seq_ids=seq_ids, stopped=stopped,
                       tokens_across_ranks=across)
        slots = self.config.max_num_seqs if full else 0
        start = time.perf_counter()
        try:
            self.rows = CLOCK.checking(self.group.gather_rows,
                                       row.row(slots, across_slots=self.group.world))
            self._joined.add("rows")
            CLOCK.checking(check_ranks, self.rows)
            self.agreements += 1
        finally:
            self.agreement_seconds += time.perf_counter() - start

    def _stop_group(self, violation: contracts.ContractViolation) -> None:
        """Finish this step's collectives, then say in the next row which rule stopped
        this rank: every rank raises SG701 at that gather."""
        self.stopped_at = self.group_step
        if "counts" not in self._joined:
            self._report_stop(violation)
            return
        if "exchange" not in self._joined and not self._done:
            self._dummy_step(self.exchanging.padded)
        self._joined = set()
        self._report_stop(violation)

    def _report_stop(self, violation: contracts.ContractViolation) -> None:
        counts = self.group.gather_counts(self.dummy_tokens, True)
        self.group_step += 1
        padded = self._padded(counts[:, 0], self.dummy_tokens)
        # SG701 naming this rank: the others raise it; this rank raises its own.
        with contextlib.suppress(contracts.ContractViolation):
            self._check(padded, self.dummy_tokens, None, stopped=_rule_number(violation),
                        across=counts[:, 0])


def _shared(violation: contracts.ContractViolation) -> bool:
    """Raised by the rows every rank checked (so every rank raises it too)."""
    return all(v.subject == "RankAgreement" for v in violation.violations)


def _rule_number(violation: contracts.ContractViolation) -> int:
    codes = violation.codes
    digits = codes[0][2:] if codes and codes[0][2:].isdigit() else "0"
    return int(digits) or 1  # never 0: 0 means "running"


# --- one rank's process ---------------------------------------------------------------------


@dataclass(frozen=True)
class RankJob:
    """Everything a rank needs to run its share: picklable, for spawned ranks."""

    config: EngineConfig
    requests: tuple[Request, ...]
    world: int
    mode: str
    depth: str
    fault: str | None = None
    threads: int = 1
    timeout_s: float = 60.0

    def config_of(self, rank: int) -> EngineConfig:
        """The rank's engine settings: its own GPU on CUDA (``cuda:rank``); ``rank-mtp-k``
        changes the last rank's mtp_k."""
        config = self.config
        if config.device == "cuda":
            config = dataclasses.replace(config, device=f"cuda:{rank}")
        if self.fault == faults.RANK_MTP_K and rank == self.world - 1:
            mtp_k = config.mtp_k - 1 if config.mtp_k > 1 else 2
            return dataclasses.replace(config, mtp_k=mtp_k)
        return config

    def requests_of(self, rank: int) -> list[Request]:
        """Every ``world``-th request from ``rank`` on (``rank-local-seq-ids``: the last
        rank numbers its share from 0)."""
        share = list(self.requests[rank::self.world])
        if self.fault == faults.RANK_LOCAL_SEQ_IDS and rank == self.world - 1:
            return [Request(i, r.prompt, r.max_tokens, r.stop_token_ids)
                    for i, r in enumerate(share)]
        return share

    def fault_of(self, rank: int) -> str | None:
        """The fault this rank runs with: every fault is injected on the last rank."""
        return self.fault if rank == self.world - 1 else None


@dataclass
class RankOutcome:
    """How one rank's run ended, as it reports it to the launcher."""

    rank: int
    status: str
    step: int = 0
    """The group step it ended at."""
    outputs: dict[int, np.ndarray] = field(default_factory=dict)
    stats: RunStats = field(default_factory=RunStats)
    report: str = ""
    """The violation report or the crash, as printed."""
    codes: tuple[str, ...] = ()
    rows: np.ndarray | None = None
    """The rows gathered at its last checked step."""
    agreement_seconds: float = 0.0
    """Time in the contracts' collective: gathering and checking the rows."""
    agreements: int = 0
    """Steps whose gathered rows every cross-rank rule (SG701-SG706) passed."""


def serve(engine: RankEngine, requests: Sequence[Request]) -> RankOutcome:
    """Run the rank's requests; how it ended."""
    rank = engine.group.rank
    try:
        result = engine.generate(requests)
    except contracts.ContractViolation as violation:
        step = engine.stopped_at if engine.stopped_at is not None else engine.group_step
        return RankOutcome(rank, STOPPED, step, stats=engine.stats,
                           report=str(violation), codes=violation.codes, rows=engine.rows)
    except Exception as error:  # the launcher reports it; the rank must not die silently
        return RankOutcome(rank, CRASHED, engine.group_step, stats=engine.stats,
                           report=f"{type(error).__name__}: {error}", rows=engine.rows)
    return RankOutcome(rank, FINISHED, engine.group_step, result.outputs, result.stats,
                       rows=engine.rows, agreement_seconds=engine.agreement_seconds,
                       agreements=engine.agreements)


_PR_SET_PDEATHSIG = 1
#: How often a rank looks whether its launcher is still there, where the kernel cannot
#: be asked to tell it (anything but Linux).
WATCH_PERIOD_S = 0.5


def _die_with(launcher: int) -> None:
    """End this rank when its launcher ends, however it ends (SIGTERM, SIGKILL, a crash).

    On Linux the kernel sends the rank SIGKILL when its parent dies
    (``PR_SET_PDEATHSIG``); everywhere a daemon thread also watches the parent's pid, so
    no rank is left running, holding a rendezvous or a GPU, after its launcher is gone.
    """
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != launcher:  # it died before the request above took effect
        os._exit(1)

    def watch() -> None:
        while os.getppid() == launcher:
            time.sleep(WATCH_PERIOD_S)
        os._exit(1)

    threading.Thread(target=watch, name="specguard-launcher-watch", daemon=True).start()


def _rank_main(rank: int, job: RankJob, init_method: str, results: Any,
               launcher: int | None = None) -> None:
    """A rank process: join the group, serve its share, report, leave."""
    if launcher is not None:
        _die_with(launcher)
    outcome = RankOutcome(rank, CRASHED, report="did not start")
    try:
        torch.set_num_threads(job.threads)
        contracts.configure(mode=job.mode, depth=job.depth)
        group = RankGroup.join(rank, job.world, init_method, device=job.config.device,
                               timeout_s=job.timeout_s)
        engine = RankEngine(job.config_of(rank), group, fault=job.fault_of(rank))
        outcome = serve(engine, job.requests_of(rank))
    except Exception as error:
        outcome = RankOutcome(rank, CRASHED, report=f"{type(error).__name__}: {error}")
    finally:
        results.put(outcome)
    if outcome.status == FINISHED:
        RankGroup.leave()  # after a failure a peer may be gone: just exit
    raise SystemExit(_EXIT[outcome.status])


# --- the launcher ---------------------------------------------------------------------------


def run_ranks(job: RankJob) -> list[RankOutcome]:
    """Run ``job.world`` ranks to the end; one outcome per rank, in rank order.

    Once a rank has stopped, the others have ``job.timeout_s`` (the collectives'
    timeout) plus a margin to report; a rank still silent then is ended and reported
    as hung, so this never waits forever.
    """
    method = "spawn" if job.config.device.startswith("cuda") else "fork"
    context: Any = multiprocessing.get_context(method)  # fork or spawn: both have Process
    with tempfile.TemporaryDirectory(prefix="specguard-dp-") as folder:
        init_method = Path(folder, "rendezvous").as_uri()
        results = context.Queue()
        launcher = os.getpid()
        processes = [context.Process(target=_rank_main,
                                     args=(rank, job, init_method, results, launcher),
                                     name=f"specguard-rank-{rank}", daemon=True)
                     for rank in range(job.world)]
        with _terminated_as_an_exit():
            for process in processes:
                process.start()
            try:
                return _collect(processes, results, job.timeout_s + 10.0)
            finally:
                for process in processes:
                    if process.is_alive():
                        process.kill()
                    process.join()


@contextlib.contextmanager
def _terminated_as_an_exit() -> Any:
    """SIGTERM to the launcher unwinds it like Ctrl-C (so its ranks are ended and its
    rendezvous folder removed) instead of killing it on the spot."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signals reach the main thread only; the ranks still die with the process
        return

    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _collect(processes: list[Any], results: Any, grace_s: float) -> list[RankOutcome]:
    outcomes: dict[int, RankOutcome] = {}
    deadline: float | None = None
    while len(outcomes) < len(processes):
        try:
            outcome = results.get(timeout=0.1)
            outcomes[outcome.rank] = outcome
        except queue.Empty:
            _note_silent_deaths(processes, outcomes)
        if deadline is None and any(o.status != FINISHED for o in outcomes.values()):
            deadline = time.monotonic() + grace_s
        if deadline is not None and time.monotonic() > deadline:
            for rank in range(len(processes)):
                outcomes.setdefault(rank, RankOutcome(
                    rank, HUNG, report=f"no report {grace_s:.0f} s after another rank "
                    "stopped; ended by the launcher"))
    return [outcomes[rank] for rank in range(len(processes))]


def _note_silent_deaths(processes: list[Any], outcomes: dict[int, RankOutcome]) -> None:
    """A rank that exited without a report (a C++ abort in a collective, the OOM killer)."""
    for rank, process in enumerate(processes):
        code = process.exitcode
        if rank in outcomes or code is None:
            continue
        how = (f"killed by {signal.Signals(-code).name}" if code < 0
               else f"exited with status {code}")
        outcomes[rank] = RankOutcome(rank, CRASHED, report=f"the rank process died ({how}) "
                                     "without a report")


def merged_outputs(outcomes: Sequence[RankOutcome]) -> dict[int, np.ndarray]:
    """Every rank's outputs by seq id, as a front end merges them (later ranks win)."""
    merged: dict[int, np.ndarray] = {}
    for outcome in outcomes:
        merged.update(outcome.outputs)
    return merged


def merged_stats(outcomes: Sequence[RankOutcome]) -> RunStats:
    """The group's statistics: counts add up; times are the slowest rank's (the ranks
    run side by side)."""
    total = RunStats()
    for outcome in outcomes:
        stats = outcome.stats
        for name in ("requests", "prompt_tokens", "output_tokens", "proposed_drafts",
                     "accepted_drafts", "preemptions", "contract_checks", "violations"):
            setattr(total, name, getattr(total, name) + getattr(stats, name))
        total.steps = max(total.steps, outcome.step)
        total.step_seconds = max(total.step_seconds, stats.step_seconds)
        total.contract_seconds = max(total.contract_seconds, stats.contract_seconds)
    return total
