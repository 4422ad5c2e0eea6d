"""``specguard run``: a synthetic workload through the reference MTP engine, and a summary.

With ``--verify`` (implied by ``--fault``) the same requests are also decoded by plain
greedy decoding of the same model, and the two token streams are compared.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import PurePath
from typing import TYPE_CHECKING, Any

from specguard import contracts
from specguard.runner.config import EngineConfig, ModelConfig
from specguard.runner.faults import FAULTS

if TYPE_CHECKING:  # the engine needs torch: imported when a run starts, not for --help
    import numpy as np

    from specguard.runner.data_parallel import RankOutcome
    from specguard.runner.engine import Engine, RunStats
    from specguard.runner.model import TinyLM
    from specguard.runner.workload import Request

__all__ = ["EXIT_CODES", "EXIT_CRASH", "EXIT_DIVERGED", "EXIT_INTERRUPTED", "EXIT_OK",
           "EXIT_USAGE", "EXIT_VIOLATION", "add_arguments", "at_least", "run"]

EXIT_OK = 0
EXIT_DIVERGED = 1
EXIT_USAGE = 2
EXIT_VIOLATION = 3
EXIT_CRASH = 4
EXIT_INTERRUPTED = 130

#: What each exit status of ``specguard run`` means.
EXIT_CODES = {
    EXIT_OK: "the run finished (and matched plain greedy decoding, when compared)",
    EXIT_DIVERGED: "the tokens differ from plain greedy decoding (first divergence printed)",
    EXIT_USAGE: "bad options (argparse), or a device that is not available",
    EXIT_VIOLATION: "a contract violation stopped the run (strict mode; report printed)",
    EXIT_CRASH: "the engine crashed or stalled (exception type and message printed)",
    EXIT_INTERRUPTED: "stopped by Ctrl-C (the summary so far printed)",
}

# The widest draft rows the contracts accept (vLLM's MAX_SPEC_LEN): a wider --mtp-k is a
# usage error here, not a violation at the first step.
MAX_MTP_K = contracts.DIMENSIONS["mtp_k"].maximum or 128

_EPILOG = "".join(["exit codes:\n", *(f"  {code}  {text}\n" for code, text in EXIT_CODES.items()),
                   """
