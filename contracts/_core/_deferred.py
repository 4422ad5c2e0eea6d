"""Device-computed verdicts, copied to the host without blocking, read at a sync point.

A failed value check on an accelerator normally means ``torch._assert_async``: a
device-side assert that kills the CUDA context and surfaces at some unrelated later
call. Instead, each verdict (the index of the first offender, or -1) is computed on the
device, the verdicts of one validation are stacked and copied to pinned host memory with
``non_blocking=True``, and an event is recorded. At its next natural sync point the
engine calls :func:`flush_deferred`, which reads the finished verdicts and raises a
:class:`DeferredViolation` naming the rule, the object and the position: one step late,
but with the process still alive.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from specguard.contracts._core._config import Mode, current
from specguard.contracts._core._delivery import deliver
from specguard.contracts._core._registry import REGISTRY
from specguard.contracts._core._stats import STATS
from specguard.contracts._core._violation import Finding, Violation

__all__ = ["PendingVerdict", "flush_deferred", "pending_count", "submit"]


@dataclass(frozen=True)
class PendingVerdict:
    """One device verdict (a 0-d int64 tensor) and how to explain a failure."""

    index: Any
    rule: str
    subject: str
    explain: Callable[[int], Finding]


@dataclass
class _Batch:
    host: Any
    event: Any
    verdicts: Sequence[PendingVerdict]

    def ready(self) -> bool:
        return self.event is None or bool(self.event.query())

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()


_queue: deque[_Batch] = deque()


def submit(verdicts: Sequence[PendingVerdict]) -> None:
    """Stack the verdicts and start their copy to the host; never blocks."""
    import torch

    stacked = torch.stack([v.index for v in verdicts])
    event = None
    if stacked.is_cuda:
        host = torch.empty(stacked.shape, dtype=stacked.dtype, pin_memory=True)
        host.copy_(stacked, non_blocking=True)
        event = torch.cuda.Event()  # type: ignore[no-untyped-call]
        event.record()
    else:
        host = stacked.to("cpu")
    _queue.append(_Batch(host, event, tuple(verdicts)))
    STATS.deferred_submitted += len(verdicts)


def pending_count() -> int:
    """How many verdicts are still waiting to be read."""
    return sum(len(b.verdicts) for b in _queue)


def _violation(verdict: PendingVerdict, index: int) -> Violation:
    rule = REGISTRY[verdict.rule]
    return Violation.from_finding(
        verdict.explain(index),
        code=rule.code,
        title=rule.title,
        boundary=rule.boundary.value,
        subject=verdict.subject,
        bindings={},
    )


def flush_deferred(*, wait: bool = False) -> list[Violation]:
    """Read every finished verdict; deliver the failures (strict raises, warn logs).

    Call it where the engine already synchronises (after copying sampled tokens to the
    host). With ``wait=True`` it blocks until every pending verdict is ready, which is
    what a test or a shutdown path wants. Returns the violations found (in warn mode).
    A verdict computed while checking was on is still delivered, as in warn mode, when
    the mode is off by the time it is read.
    """
    found: list[Violation] = []
    while _queue and (wait or _queue[0].ready()):
        batch = _queue.popleft()
        batch.wait()
        indices = batch.host.tolist()
        found.extend(
            _violation(v, i) for v, i in zip(batch.verdicts, indices, strict=True) if i >= 0
        )
    if found:
        mode = Mode.STRICT if current().mode is Mode.STRICT else Mode.WARN
        deliver("deferred device check", found, mode, deferred=True)
    return found
