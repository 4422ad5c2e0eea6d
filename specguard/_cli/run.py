"""``specguard run``: a synthetic workload through the reference MTP engine, and a summary.

The job itself is :func:`specguard.runner.main_job.run_main_job`, which returns how it
ended as data; this module is its terminal: the options (whose defaults are the job's),
progress bars on a terminal (tqdm), the header, the report and the exit status. With
``--verify`` (implied by ``--fault``) the same requests are also decoded by plain greedy
decoding of the same model, and the two token streams are compared. Building the parser
imports no torch: the engine loads once a run starts.
"""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from specguard import contracts
from specguard._cli._common import (
    EXIT_CRASH,
    EXIT_DIVERGED,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VIOLATION,
    at_least,
)
from specguard.runner.faults import FAULTS
from specguard.runner.main_job import (
    MAX_MTP_K,
    Ending,
    JobOutcome,
    JobSettings,
    JobStart,
    run_main_job,
)

if TYPE_CHECKING:
    from specguard.runner.data_parallel import RankOutcome
    from specguard.runner.engine import RunStats

__all__ = ["EXIT_CODES", "EXIT_STATUS", "HELP", "add_arguments", "run"]

HELP = "run a synthetic workload through the reference MTP engine"

#: What each exit status of ``specguard run`` means.
EXIT_CODES = {
    EXIT_OK: "the run finished (and matched plain greedy decoding, when compared)",
    EXIT_DIVERGED: "the tokens differ from plain greedy decoding (first divergence printed)",
    EXIT_USAGE: "bad options (argparse), or a device that is not available",
    EXIT_VIOLATION: "a contract violation stopped the run (strict mode; report printed)",
    EXIT_CRASH: "the engine crashed or stalled (exception type and message printed)",
    EXIT_INTERRUPTED: "stopped by Ctrl-C (the summary so far printed)",
}

#: The exit status of each way a job ends.
EXIT_STATUS = {
    Ending.FINISHED: EXIT_OK, Ending.DIVERGED: EXIT_DIVERGED, Ending.REFUSED: EXIT_USAGE,
    Ending.VIOLATION: EXIT_VIOLATION, Ending.CRASH: EXIT_CRASH,
    Ending.INTERRUPTED: EXIT_INTERRUPTED,
}

_EPILOG = "".join(["exit codes:\n", *(f"  {code}  {text}\n" for code, text in EXIT_CODES.items()),
                   """
--fault implies --verify, and --depth full unless --depth is given: value rules (ids in
the vocabulary, unique seq ids, decode widths) and the step-to-step rules only run at
full depth.
"""])

