"""The step loop: schedule, execute, deliver, until every request has its tokens.

One step: the scheduler plans a batch; the runner runs it and hands back the *previous*
step's outputs (deferred output); the scheduler delivers them and records what is now in
flight. Every hand-over is checked where it happens: the runner's guarded entry builds
the batch's :class:`specguard.contracts.ScheduledBatch`, and the runner builds ``ModelInput``,
``VerifyOutput``, ``DrafterInput`` and ``DrafterOutput`` as it hands them on (building
one validates it). ``specguard.contracts.flush_deferred`` reads device verdicts at the end of each
step, the point where the previous step's outputs reach the host anyway.

From the default depth on, each forward is also checked against the one before it (where every seq
resumes, which drafts it carries, whose rows the verifier and drafter return) by an
``specguard.adapters.StepTracker``, when the forward's outputs reach the host: during the next step,
before the scheduler sees them (see :mod:`specguard.runner.step_relations`).

An engine serves one workload: :meth:`Engine.generate` once per instance.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from specguard import contracts
from specguard.adapters import StepTracker
from specguard.runner._timing import CLOCK
from specguard.runner.config import EngineConfig
from specguard.runner.model import TinyLM
from specguard.runner.model_runner import ModelRunner
from specguard.runner.scheduler import Scheduler
from specguard.runner.scheduler_output import SchedulerOutput
from specguard.runner.step_output import StepResult
from specguard.runner.step_relations import check_step
from specguard.runner.workload import Request

__all__ = ["Engine", "EngineStalled", "RunResult", "RunStats"]


class EngineStalled(RuntimeError):
    """The engine cannot make progress (a request that can never fit, or a runaway loop)."""


@dataclass
class RunStats:
    """What one :meth:`Engine.generate` did and how long it took."""

    requests: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    steps: int = 0
    proposed_drafts: int = 0
    accepted_drafts: int = 0
    preemptions: int = 0
    step_seconds: float = 0.0
    contract_seconds: float = 0.0
    contract_checks: int = 0
    violations: int = 0

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts over verified drafts."""
        return self.accepted_drafts / self.proposed_drafts if self.proposed_drafts else 0.0

    @property
    def tokens_per_second(self) -> float:
        """Output tokens per second of step time."""
        return self.output_tokens / self.step_seconds if self.step_seconds else 0.0

    @property
    def contract_share(self) -> float:
        """Contract checking time as a fraction of step time."""
        return self.contract_seconds / self.step_seconds if self.step_seconds else 0.0


@dataclass
class RunResult:
    """Generated tokens per request id, and the run's statistics."""

    outputs: dict[int, np.ndarray]
    stats: RunStats = field(default_factory=RunStats)