--fault implies --verify, and --depth full unless --depth is given: value rules (ids in
the vocabulary, unique seq ids, decode widths) and the step-to-step rules only run at
full depth.
"""])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard run``."""
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.epilog = _EPILOG
    workload = parser.add_argument_group("workload")
    workload.add_argument("--requests", type=at_least(1), default=64,
                          help="requests (default 64)")
    workload.add_argument("--min-prompt", type=at_least(1), default=16,
                          help="shortest prompt (16)")
    workload.add_argument("--max-prompt", type=at_least(1), default=2048,
                          help="longest prompt (2048)")
    workload.add_argument("--max-tokens", type=at_least(1), default=128,
                          help="output tokens per request (128)")
    workload.add_argument("--seed", type=at_least(0), default=0,
                          help="workload and model seed (0)")
    engine = parser.add_argument_group("engine")
    engine.add_argument("--mtp-k", type=at_least(1, MAX_MTP_K), default=3,
                        help=f"draft tokens per step, 1 to {MAX_MTP_K} (3)")
    engine.add_argument("--max-num-seqs", type=at_least(1), default=32,
                        help="seqs per step (32)")
    engine.add_argument("--max-batched-tokens", type=at_least(1), default=1024,
                        help="token budget per step; longer prompts are chunked (1024)")
    engine.add_argument("--num-blocks", type=at_least(1), default=2048,
                        help="KV-cache blocks; fewer force more preemption (2048)")
    engine.add_argument("--block-size", type=at_least(1), default=16,
                        help="tokens per block (16)")
    engine.add_argument("--device", type=_device, default="cpu",
                        help="cpu (default), cuda or cuda:N")
    engine.add_argument("--threads", type=at_least(1), default=1,
                        help="torch CPU threads (1: the model is too small to share)")
    engine.add_argument("--dp", type=int, default=1, metavar="N",
                        help="data-parallel ranks, one process each (1)")
    engine.add_argument("--dp-timeout", type=float, default=60.0, metavar="S",
                        help="seconds a rank waits in a collective before giving up (60)")
    checks = parser.add_argument_group("contracts")
    checks.add_argument("--contracts", choices=[m.value for m in contracts.Mode],
                        help="contract mode (default: SPECGUARD_MODE, else strict)")
    checks.add_argument("--depth", choices=[d.value for d in contracts.Depth],
                        help="check depth (default: essential; full with --fault)")
    checks.add_argument("--fault", choices=list(FAULTS), help="inject a catalogued bug")
    checks.add_argument("--verify", action="store_true",
                        help="compare with plain greedy decoding of the same model")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def at_least(minimum: int, maximum: int | None = None) -> Callable[[str], int]:
    """An argparse type: an integer in ``[minimum, maximum]``, else a usage error."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        if maximum is not None and value > maximum:
            raise argparse.ArgumentTypeError(f"must be at most {maximum}, got {value}")
        return value
    return parse


def _device(text: str) -> str:
    """An argparse type: ``cpu``, ``cuda`` or ``cuda:N`` (the devices this engine runs on)."""
    if re.fullmatch(r"cpu|cuda(:\d+)?", text.strip()):
        return text.strip()
    raise argparse.ArgumentTypeError(f"the reference engine runs on cpu, cuda or cuda:N, "
                                     f"not {text!r}")


def _memory_problem(args: argparse.Namespace) -> str | None:
    """Why the workload cannot fit in this machine's memory, or None (a rough estimate)."""
    available = _available_memory()
    # Per request: the prompt and its copy in the scheduler, the outputs, and the objects
    # around them (int64 tokens).
    per_request = 8 * (args.min_prompt + args.max_prompt + 2 * args.max_tokens) + 2048
    needed = args.requests * per_request
    if available is None or needed <= available:
        return None
    return (f"--requests {args.requests} needs about {_gigabytes(needed)} for prompts and "
            f"outputs; this machine has {_gigabytes(available)} available")


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


def run(args: argparse.Namespace) -> int:
    """Run the workload; print the summary; return an exit code (see the help)."""
    problem = _memory_problem(args)
    if problem is not None:
        print(f"specguard run: {problem}", file=sys.stderr)
        return EXIT_USAGE
    import torch

    from specguard.runner.engine import Engine
    from specguard.runner.workload import synthetic_requests

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"specguard run: device {args.device!r} is not available", file=sys.stderr)
        return EXIT_USAGE
    usage = _usage_error(args)
    if usage:
        print(f"specguard run: {usage}", file=sys.stderr)
        return EXIT_USAGE
    torch.set_num_threads(args.threads)
    depth = args.depth or ("full" if args.fault else None)
    with _contracts(args.contracts, depth):
        try:
            config = _engine_config(args)
            requests = synthetic_requests(
                args.requests, vocab_size=config.model.vocab_size, seed=args.seed,
                min_prompt=args.min_prompt, max_prompt=args.max_prompt,
                max_tokens=args.max_tokens)
            engine = Engine(config, fault=args.fault)
            engine.check(requests)
        except ValueError as error:
            print(f"specguard run: {error}", file=sys.stderr)
            return EXIT_USAGE
        _print_header(args, config, requests)
        if args.dp > 1:
            return _run_ranks(args, config, requests)
        code = _generate(engine, requests, args)
        if code is not None:
            return code
        if args.verify or args.fault:
            return _compare(engine, requests, args)
        return EXIT_OK


def _usage_error(args: argparse.Namespace) -> str | None:
    if args.dp < 1:
        return f"--dp must be at least 1, got {args.dp}"
    if args.dp_timeout <= 0:
        return f"--dp-timeout must be positive, got {args.dp_timeout}"
    if args.fault and FAULTS[args.fault].across_ranks and args.dp < 2:
        return f"fault {args.fault} only shows across ranks: add --dp 2 or more"
    if args.dp > 1 and args.device.startswith("cuda"):
        import torch

        if torch.cuda.device_count() < args.dp:
            return f"--dp {args.dp} needs {args.dp} GPUs, found {torch.cuda.device_count()}"
    return None