_DEFAULT = JobSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard run``: one per field of :class:`JobSettings`, and
    ``--no-progress``."""
    job = _DEFAULT
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    workload = parser.add_argument_group("workload")
    workload.add_argument("--requests", type=at_least(1), default=job.requests,
                          help=f"requests (default {job.requests})")
    workload.add_argument("--min-prompt", type=at_least(1), default=job.min_prompt,
                          help=f"shortest prompt ({job.min_prompt})")
    workload.add_argument("--max-prompt", type=at_least(1), default=job.max_prompt,
                          help=f"longest prompt ({job.max_prompt})")
    workload.add_argument("--max-tokens", type=at_least(1), default=job.max_tokens,
                          help=f"output tokens per request ({job.max_tokens})")
    workload.add_argument("--seed", type=at_least(0), default=job.seed,
                          help=f"workload and model seed ({job.seed})")
    engine = parser.add_argument_group("engine")
    engine.add_argument("--mtp-k", type=at_least(1, MAX_MTP_K), default=job.mtp_k,
                        help=f"draft tokens per step, 1 to {MAX_MTP_K} ({job.mtp_k})")
    engine.add_argument("--max-num-seqs", type=at_least(1), default=job.max_num_seqs,
                        help=f"seqs per step ({job.max_num_seqs})")
    engine.add_argument("--max-batched-tokens", type=at_least(1),
                        default=job.max_batched_tokens,
                        help="token budget per step; longer prompts are chunked "
                             f"({job.max_batched_tokens})")
    engine.add_argument("--num-blocks", type=at_least(1), default=job.num_blocks,
                        help="KV-cache blocks; fewer force more preemption "
                             f"({job.num_blocks})")
    engine.add_argument("--block-size", type=at_least(1), default=job.block_size,
                        help=f"tokens per block ({job.block_size})")
    engine.add_argument("--device", type=_device, default=job.device,
                        help=f"{job.device} (default), cuda or cuda:N")
    engine.add_argument("--threads", type=at_least(1), default=job.threads,
                        help=f"torch CPU threads ({job.threads}: the model is too small "
                             "to share)")
    engine.add_argument("--dp", type=int, default=job.dp, metavar="N",
                        help=f"data-parallel ranks, one process each ({job.dp})")
    engine.add_argument("--dp-timeout", type=float, default=job.dp_timeout, metavar="S",
                        help="seconds a rank waits in a collective before giving up "
                             f"({job.dp_timeout:g})")
    checks = parser.add_argument_group("contracts")
    checks.add_argument("--contracts", choices=[m.value for m in contracts.Mode],
                        help="contract mode (default: SPECGUARD_MODE, else strict)")
    checks.add_argument("--depth", choices=[d.value for d in contracts.Depth],
                        help="check depth (default: essential; full with --fault)")
    checks.add_argument("--fault", choices=list(FAULTS), help="inject a catalogued bug")
    checks.add_argument("--verify", action="store_true",
                        help="compare with plain greedy decoding of the same model")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def _device(text: str) -> str:
    """An argparse type: ``cpu``, ``cuda`` or ``cuda:N`` (the devices this engine runs on)."""
    if re.fullmatch(r"cpu|cuda(:\d+)?", text.strip()):
        return text.strip()
    raise argparse.ArgumentTypeError(f"the reference engine runs on cpu, cuda or cuda:N, "
                                     f"not {text!r}")


def settings_of(args: argparse.Namespace) -> JobSettings:
    """The job the parsed options describe."""
    return JobSettings(**{f.name: getattr(args, f.name)
                          for f in dataclasses.fields(JobSettings)})


def run(args: argparse.Namespace) -> int:
    """Run the main job on this terminal: header, progress, report; the exit status."""
    outcome = run_main_job(settings_of(args), _Terminal(progress=not args.no_progress))
    if outcome.ending is Ending.REFUSED:
        print(f"specguard run: {outcome.problem}", file=sys.stderr)
    elif outcome.interrupted_in == "oracle":
        print("oracle: interrupted before the comparison")
    elif outcome.divergence is not None:
        print(f"oracle: DIVERGED at {outcome.divergence.describe()}")
    elif outcome.compared:
        print(f"oracle: identical ({outcome.compared_tokens} tokens)")
    return EXIT_STATUS[outcome.ending]


class _Terminal:
    """The job's listener on a terminal: the header, tqdm's bars, the report of the run."""

    def __init__(self, *, progress: bool) -> None:
        self.progress = progress

    def started(self, start: JobStart) -> None:
        fault = f", fault {start.fault}" if start.fault else ""
        ranks = f", {start.ranks} data-parallel ranks" if start.ranks > 1 else ""
        print(f"specguard run: {start.requests} requests, mtp_k={start.mtp_k}, "
              f"{_contract_settings(start)}{fault}, device {start.device}{ranks}")

    @contextmanager
    def phase(self, name: str, total: int) -> Iterator[Callable[[int], object]]:
        """A progress bar on a terminal; nothing on a pipe or a file (no carriage returns)."""
        from tqdm import tqdm

        with tqdm(total=total, unit="tok", desc=name, file=sys.stderr, leave=False,
                  disable=not self.progress or not _is_terminal(sys.stderr)) as bar:
            yield bar.update

    def ran(self, outcome: JobOutcome) -> None:
        if outcome.ranks:
            _print_ranks_report(outcome)
        elif outcome.ending is Ending.VIOLATION:
            print(f"stopped at step {outcome.step} by a contract violation{_late(outcome)}:")
            print(outcome.violation)
        elif outcome.ending is Ending.INTERRUPTED:
            print(f"interrupted at step {outcome.step}")
        elif outcome.ending is Ending.CRASH:
            assert outcome.error is not None
            print(f"engine crashed at step {outcome.step}: {_crash_text(outcome.error)}")
            note = _depth_note(outcome)
            if note:
                print(note)
        _print_summary(outcome)


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _contract_settings(start: JobStart) -> str:
    """``contracts strict (depth full)``; only ``contracts off`` when nothing is checked."""
    if start.mode is contracts.Mode.OFF:
        return "contracts off"
    return f"contracts {start.mode.value} (depth {start.depth.value})"


#: The depths from the shallowest: each includes the rules of the ones before it.
_DEPTHS = (contracts.Depth.METADATA, contracts.Depth.ESSENTIAL, contracts.Depth.FULL)


def _depth_note(outcome: JobOutcome) -> str | None:
    """Say so when a value rule could have stopped a crash but the depth kept it off."""
    start = outcome.start
    if start is None or start.mode is contracts.Mode.OFF or start.depth is contracts.Depth.FULL:
        return None
    codes = FAULTS[start.fault].rules if start.fault else ()
    rules = [contracts.REGISTRY[c] for c in codes if c in contracts.REGISTRY]
    depth = start.depth
    deeper = [r.code for r in rules if _DEPTHS.index(r.depth) > _DEPTHS.index(depth)]
    if deeper:
        return (f"  {' or '.join(deeper)} would stop this at the boundary, but it reads "
                f"array values and the depth is {depth.value}: rerun with --depth full")
    return ("  value rules (ids in the vocabulary, unique seq ids, step to step) did not run "
            f"at depth {depth.value}: rerun with --depth full to check array values at the "
            "boundary")


def _late(outcome: JobOutcome) -> str:
    """Which earlier step broke a step-to-step rule (checked as its outputs arrived)."""
    step = outcome.violation_step
    if step is None or step == outcome.step:
        return ""
    return f" in step {step}, checked against step {step - 1} as its outputs reached the host"


def _crash_text(error: BaseException) -> str:
    """``IndexError: ... (raised in runner/x.py:12 in f)``, paths relative to the package."""
    frames = traceback.extract_tb(error.__traceback__)
    where = ""
    own = [f for f in frames if "runner" in PurePath(f.filename).parts]
    if own:
        frame = own[-1]
        where = f" (in runner/{PurePath(frame.filename).name}:{frame.lineno}, {frame.name})"
    return f"{type(error).__name__}: {error}{where}"


def _print_summary(outcome: JobOutcome) -> None:
    """The run's figures; after an early stop, only those that mean something."""
    stats: RunStats | None = outcome.stats
    start = outcome.start
    assert stats is not None and start is not None
    finished = outcome.completed
    checked = "" if start.mode is contracts.Mode.OFF else f", depth {start.depth.value}"
    rows = [
        ("requests", f"{stats.requests} ({stats.prompt_tokens} prompt tokens)"),
        ("output tokens", f"{stats.output_tokens}"),
        ("steps", f"{stats.steps} ({stats.preemptions} preemptions)"),
    ]
    if stats.proposed_drafts:
        rows.append(("acceptance rate", f"{stats.acceptance_rate:.1%} ({stats.accepted_drafts} "
                                        f"of {stats.proposed_drafts} drafts)"))
    if finished and stats.output_tokens:
        rows.append(("throughput", f"{stats.tokens_per_second:.0f} tokens/s "
                                   f"({stats.step_seconds:.2f} s of steps)"))
    rows += [
        ("contract checks", f"{stats.contract_checks} (mode {start.mode.value}{checked})"),
        ("violations", f"{stats.violations}{_unlogged(outcome.repeats_not_logged)}"),
    ]
    if finished and start.mode is not contracts.Mode.OFF:
        rows.append(("contract time", f"{stats.contract_seconds * 1e3:.1f} ms, "
                                      f"{stats.contract_share:.2%} of step time"))
    agreed = _rank_agreement(outcome)
    if agreed is not None:
        rows.append(("ranks agreed", agreed))
    for label, value in rows:
        print(f"  {label + ':':<17} {value}")
    hint = _next_step(outcome)
    if hint:
        print(hint)


