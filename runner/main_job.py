"""The main job: a synthetic workload through the reference MTP engine, and how it ended.

:func:`run_main_job` runs the job that :class:`JobSettings` describe and returns a
:class:`JobOutcome`: how it ended (:class:`Ending`), the run's figures, the violation that
stopped it or the exception that crashed it, and, with ``verify`` (implied by ``fault``),
how its tokens compare with plain greedy decoding of the same model. It prints nothing
and exits nothing: whoever runs it is told how far it has got through a
:class:`JobListener`, and reads the outcome. ``specguard run`` (``specguard._cli.run``)
is that caller on a terminal: options in, progress bars, the report and an exit status
out. The engine, and so torch, is imported only once a job starts.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from specguard import contracts
from specguard.runner import faults
from specguard.runner.config import EngineConfig, ModelConfig
from specguard.runner.faults import FAULTS

if TYPE_CHECKING:  # the engine needs torch: imported when a job starts
    import numpy as np

    from specguard.runner.data_parallel import RankOutcome
    from specguard.runner.engine import Engine, RunStats
    from specguard.runner.model import TinyLM
    from specguard.runner.oracle import Divergence
    from specguard.runner.workload import Request

__all__ = ["MAX_MTP_K", "QUIET", "Ending", "JobListener", "JobOutcome", "JobSettings",
           "JobStart", "engine_config", "run_main_job", "workload"]

# The widest draft rows the contracts accept (vLLM's MAX_SPEC_LEN).
MAX_MTP_K = contracts.DIMENSIONS["mtp_k"].maximum or 128


@dataclass(frozen=True)
class JobSettings:
    """One job: its workload, its engine and its contracts (``specguard run``'s defaults)."""

    requests: int = 64
    min_prompt: int = 16
    max_prompt: int = 2048
    max_tokens: int = 128
    """Output tokens per request."""
    seed: int = 0
    """Seeds the workload and the model."""
    mtp_k: int = 3
    max_num_seqs: int = 32
    max_batched_tokens: int = 1024
    num_blocks: int = 2048
    block_size: int = 16
    device: str = "cpu"
    """``cpu``, ``cuda`` or ``cuda:N``."""
    threads: int = 1
    """torch CPU threads (the model is too small to share)."""
    dp: int = 1
    """Data-parallel ranks, one process each."""
    dp_timeout: float = 60.0
    """Seconds a rank waits in a collective before giving up."""
    contracts: str | None = None
    """The contract mode; None keeps the configured one (``SPECGUARD_MODE``, else strict)."""
    depth: str | None = None
    """The check depth; None keeps the configured one, or full with a fault."""
    fault: str | None = None
    """A fault of the catalogue to inject (:data:`specguard.runner.faults.FAULTS`)."""
    verify: bool = False
    """Compare the tokens with plain greedy decoding of the same model."""


class Ending(enum.Enum):
    """How a job ended."""

    FINISHED = "finished"
    """It ran to the end (and matched greedy decoding, when compared)."""
    DIVERGED = "diverged"
    """Its tokens differ from plain greedy decoding."""
    REFUSED = "refused"
    """It did not start: settings this machine or engine cannot run (``problem`` says)."""
    VIOLATION = "violation"
    """A contract violation stopped it (strict mode)."""
    CRASH = "crash"
    """The engine raised, or a rank crashed or stalled."""
    INTERRUPTED = "interrupted"
    """Ctrl-C, in the engine or in the greedy comparison (``interrupted_in``)."""


@dataclass(frozen=True)
class JobStart:
    """What a job runs, once it is set up and about to step."""

    requests: int
    mtp_k: int
    device: str
    mode: contracts.Mode
    depth: contracts.Depth
    fault: str | None
    ranks: int


@dataclass(frozen=True)
class JobOutcome:
    """How a job ended and what it found; what ``specguard run`` reports, as data."""

    ending: Ending
    settings: JobSettings
    problem: str | None = None
    """Why the settings were refused (``Ending.REFUSED``)."""
    start: JobStart | None = None
    """What ran; None when the job was refused."""
    stats: RunStats | None = None
    """The run's figures (the group's, across data-parallel ranks)."""
    completed: bool = False
    """The engine served every request (so throughput and contract time mean something)."""
    step: int = 0
    """The step the engine was at when it stopped."""
    violation_step: int | None = None
    """The step whose hand-over broke a rule (earlier for a step-to-step rule)."""
    violation: contracts.ContractViolation | None = None
    error: Exception | None = None
    """What the engine raised (``Ending.CRASH`` of a single engine)."""
    interrupted_in: str | None = None
    """``"engine"`` or ``"oracle"``: where Ctrl-C stopped the job."""
    compared: bool = False
    """The tokens were compared with plain greedy decoding."""
    divergence: Divergence | None = None
    compared_tokens: int = 0
    """Tokens found identical to greedy decoding."""
    repeats_not_logged: int = 0
    """Violations that warn mode counted without logging them again."""
    ranks: tuple[RankOutcome, ...] = ()
    """Each rank's ending, with ``dp`` above 1."""
    origin: RankOutcome | None = None
    """The rank whose own check stopped the group (the others raised SG701)."""


class JobListener(Protocol):
    """Told how far a job has got, while it runs (progress bars, a header)."""

    def started(self, start: JobStart) -> None:
        """The job is set up and the engine is about to step."""

    def phase(self, name: str, total: int) -> AbstractContextManager[Callable[[int], object]]:
        """A phase of ``total`` output tokens begins (``"engine"``, then ``"oracle"``):
        the context gives the callable told each batch of tokens done; leaving it ends
        the phase."""
        ...

    def ran(self, outcome: JobOutcome) -> None:
        """The engine (or every rank) is done: the outcome so far, before any comparison
        with greedy decoding."""


class _Quiet:
    """A listener that wants to know nothing."""

    def started(self, start: JobStart) -> None:
        pass

    def phase(self, name: str, total: int) -> AbstractContextManager[Callable[[int], object]]:
        return nullcontext(_ignore)

    def ran(self, outcome: JobOutcome) -> None:
        pass


def _ignore(count: int) -> None:
    pass


#: The listener of a job run without one.
QUIET: JobListener = _Quiet()


def engine_config(settings: JobSettings) -> EngineConfig:
    """The engine the settings describe."""
    # The unproposed-drafts fault shows only where the drafter stops proposing: give it
    # a context limit that the longer seqs of the workload pass.
    limit = settings.max_prompt if settings.fault == faults.UNPROPOSED_DRAFTS else None
    return EngineConfig(
        mtp_k=settings.mtp_k, block_size=settings.block_size, num_blocks=settings.num_blocks,
        max_num_seqs=settings.max_num_seqs, max_num_batched_tokens=settings.max_batched_tokens,
        device=settings.device, model=ModelConfig(seed=settings.seed),
        drafter_max_model_len=limit)


def workload(settings: JobSettings, config: EngineConfig) -> list[Request]:
    """The synthetic requests the settings describe, for the engine of ``config``."""
    from specguard.runner.workload import synthetic_requests

    # The misaligned-logits-rows fault shows only where requests ban tokens: half of
    # them do.
    constrained = 0.5 if settings.fault == faults.MISALIGNED_LOGITS_ROWS else 0.0
    # The remote-drafts-lost fault shows only on a P/D decode instance: half of the
    # requests are prefilled elsewhere.
    remote = 0.5 if settings.fault == faults.REMOTE_DRAFTS_LOST else 0.0
    return synthetic_requests(
        settings.requests, vocab_size=config.model.vocab_size, seed=settings.seed,
        min_prompt=settings.min_prompt, max_prompt=settings.max_prompt,
        max_tokens=settings.max_tokens, constrained=constrained, remote=remote)


def run_main_job(settings: JobSettings, listener: JobListener = QUIET) -> JobOutcome:
    """Run the job; return how it ended. Raises only what no ending covers (a missing
    torch, Ctrl-C while the job is set up or while ranks run)."""
    problem = _memory_problem(settings)
    if problem is not None:
        return JobOutcome(Ending.REFUSED, settings, problem=problem)
    import torch

    from specguard.runner.engine import Engine
    from specguard.runner.host_memory import keep_freed_memory

    if settings.device.startswith("cuda") and not torch.cuda.is_available():
        return JobOutcome(Ending.REFUSED, settings,
                          problem=f"device {settings.device!r} is not available")
    usage = _usage_error(settings)
    if usage:
        return JobOutcome(Ending.REFUSED, settings, problem=usage)
    torch.set_num_threads(settings.threads)
    keep_freed_memory()  # the job owns its process: reuse freed tensor memory
    depth = settings.depth or ("full" if settings.fault else None)
    with _contracts(settings.contracts, depth):
        try:
            config = engine_config(settings)
            requests = workload(settings, config)
            engine = Engine(config, fault=settings.fault)
            engine.check(requests)
        except ValueError as error:
            return JobOutcome(Ending.REFUSED, settings, problem=str(error))
        checking = contracts.current_config()
        start = JobStart(requests=len(requests), mtp_k=config.mtp_k, device=config.device,
                         mode=checking.mode, depth=checking.depth, fault=settings.fault,
                         ranks=settings.dp)
        listener.started(start)
        if settings.dp > 1:
            return _run_ranks(settings, start, config, requests, listener)
        return _run_engine(settings, start, engine, requests, listener)


#: What one rank process of the default engine holds of its own (measured: about 400 MiB
#: of anonymous memory at the default workload), and how many ranks share one core
#: before the collectives' timeouts, not the work, decide the run.
RANK_MEMORY_BYTES = 512 * 2**20
RANKS_PER_CORE = 8


def _usage_error(settings: JobSettings) -> str | None:
    if settings.dp < 1:
        return f"--dp must be at least 1, got {settings.dp}"
    if not math.isfinite(settings.dp_timeout) or settings.dp_timeout <= 0:
        return (f"--dp-timeout must be a positive, finite number of seconds, got "
                f"{settings.dp_timeout}")
    if settings.dp > 1 and not settings.device.startswith("cuda"):
        problem = _ranks_problem(settings.dp)
        if problem is not None:
            return problem
    if settings.fault and FAULTS[settings.fault].across_ranks and settings.dp < 2:
        return f"fault {settings.fault} only shows across ranks: add --dp 2 or more"
    if settings.dp > 1 and settings.device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < settings.dp:
            return (f"--dp {settings.dp} needs {settings.dp} GPUs, "
                    f"found {torch.cuda.device_count()}")
    return None


def _ranks_problem(ranks: int) -> str | None:
    """Why this machine cannot hold ``ranks`` rank processes on the CPU, or None."""
    cores = os.cpu_count() or 1
    available = _available_memory()
    by_memory = available // RANK_MEMORY_BYTES if available is not None else ranks
    most = max(1, min(cores * RANKS_PER_CORE, by_memory))
    if ranks <= most:
        return None
    if by_memory < cores * RANKS_PER_CORE:
        why = (f"each rank holds about {RANK_MEMORY_BYTES // 2**20} MiB and "
               f"{_gigabytes(available or 0)} are available")
    else:
        why = f"this machine has {cores} cores, at most {RANKS_PER_CORE} ranks each"
    return (f"--dp {ranks} is more ranks than this machine can hold ({why}): use --dp "
            f"{most} or fewer")


def _memory_problem(settings: JobSettings) -> str | None:
    """Why the workload cannot fit in this machine's memory, or None (a rough estimate)."""
    available = _available_memory()
    # Per request: the prompt and its copy in the scheduler, the outputs, and the objects
    # around them (int64 tokens).
    per_request = 8 * (settings.min_prompt + settings.max_prompt + 2 * settings.max_tokens) \
        + 2048
    needed = settings.requests * per_request
    if available is None or needed <= available:
        return None
    return (f"--requests {settings.requests} needs about {_gigabytes(needed)} for prompts "
            f"and outputs; this machine has {_gigabytes(available)} available")


def _available_memory() -> int | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return None


def _gigabytes(count: int) -> str:
    return f"{count / 2**30:,.1f} GiB"


@contextmanager
def _contracts(mode: str | None, depth: str | None) -> Iterator[None]:
    previous = contracts.configure(mode=mode, depth=depth)
    try:
        yield
    finally:
        contracts.restore_config(previous)


def _run_engine(settings: JobSettings, start: JobStart, engine: Engine,
                requests: list[Request], listener: JobListener) -> JobOutcome:
    """One engine in this process, then the comparison when asked for."""
    ending, violation, error = Ending.FINISHED, None, None
    with listener.phase("engine", sum(r.max_tokens for r in requests)) as advance:
        try:
            engine.generate(requests, on_tokens=advance)
        except contracts.ContractViolation as stopped:
            ending, violation = Ending.VIOLATION, stopped
        except KeyboardInterrupt:
            ending = Ending.INTERRUPTED
        except Exception as crash:
            ending, error = Ending.CRASH, crash
    outcome = JobOutcome(
        ending, settings, start=start, stats=engine.stats,
        completed=ending is Ending.FINISHED, step=engine.current_step,
        violation_step=engine.violation_step, violation=violation, error=error,
        interrupted_in="engine" if ending is Ending.INTERRUPTED else None,
        repeats_not_logged=contracts.STATS.repeats_not_logged)
    listener.ran(outcome)
    if ending is not Ending.FINISHED or not (settings.verify or settings.fault):
        return outcome
    return _compared(outcome, engine.model, engine.scheduler.outputs(), requests, listener)


def _run_ranks(settings: JobSettings, start: JobStart, config: EngineConfig,
               requests: list[Request], listener: JobListener) -> JobOutcome:
    """``dp`` ranks in their own processes, then one outcome for the group."""
    from specguard.runner.data_parallel import (
        FINISHED,
        STOPPED,
        RankJob,
        merged_outputs,
        merged_stats,
        run_ranks,
    )
    from specguard.runner.model import TinyLM

    job = RankJob(config, tuple(requests), settings.dp, start.mode.value, start.depth.value,
                  fault=settings.fault, threads=settings.threads,
                  timeout_s=settings.dp_timeout)
    outcomes = run_ranks(job)
    stopped = [o for o in outcomes if o.status == STOPPED]
    failed = [o for o in outcomes if o.status != FINISHED]
    ending = Ending.VIOLATION if stopped else Ending.CRASH if failed else Ending.FINISHED
    origin = _origin(stopped) if stopped else None
    last = origin or (failed[0] if failed else max(outcomes, key=lambda o: o.step))
    outcome = JobOutcome(
        ending, settings, start=start, stats=merged_stats(outcomes), completed=not failed,
        step=last.step, ranks=tuple(outcomes), origin=origin,
        repeats_not_logged=contracts.STATS.repeats_not_logged)
    listener.ran(outcome)
    if ending is not Ending.FINISHED or not (settings.verify or settings.fault):
        return outcome
    return _compared(outcome, TinyLM(config.model, config.device), merged_outputs(outcomes),
                     requests, listener)


def _origin(stopped: Sequence[RankOutcome]) -> RankOutcome:
    """The rank whose own check fired; ranks that stopped with it raised SG701."""
    own = [o for o in stopped if o.codes and o.codes[0] != "SG701"]
    return (own or list(stopped))[0]


def _compared(outcome: JobOutcome, model: TinyLM, outputs: dict[int, np.ndarray],
              requests: list[Request], listener: JobListener) -> JobOutcome:
    """The outcome, with the tokens compared against plain greedy decoding."""
    from specguard.runner.oracle import first_divergence, greedy_reference

    try:
        with listener.phase("oracle", sum(r.max_tokens for r in requests)) as advance:
            expected = greedy_reference(model, requests, on_tokens=advance)
    except KeyboardInterrupt:
        return dataclasses.replace(outcome, ending=Ending.INTERRUPTED, interrupted_in="oracle")
    divergence = first_divergence(expected, outputs)
    if divergence is not None:
        return dataclasses.replace(outcome, ending=Ending.DIVERGED, compared=True,
                                   divergence=divergence)
    return dataclasses.replace(outcome, compared=True,
                               compared_tokens=sum(len(t) for t in expected.values()))