@contextmanager
def _contracts(mode: str | None, depth: str | None) -> Iterator[None]:
    previous = contracts.configure(mode=mode, depth=depth)
    try:
        yield
    finally:
        contracts.restore_config(previous)


def _engine_config(args: argparse.Namespace) -> EngineConfig:
    return EngineConfig(
        mtp_k=args.mtp_k, block_size=args.block_size, num_blocks=args.num_blocks,
        max_num_seqs=args.max_num_seqs, max_num_batched_tokens=args.max_batched_tokens,
        device=args.device, model=ModelConfig(seed=args.seed))


def _print_header(args: argparse.Namespace, config: EngineConfig,
                  requests: list[Request]) -> None:
    fault = f", fault {args.fault}" if args.fault else ""
    ranks = f", {args.dp} data-parallel ranks" if args.dp > 1 else ""
    print(f"specguard run: {len(requests)} requests, mtp_k={config.mtp_k}, "
          f"{_contract_settings()}{fault}, device {config.device}{ranks}")


def _contract_settings() -> str:
    """``contracts strict (depth full)``; only ``contracts off`` when nothing is checked."""
    settings = contracts.current_config()
    if settings.mode is contracts.Mode.OFF:
        return "contracts off"
    return f"contracts {settings.mode.value} (depth {settings.depth.value})"


def _progress(args: argparse.Namespace, total: int, desc: str) -> Any:
    """A progress bar on a terminal; nothing on a pipe or a file (no carriage returns)."""
    from tqdm import tqdm

    return tqdm(total=total, unit="tok", desc=desc, file=sys.stderr, leave=False,
                disable=args.no_progress or not _is_terminal(sys.stderr))


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # replaced or closed
        return False


def _generate(engine: Engine, requests: list[Request], args: argparse.Namespace) -> int | None:
    """Run the engine; an exit code if the run stopped early, else None."""
    total = sum(r.max_tokens for r in requests)
    with _progress(args, total, "engine") as bar:
        try:
            engine.generate(requests, on_tokens=bar.update)
        except contracts.ContractViolation as violation:
            bar.close()
            print(f"stopped at step {engine.current_step} by a contract violation"
                  f"{_late(engine)}:")
            print(violation)
            _print_summary(engine.stats, finished=False)
            return EXIT_VIOLATION
        except KeyboardInterrupt:
            bar.close()
            print(f"interrupted at step {engine.current_step}")
            _print_summary(engine.stats, finished=False)
            return EXIT_INTERRUPTED
        except Exception as error:
            bar.close()
            print(f"engine crashed at step {engine.current_step}: {_crash_text(error)}")
            note = _depth_note(args.fault)
            if note:
                print(note)
            _print_summary(engine.stats, finished=False)
            return EXIT_CRASH
    _print_summary(engine.stats, finished=True)
    return None


def _depth_note(fault: str | None) -> str | None:
    """Say so when a value rule could have stopped a crash but the depth kept it off."""
    settings = contracts.current_config()
    if settings.mode is contracts.Mode.OFF or settings.depth is contracts.Depth.FULL:
        return None
    codes = FAULTS[fault].rules if fault else ()
    rules = [contracts.REGISTRY[c] for c in codes if c in contracts.REGISTRY]
    depth = settings.depth
    deeper = [r.code for r in rules if _DEPTHS.index(r.depth) > _DEPTHS.index(depth)]
    if deeper:
        return (f"  {' or '.join(deeper)} would stop this at the boundary, but it reads "
                f"array values and the depth is {depth.value}: rerun with --depth full")
    return ("  value rules (ids in the vocabulary, unique seq ids, step to step) did not run "
            f"at depth {depth.value}: rerun with --depth full to check array values at the "
            "boundary")


#: The depths from the shallowest: each includes the rules of the ones before it.
_DEPTHS = (contracts.Depth.METADATA, contracts.Depth.ESSENTIAL, contracts.Depth.FULL)


def _late(engine: Engine) -> str:
    """Which earlier step broke a step-to-step rule (checked as its outputs arrived)."""
    step = engine.violation_step
    if step is None or step == engine.current_step:
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


