"""The accelerator check: no host sync from validation, deferred verdicts, the engine on a GPU.

Run it on a machine with CUDA: ``python -m specguard.benchmarks.device_check`` (or ``--device
cuda:1``). It prints one line per check and exits 0 when every check holds, 1 when one
fails and 2 when the device is missing. What it checks:

* every clean boundary object, moved to the device, validates at metadata depth, at the
  default essential depth and at full depth (deferred device values) under
  ``torch.cuda.set_sync_debug_mode("error")``, so any host sync that validation causes
  raises instead of passing unnoticed;
* a broken object (vLLM's ``-1`` at the MTP head's embedding) raises nothing at
  construction and a ``DeferredViolation`` naming SG301 at ``flush_deferred``, at the
  default depth;
* the cost of a full-depth validation on the device, timed with CUDA events;
* the reference engine on the device: ``specguard run --verify`` and every fault of the
  catalogue under strict contracts.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from specguard import contracts

if TYPE_CHECKING:
    from specguard.runner.main_job import Ending

__all__ = ["main", "moved_to", "objects_on"]


def objects_on(device: str) -> dict[str, contracts.BoundaryObject]:
    """A clean instance of every boundary class with its arrays moved to ``device``."""
    from specguard.adapters.examples import CLEAN

    return {name: moved_to(clean(), device) for name, clean in CLEAN.items()}


def moved_to(obj: contracts.BoundaryObject, device: str) -> contracts.BoundaryObject:
    """``obj`` rebuilt with its arrays as tensors on ``device`` (not validated again)."""
    import numpy as np
    import torch

    fields = {}
    for spec in contracts.fields_of(type(obj)):
        value = getattr(obj, spec.name)
        if isinstance(value, np.ndarray) or torch.is_tensor(value):
            value = torch.as_tensor(value).to(device)
        fields[spec.name] = value
    with contracts.checking(mode="off"):
        return type(obj)(**fields)


@contextlib.contextmanager
def _syncs_are_errors(torch: Any) -> Iterator[None]:
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("error")
    try:
        yield
    finally:
        torch.cuda.set_sync_debug_mode(previous)


def _check(label: str, action: Callable[[], str]) -> bool:
    try:
        detail = action()
    except Exception as error:
        print(f"FAIL  {label}: {type(error).__name__}: {error}")
        return False
    print(f"ok    {label}{': ' + detail if detail else ''}")
    return True


def _sync_free(torch: Any, obj: contracts.BoundaryObject, depth: str) -> str:
    with contracts.checking(depth=depth, device_values="deferred"), _syncs_are_errors(torch):
        contracts.validate(obj)
    torch.cuda.synchronize()
    found = contracts.flush_deferred(wait=True)
    return f"{len(found)} deferred violations"


def _deferred_sentinel(torch: Any, device: str) -> str:
    from specguard.adapters.examples import STORIES

    with contracts.checking(mode="off"):  # the story's object, built unchecked on the host
        story = STORIES["vllm-26231"].build()
    moved = moved_to(story, device)  # type: ignore[arg-type]
    # At the default depth: the seed is caught out of the box, with no sync.
    with contracts.checking(depth="essential", device_values="deferred"), \
            _syncs_are_errors(torch):
        contracts.validate(moved)
    try:
        contracts.flush_deferred(wait=True)
    except contracts.DeferredViolation as violation:
        if "SG301" not in violation.codes:
            raise AssertionError(f"expected SG301, got {violation.codes}") from violation
        return str(violation.violations[0].format())
    raise AssertionError("the -1 reached no deferred verdict")


def _device_cost(torch: Any, obj: contracts.BoundaryObject, repeats: int = 200) -> str:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with contracts.checking(depth="full", device_values="deferred"):
        contracts.validate(obj)
        start.record()
        for _ in range(repeats):
            contracts.validate(obj)
        end.record()
    torch.cuda.synchronize()
    contracts.flush_deferred(wait=True)
    return f"{start.elapsed_time(end) * 1000 / repeats:.1f} µs per full validation"


def _engine(device: str, expected: Ending, **settings: Any) -> str:
    """The main job (``specguard run``) on the device: it must end as ``expected``."""
    from specguard.runner.main_job import JobSettings, run_main_job

    outcome = run_main_job(JobSettings(device=device, requests=16, **settings))
    if outcome.ending is not expected:
        raise AssertionError(f"the run ended {outcome.ending.value}, expected {expected.value}"
                             f"{f': {outcome.problem}' if outcome.problem else ''}")
    return outcome.ending.value


def main(argv: Sequence[str] | None = None) -> int:
    """Run every device check; 0 when all hold, 1 when one fails, 2 without the device."""
    parser = argparse.ArgumentParser(prog="python -m specguard.benchmarks.device_check")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args(argv)
    import torch

    if not args.device.startswith("cuda") or not torch.cuda.is_available():
        print(f"device_check: {args.device!r} is not an available CUDA device", file=sys.stderr)
        return 2
    from specguard.runner.faults import FAULTS
    from specguard.runner.main_job import Ending

    checks: list[tuple[str, Callable[[], str]]] = []
    for name, obj in objects_on(args.device).items():
        for depth in ("metadata", "essential", "full"):
            checks.append((f"{name} at {depth} depth, no host sync",
                           partial(_sync_free, torch, obj, depth)))
        checks.append((f"{name} on {args.device}", partial(_device_cost, torch, obj)))
    checks.append(("a -1 at the MTP head's embedding, read one step late",
                   partial(_deferred_sentinel, torch, args.device)))
    checks.append(("engine --verify",
                   partial(_engine, args.device, Ending.FINISHED, verify=True)))
    # A fault across ranks needs --dp 2, one GPU per rank: tests/runner runs those on CPU.
    checks.extend(
        (f"engine --fault {fault} (strict)",
         partial(_engine, args.device, Ending.VIOLATION, fault=fault))
        for fault, about in FAULTS.items() if not about.across_ranks
    )
    results = [_check(label, action) for label, action in checks]
    return 0 if all(results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
