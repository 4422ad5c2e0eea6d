"""The reference engine's step time with contracts on against contracts off.

Four engines serve the same workload (``specguard run``'s defaults) in lockstep: one
with contracts off, one strict at metadata depth, one strict at the default depth
(essential: metadata plus the seed rules' value checks), one strict at full depth. Each
round steps every engine once, in a shuffled order, under its own settings; step ``i``
of every engine does the same work (same requests, same greedy tokens), so per-step
ratios compare like with like and machine drift cancels. The guards were decorated at
import with the mode then in force, so "off" here is the runtime switch (the guard's
wrapper stays; it skips every check).

A difference of step times is noisy at the level of a few percent; the engine also
tallies the time spent inside contract checks, which gives the overhead directly. A
whole run's step times move together by a percent or more either way (one run of the
same code read +5.0%, the next +1.9%, with 1.15% of the step inside checks in both):
where its engines' tensors happen to lie in memory, what else the host runs. The
workload is therefore served in ``passes`` runs of fresh engines (three in the bench),
each in its own shuffled order, and the per-step ratios of all of them are pooled
before the median is taken. As in ``specguard run``, the process reuses the host memory
its tensors free (``runner.host_memory``): otherwise each step faults thousands of pages
in again, a count that moves with each heap's history and with it the step times.
"""

from __future__ import annotations

import dataclasses
import importlib
import random
import statistics
from collections.abc import Callable
from typing import Any

from specguard import contracts

__all__ = ["QUICK_WORKLOAD", "engine_overhead"]

#: A smoke workload: a handful of short requests (a few steps).
QUICK_WORKLOAD = {"requests": 4, "max_prompt": 64, "max_tokens": 8}

_MODES = {
    "off": {"mode": "off"},
    "strict": {"mode": "strict", "depth": "metadata"},
    "strict_default": {"mode": "strict", "depth": "essential"},
    "strict_full": {"mode": "strict", "depth": "full"},
}


def _defaults(overrides: dict[str, int] | None) -> Any:
    """``specguard run``'s default job (on the CPU), with ``overrides``."""
    from specguard.runner.main_job import JobSettings

    changes: dict[str, Any] = dict(overrides or {})
    return dataclasses.replace(JobSettings(device="cpu"), **changes)


def _engine(options: Any) -> Any:
    from specguard.runner.engine import Engine
    from specguard.runner.main_job import engine_config, workload

    config = engine_config(options)
    engine = Engine(config)
    for request in workload(options, config):
        engine.scheduler.add(request)
    return engine


def _contract_clock() -> Any:
    """The engine's own tally of time spent in contract checks (what ``specguard run``
    reports as contract time), or None if this engine has none."""
    try:
        timing = importlib.import_module("specguard.runner._timing")
    except ImportError:
        return None
    return getattr(timing, "CLOCK", None)


def _lockstep(engines: dict[str, Any], clock: Callable[[], float], seed: int = 0
              ) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Step every engine once per round until all are done.

    Returns the seconds of every step, and each engine's seconds in contract checks.
    """
    times: dict[str, list[float]] = {name: [] for name in engines}
    checking = dict.fromkeys(engines, 0.0)
    tally = _contract_clock()
    order = list(engines)
    shuffle = random.Random(seed).shuffle
    while any(engine.scheduler.has_unfinished() for engine in engines.values()):
        shuffle(order)
        for name in order:
            engine = engines[name]
            if not engine.scheduler.has_unfinished():
                continue
            before = tally.seconds if tally is not None else 0.0
            with contracts.checking(**_MODES[name]):
                start = clock()
                engine.step()
                times[name].append(clock() - start)
            checking[name] += (tally.seconds if tally is not None else 0.0) - before
    return times, checking


def engine_overhead(workload: dict[str, int] | None, clock: Callable[[], float],
                    passes: int = 1) -> dict[str, Any]:
    """Step times of the reference engine by contract setting, or why it could not run:
    ``passes`` runs of fresh engines, their per-step ratios pooled."""
    try:
        from specguard.runner.host_memory import keep_freed_memory

        # As `specguard run` does: the engine's freed tensor memory is reused, not faulted
        # in again each step (thousands of page faults a step, their count moving with
        # each heap's history, otherwise).
        reused = keep_freed_memory()
        options = _defaults(workload)
        first = {name: _engine(options) for name in _MODES}
    except ImportError as error:
        return {"available": False, "reason": f"the reference engine is not importable: {error}"}
    times: dict[str, list[float]] = {name: [] for name in _MODES}
    checking = dict.fromkeys(_MODES, 0.0)
    ratios: dict[str, list[float]] = {name: [] for name in _MODES if name != "off"}
    per_pass: dict[str, list[float]] = {name: [] for name in ratios}
    steps = 0
    for number in range(max(passes, 1)):
        engines = first if number == 0 else {name: _engine(options) for name in _MODES}
        run, inside = _lockstep(engines, clock, seed=number)
        counts = {len(t) for t in run.values()}
        if len(counts) != 1 or not counts.pop():
            return {"available": False, "reason": "the engines did not take the same steps"}
        steps = len(run["off"])
        for name in _MODES:
            times[name] += run[name]
            checking[name] += inside[name]
        for name in ratios:
            # Step i of both engines did the same work: the median of the per-step
            # ratios is robust to the few steps a noisy neighbour happened to slow down.
            found = [a / b for a, b in zip(run[name], run["off"], strict=True)]
            ratios[name] += found
            per_pass[name].append(statistics.median(found) - 1)
    result: dict[str, Any] = {
        "available": True,
        "workload": f"{options.requests} requests, prompts {options.min_prompt}-"
                    f"{options.max_prompt}, {options.max_tokens} tokens each, "
                    f"mtp_k={options.mtp_k}",
        "steps": steps,
        "passes": max(passes, 1),
        "off_ms": statistics.fmean(times["off"]) * 1e3,
        "freed_memory_reused": reused,
    }
    for name in ratios:
        result[f"{name}_ms"] = statistics.fmean(times[name]) * 1e3
        result[f"{name}_overhead"] = statistics.median(ratios[name]) - 1
        result[f"{name}_overhead_by_pass"] = per_pass[name]
        result[f"{name}_contract_share"] = checking[name] / sum(times[name])
    return result