def _rank_agreement(outcome: JobOutcome) -> str | None:
    """``--dp N``: that the cross-rank rules ran, on how many steps, and agreed."""
    from specguard.runner.data_parallel import FINISHED

    start = outcome.start
    if not outcome.ranks or start is None or start.mode is contracts.Mode.OFF:
        return None
    if any(o.status != FINISHED for o in outcome.ranks):
        return None
    steps = min(o.agreements for o in outcome.ranks)
    return (f"{steps} steps checked across {len(outcome.ranks)} ranks (SG701-SG706), "
            "every one in agreement")


def _next_step(outcome: JobOutcome) -> str | None:
    """What to try next, after a clean run."""
    start = outcome.start
    if not outcome.completed or start is None or outcome.ending is not Ending.FINISHED:
        return None
    if start.fault is None:
        return ("next: specguard run --fault compact-draft-rows (a real bug, stopped at the "
                "boundary); specguard faults lists the others")
    return None


def _unlogged(repeats: int) -> str:
    """Warn mode logs each distinct violation once: say how many repeats were only counted."""
    return f" ({repeats} repeats counted, not logged)" if repeats else ""


def _print_ranks_report(outcome: JobOutcome) -> None:
    """``--dp N``: how the group stopped, if it did, then one line per rank."""
    from specguard.adapters.ranks import describe_rows
    from specguard.runner.data_parallel import FINISHED

    origin = outcome.origin
    failed = [o for o in outcome.ranks if o.status != FINISHED]
    if origin is not None:
        where = (f"on rank {origin.rank}" if origin.codes and origin.codes[0] != "SG701"
                 and not origin.report.startswith("RankAgreement")
                 else "across ranks (every rank checked it)")
        print(f"stopped at step {origin.step} by a contract violation {where}:")
        print(origin.report)
        if origin.rows is not None:
            print("what each rank reported at the last check:")
            for line in describe_rows(origin.rows):
                print(f"  {line}")
    elif failed:
        first = failed[0]
        print(f"engine crashed at step {first.step} on rank {first.rank}: {first.report}")
    _print_ranks(outcome.ranks)


def _print_ranks(outcomes: tuple[RankOutcome, ...]) -> None:
    for outcome in outcomes:
        if outcome.status == "finished":
            text = (f"finished at step {outcome.step}: {outcome.stats.requests} requests, "
                    f"{outcome.stats.output_tokens} tokens")
        elif outcome.status == "stopped":
            text = f"stopped at step {outcome.step} by {', '.join(outcome.codes)}"
        else:
            text = f"{outcome.status} at step {outcome.step}: {outcome.report}"
        print(f"  rank {outcome.rank}: {text}")