class Engine:
    """Scheduler, model runner and model, wired for greedy MTP speculative decoding.

    From the default depth on, each forward is related to the one before it by a
    ``StepTracker`` (SG601-SG607); ``step_tracker=False`` leaves that out.
    """

    def __init__(self, config: EngineConfig | None = None, *, fault: str | None = None,
                 model: TinyLM | None = None, step_tracker: bool = True) -> None:
        self.config = config or EngineConfig()
        self.model = model or TinyLM(self.config.model, self.config.device)
        self.scheduler = Scheduler(self.config, fault)
        # step_tracker=False: no forward is recorded or related to the one before it.
        self.runner = ModelRunner(self.config, self.model, fault, relations=step_tracker)
        self.scheduler.prefill_elsewhere = self.runner.prefill_elsewhere
        self.stats = RunStats()
        self.tracker: StepTracker | None = None
        """Relates each forward to the previous one; exists only while relations are checked."""
        self.violation_step: int | None = None
        """The step whose data broke a contract, once one has (strict mode)."""
        self._checking_step: int | None = None
        if contracts.current_config().mode is not contracts.Mode.OFF:
            contracts.compile_checks()  # at start-up, not inside the first steps

    def check(self, requests: Sequence[Request]) -> None:
        """ValueError naming the first request this engine could never serve."""
        for request in requests:
            self.scheduler.check_fits(request)

    def generate(self, requests: Sequence[Request],
                 on_tokens: Callable[[int], object] | None = None) -> RunResult:
        """Run every request to completion; ``on_tokens`` hears of each delivered batch."""
        self.stats = RunStats(requests=len(requests),
                              prompt_tokens=sum(r.prompt_len for r in requests))
        CLOCK.reset()
        self.tracker = None
        checks, violations = contracts.STATS.checks, contracts.STATS.violations
        for request in requests:
            self.scheduler.add(request)
        self.runner.token_bans.add(requests)
        limit = self._step_limit(requests)
        try:
            while self._more_steps():
                if self.stats.steps >= limit:
                    raise EngineStalled(f"no completion after {limit} steps")
                delivered = self.scheduler.delivered_tokens
                self.step()
                if on_tokens is not None:
                    on_tokens(self.scheduler.delivered_tokens - delivered)
            contracts.flush_deferred(wait=True)  # verdicts of the last steps, if on a device
        finally:
            self.stats.contract_seconds = CLOCK.seconds
            self.stats.contract_checks = contracts.STATS.checks - checks
            self.stats.violations = contracts.STATS.violations - violations
            self.stats.preemptions = self.scheduler.num_preemptions
            self.stats.output_tokens = self.scheduler.delivered_tokens
        return RunResult(self.scheduler.outputs(), self.stats)

    @property
    def current_step(self) -> int:
        """The step being run, counting from 1 (after a run: one past the last)."""
        return self.stats.steps + 1

    def step(self) -> None:
        """One engine step (or, when nothing can be scheduled, one delivery)."""
        start = time.perf_counter()
        try:
            preemptions = self.scheduler.num_preemptions
            scheduled = self.scheduler.schedule()
            result = self._forward(scheduled)
            self._count(result)
            self._check_relations(result)
            if scheduled is None and self.scheduler.num_preemptions > preemptions:
                self._break_relations()
            self.scheduler.update(result)
            contracts.flush_deferred()
            if scheduled is not None:
                self.stats.steps += 1  # only now: a step that fails is the current one
        except contracts.ContractViolation:
            self.violation_step = self._checking_step or self.current_step
            raise
        finally:
            self._checking_step = None
            self.stats.step_seconds += time.perf_counter() - start

    def _more_steps(self) -> bool:
        """Whether to run another step: some request still needs tokens."""
        return self.scheduler.has_unfinished()

    def _forward(self, scheduled: SchedulerOutput | None) -> StepResult | None:
        """Run the scheduled batch, or deliver what is in flight when nothing could be
        scheduled; the previous forward's outputs."""
        if scheduled is None:
            result = self.runner.flush()
            if result is None and self.scheduler.has_unfinished():
                raise EngineStalled("nothing can be scheduled and nothing is in flight")
            return result  # None: the last requests were done at admission (P/D)
        return self.runner.execute(scheduled)

    def _check_relations(self, result: StepResult | None) -> None:
        """Check a forward whose outputs just reached the host against the one before it.

        A forward run without a trace (relations not checked then) breaks the chain: the
        tracker is dropped, and the next traced forward starts a new one.
        """
        if result is None:
            return
        if result.trace is None:
            self.tracker = None
            return
        if self.tracker is None:
            self.tracker = StepTracker()
        self._checking_step = result.trace.step  # named by a violation raised here
        CLOCK.checking(check_step, self.tracker, result.trace)
        self._checking_step = None

    def _break_relations(self) -> None:
        """Seqs were preempted in a round that ran no forward: they restart from scratch
        in the next one, with no forward between to show it, so that forward is related
        to none (a round that runs a forward leaves its preempted seqs out of it)."""
        if self.tracker is not None:
            self.tracker.reset()

    def _count(self, result: StepResult | None) -> None:
        if result is not None:
            self.stats.proposed_drafts += result.proposed_drafts()
            self.stats.accepted_drafts += result.accepted_drafts()

    def _step_limit(self, requests: Sequence[Request]) -> int:
        prefill_steps = sum(r.prompt_len for r in requests) // self.config.max_num_batched_tokens
        return 4 * (prefill_steps + sum(r.max_tokens for r in requests) + len(requests)) + 100