def _print_summary(stats: RunStats, *, finished: bool) -> None:
    """The run's figures; after an early stop, only those that mean something."""
    settings = contracts.current_config()
    checked = "" if settings.mode is contracts.Mode.OFF else f", depth {settings.depth.value}"
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
        ("contract checks", f"{stats.contract_checks} (mode {settings.mode.value}{checked})"),
        ("violations", f"{stats.violations}{_unlogged()}"),
    ]
    if finished and settings.mode is not contracts.Mode.OFF:
        rows.append(("contract time", f"{stats.contract_seconds * 1e3:.1f} ms, "
                                      f"{stats.contract_share:.2%} of step time"))
    for label, value in rows:
        print(f"  {label + ':':<17} {value}")


def _unlogged() -> str:
    """Warn mode logs each distinct violation once: say how many repeats were only counted."""
    repeats = contracts.STATS.repeats_not_logged
    return f" ({repeats} repeats counted, not logged)" if repeats else ""


def _compare(engine: Engine, requests: list[Request], args: argparse.Namespace) -> int:
    return _compare_outputs(engine.model, engine.scheduler.outputs(), requests, args)


def _compare_outputs(model: TinyLM, outputs: dict[int, np.ndarray], requests: list[Request],
                     args: argparse.Namespace) -> int:
    from specguard.runner.oracle import first_divergence, greedy_reference

    total = sum(r.max_tokens for r in requests)
    try:
        with _progress(args, total, "oracle") as bar:
            expected = greedy_reference(model, requests, on_tokens=bar.update)
    except KeyboardInterrupt:
        print("oracle: interrupted before the comparison")
        return EXIT_INTERRUPTED
    divergence = first_divergence(expected, outputs)
    if divergence is None:
        print(f"oracle: identical ({sum(len(t) for t in expected.values())} tokens)")
        return EXIT_OK
    print(f"oracle: DIVERGED at {divergence.describe()}")
    return EXIT_DIVERGED


def _run_ranks(args: argparse.Namespace, config: EngineConfig, requests: list[Request]) -> int:
    """``--dp N``: the ranks in their own processes, then one report for the group."""
    from specguard.adapters.ranks import describe_rows
    from specguard.runner.data_parallel import (
        FINISHED,
        STOPPED,
        RankJob,
        merged_outputs,
        merged_stats,
        run_ranks,
    )
    from specguard.runner.model import TinyLM

    settings = contracts.current_config()
    job = RankJob(config, tuple(requests), args.dp, settings.mode.value, settings.depth.value,
                  fault=args.fault, threads=args.threads, timeout_s=args.dp_timeout)
    outcomes = run_ranks(job)
    stats = merged_stats(outcomes)
    stopped = [o for o in outcomes if o.status == STOPPED]
    failed = [o for o in outcomes if o.status != FINISHED]
    if stopped:
        origin = _origin(stopped)
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
    _print_ranks(outcomes)
    _print_summary(stats, finished=not failed)
    if stopped:
        return EXIT_VIOLATION
    if failed:
        return EXIT_CRASH
    if args.verify or args.fault:
        return _compare_outputs(TinyLM(config.model, config.device), merged_outputs(outcomes),
                                requests, args)
    return EXIT_OK


def _origin(stopped: list[RankOutcome]) -> RankOutcome:
    """The rank whose own check fired; ranks that stopped with it raised SG701."""
    own = [o for o in stopped if o.codes and o.codes[0] != "SG701"]
    return (own or stopped)[0]


def _print_ranks(outcomes: list[RankOutcome]) -> None:
    for outcome in outcomes:
        if outcome.status == "finished":
            text = (f"finished at step {outcome.step}: {outcome.stats.requests} requests, "
                    f"{outcome.stats.output_tokens} tokens")
        elif outcome.status == "stopped":
            text = f"stopped at step {outcome.step} by {', '.join(outcome.codes)}"
        else:
            text = f"{outcome.status} at step {outcome.step}: {outcome.report}"
        print(f"  rank {outcome.rank}: {text}")
