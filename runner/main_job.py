"""``specguard run``: a synthetic workload through the reference MTP engine, and a summary.

With ``--verify`` (implied by ``--fault``) the same requests are also decoded by plain
greedy decoding of the same model, and the two token streams are compared.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import PurePath

import torch
from specguard.runner.config import EngineConfig, ModelConfig
from specguard.runner.engine import Engine, RunStats
from specguard.runner.faults import FAULTS
from specguard.runner.oracle import first_divergence, greedy_reference
from specguard.runner.workload import Request, synthetic_requests
from tqdm import tqdm

from specguard import contracts

__all__ = ["EXIT_CODES", "EXIT_CRASH", "EXIT_DIVERGED", "EXIT_OK", "EXIT_USAGE",
           "EXIT_VIOLATION", "add_arguments", "run"]

EXIT_OK = 0
EXIT_DIVERGED = 1
EXIT_USAGE = 2
EXIT_VIOLATION = 3
EXIT_CRASH = 4

#: What each exit status of ``specguard run`` means.
EXIT_CODES = {
    EXIT_OK: "the run finished (and matched plain greedy decoding, when compared)",
    EXIT_DIVERGED: "the tokens differ from plain greedy decoding (first divergence printed)",
    EXIT_USAGE: "bad options (argparse), or a device that is not available",
    EXIT_VIOLATION: "a contract violation stopped the run (strict mode; report printed)",
    EXIT_CRASH: "the engine crashed or stalled (exception type and message printed)",
}

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
    workload.add_argument("--requests", type=int, default=64, help="requests (default 64)")
    workload.add_argument("--min-prompt", type=int, default=16, help="shortest prompt (16)")
    workload.add_argument("--max-prompt", type=int, default=2048, help="longest prompt (2048)")
    workload.add_argument("--max-tokens", type=int, default=128,
                          help="output tokens per request (128)")
    workload.add_argument("--seed", type=int, default=0, help="workload and model seed (0)")
    engine = parser.add_argument_group("engine")
    engine.add_argument("--mtp-k", type=int, default=3, help="draft tokens per step (3)")
    engine.add_argument("--max-num-seqs", type=int, default=32, help="seqs per step (32)")
    engine.add_argument("--max-batched-tokens", type=int, default=1024,
                        help="token budget per step; longer prompts are chunked (1024)")
    engine.add_argument("--num-blocks", type=int, default=2048,
                        help="KV-cache blocks; fewer force more preemption (2048)")
    engine.add_argument("--block-size", type=int, default=16, help="tokens per block (16)")
    engine.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    engine.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (1: the model is too small to share)")
    checks = parser.add_argument_group("contracts")
    checks.add_argument("--contracts", choices=[m.value for m in contracts.Mode],
                        help="contract mode (default: SPECGUARD_MODE, else strict)")
    checks.add_argument("--depth", choices=[d.value for d in contracts.Depth],
                        help="check depth (default: essential; full with --fault)")
    checks.add_argument("--fault", choices=list(FAULTS), help="inject a catalogued bug")
    checks.add_argument("--verify", action="store_true",
                        help="compare with plain greedy decoding of the same model")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    """Run the workload; print the summary; return an exit code (see the help)."""
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"specguard run: device {args.device!r} is not available", file=sys.stderr)
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
        code = _generate(engine, requests, args)
        if code is not None:
            return code
        if args.verify or args.fault:
            return _compare(engine, requests, args)
        return EXIT_OK


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
    settings = contracts.current_config()
    fault = f", fault {args.fault}" if args.fault else ""
    print(f"specguard run: {len(requests)} requests, mtp_k={config.mtp_k}, "
          f"contracts {settings.mode.value} (depth {settings.depth.value}){fault}, "
          f"device {config.device}")


def _generate(engine: Engine, requests: list[Request], args: argparse.Namespace) -> int | None:
    """Run the engine; an exit code if the run stopped early, else None."""
    total = sum(r.max_tokens for r in requests)
    with tqdm(total=total, unit="tok", desc="engine", file=sys.stderr,
              disable=args.no_progress, leave=False) as bar:
        try:
            engine.generate(requests, on_tokens=bar.update)
        except contracts.ContractViolation as violation:
            bar.close()
            print(f"stopped at step {engine.current_step} by a contract violation"
                  f"{_late(engine)}:")
            print(violation)
            _print_summary(engine.stats)
            return EXIT_VIOLATION
        except Exception as error:
            bar.close()
            print(f"engine crashed at step {engine.current_step}: {_crash_text(error)}")
            _print_summary(engine.stats)
            return EXIT_CRASH
    _print_summary(engine.stats)
    return None


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


def _print_summary(stats: RunStats) -> None:
    settings = contracts.current_config()
    rows = [
        ("requests", f"{stats.requests} ({stats.prompt_tokens} prompt tokens)"),
        ("output tokens", f"{stats.output_tokens}"),
        ("steps", f"{stats.steps} ({stats.preemptions} preemptions)"),
        ("acceptance rate", f"{stats.acceptance_rate:.1%} "
                            f"({stats.accepted_drafts} of {stats.proposed_drafts} drafts)"),
        ("throughput", f"{stats.tokens_per_second:.0f} tokens/s "
                       f"({stats.step_seconds:.2f} s of steps)"),
        ("contract checks", f"{stats.contract_checks} (mode {settings.mode.value}, "
                            f"depth {settings.depth.value})"),
        ("violations", f"{stats.violations}"),
        ("contract time", f"{stats.contract_seconds * 1e3:.1f} ms, "
                          f"{stats.contract_share:.2%} of step time"),
    ]
    for label, value in rows:
        print(f"  {label + ':':<17} {value}")


def _compare(engine: Engine, requests: list[Request], args: argparse.Namespace) -> int:
    total = sum(r.max_tokens for r in requests)
    with tqdm(total=total, unit="tok", desc="oracle", file=sys.stderr,
              disable=args.no_progress, leave=False) as bar:
        expected = greedy_reference(engine.model, requests, on_tokens=bar.update)
    divergence = first_divergence(expected, engine.scheduler.outputs())
    if divergence is None:
        print(f"oracle: identical ({sum(len(t) for t in expected.values())} tokens)")
        return EXIT_OK
    print(f"oracle: DIVERGED at {divergence.describe()}")
    return EXIT_DIVERGED
