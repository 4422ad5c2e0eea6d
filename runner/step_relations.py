"""Each step checked against the one before it: where seqs resume, which drafts they carry.

``specguard.adapters.StepTracker`` relates consecutive steps (rules SG601-SG607). Deferred output
keeps a step's results on the device until the next step has run, so the engine checks a
step when its outputs reach the host: the runner records a handful of small tensors next
to those outputs (each seq's first position, the drafts it verified, the row ids of the
verifier and the drafter), packed into one, and copies them with the outputs, at the
sync the step already has. A step is therefore checked while its successor runs, and
always against what the forward really did, not against what the scheduler planned.

The relations are value checks: with contracts off, or at metadata depth, nothing is
recorded and no tracker exists; at the default depth and at full they are checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from specguard import contracts
from specguard.adapters import StepPlan, StepTracker

__all__ = ["PendingTrace", "StepTrace", "check_step", "recording"]

_PACKED = ("starts", "carried", "verify_ids", "num_accepted", "drafter_ids")


def recording() -> bool:
    """Whether the current settings check step relations: contracts on, at a depth where
    one of the tracker's rules runs (from the default depth on)."""
    settings = contracts.current_config()
    if settings.mode is contracts.Mode.OFF or settings.depth is contracts.Depth.METADATA:
        return False
    return settings.depth is contracts.Depth.FULL or any(
        contracts.REGISTRY[code].depth is contracts.Depth.ESSENTIAL for code in _RULES)


#: The rules the tracker checks a forward with (SG608's recompute history needs the
#: scheduler's token stream, which the engine's trace does not record).
_RULES = ("SG601", "SG602", "SG603", "SG604", "SG605", "SG606", "SG607", "SG660", "SG661")


# The two records of a step's trace are slotted, not frozen: a frozen dataclass sets each
# field through object.__setattr__, which costs, per record of a dozen fields built once a
# step between model forwards, more than every other line of the trace's copy. Nothing
# writes to them after they are made.
@dataclass(slots=True)
class StepTrace:
    """One forward as the tracker reads it, every array on the host."""

    step: int
    """The engine step that ran the forward, counting from 1."""
    plan: StepPlan
    """Its seqs in batch order, their first positions and the drafts they were verified
    with (read from the forward's own input ids)."""
    verify_ids: np.ndarray
    """The verifier's row ids, ``[num_decode]``."""
    num_accepted: np.ndarray
    """Accepted drafts per verifier row."""
    drafter_ids: np.ndarray
    """The drafter's row ids, ``[num_seqs]``."""
    proposals: np.ndarray
    """The drafts proposed per drafter row, ``[num_seqs, mtp_k]``."""
    num_proposed: np.ndarray | None = None
    """How many of each row's drafts were really proposed."""


@dataclass(slots=True)
class PendingTrace:
    """A :class:`StepTrace` whose device part has not been copied yet."""

    step: int
    mtp_k: int
    seq_ids: np.ndarray
    is_decode: np.ndarray
    num_scheduled: np.ndarray
    num_drafts: np.ndarray
    """Real drafts each decode row was verified with, in decode order."""
    draft_placeholder: int | None
    num_proposed: np.ndarray | None
    """Drafts really proposed per drafter row (decided on the host)."""
    drafts_handed_over: np.ndarray | None
    """Per decode row: its drafts came with a seq prefilled elsewhere."""
    packed: torch.Tensor | None
    """:data:`_PACKED` flattened into one int64 tensor, so one copy brings them all
    (None when they were on the host already: see :attr:`host`)."""
    shapes: tuple[tuple[int, ...], ...]
    host: tuple[np.ndarray, ...] = ()
    """:data:`_PACKED` as host arrays, when the forward ran on the host."""

    @classmethod
    def record(cls, *, step: int, mtp_k: int, seq_ids: np.ndarray, is_decode: np.ndarray,
               num_scheduled: np.ndarray, num_drafts: np.ndarray,
               draft_placeholder: int | None,
               tensors: Sequence[torch.Tensor],
               num_proposed: np.ndarray | None = None, pack: bool | None = None,
               drafts_handed_over: np.ndarray | None = None) -> PendingTrace:
        """Pack the device tensors named by :data:`_PACKED`, in that order (no sync).

        ``pack`` (default: unless they are all on the host) packs them into one tensor,
        so that one copy brings them to the host."""
        if len(tensors) != len(_PACKED):
            raise ValueError(f"expected {len(_PACKED)} tensors: {', '.join(_PACKED)}")
        if pack is None:
            pack = any(t.device.type != "cpu" for t in tensors)
        if not pack:
            # Already on the host: nothing to copy, so nothing to pack; numpy views of
            # the int64 tensors are the trace (the tensors are the step's own, fresh).
            return cls.on_host(
                step=step, mtp_k=mtp_k, seq_ids=seq_ids, is_decode=is_decode,
                num_scheduled=num_scheduled, num_drafts=num_drafts,
                draft_placeholder=draft_placeholder, num_proposed=num_proposed,
                drafts_handed_over=drafts_handed_over,
                arrays=[t.to(torch.int64).numpy() for t in tensors])
        packed = torch.cat([t.reshape(-1).to(torch.int64) for t in tensors])
        return cls(step, mtp_k, seq_ids, is_decode, num_scheduled, num_drafts,
                   draft_placeholder, num_proposed, drafts_handed_over, packed,
                   tuple(tuple(t.shape) for t in tensors))

    @classmethod
    def on_host(cls, *, step: int, mtp_k: int, seq_ids: np.ndarray, is_decode: np.ndarray,
                num_scheduled: np.ndarray, num_drafts: np.ndarray,
                draft_placeholder: int | None, arrays: Sequence[np.ndarray],
                num_proposed: np.ndarray | None = None,
                drafts_handed_over: np.ndarray | None = None) -> PendingTrace:
        """A trace whose :data:`_PACKED` arrays were read on the host already (int64)."""
        if len(arrays) != len(_PACKED):
            raise ValueError(f"expected {len(_PACKED)} arrays: {', '.join(_PACKED)}")
        host = tuple(map(_int64, arrays))
        return cls(step, mtp_k, seq_ids, is_decode, num_scheduled, num_drafts,
                   draft_placeholder, num_proposed, drafts_handed_over, None, (), host)

    def to_host(self, proposals: np.ndarray) -> StepTrace:
        """The trace on the host; ``proposals`` is the drafter's output, already copied."""
        if self.packed is None:
            starts, carried, verify_ids, accepted, drafter_ids = self.host
        else:
            flat = self.packed.cpu().numpy()
            sizes = [int(np.prod(shape)) for shape in self.shapes]
            parts = np.split(flat, np.cumsum(sizes)[:-1])
            starts, carried, verify_ids, accepted, drafter_ids = (
                part.reshape(shape) for part, shape in zip(parts, self.shapes, strict=True))
        plan = StepPlan(self.mtp_k, self.seq_ids, self.is_decode, starts,
                        _int64(self.num_scheduled), carried, self.num_drafts,
                        self.draft_placeholder, drafts_handed_over=self.drafts_handed_over)
        return StepTrace(self.step, plan, verify_ids, accepted, drafter_ids, proposals,
                         self.num_proposed)


_INT64 = np.dtype(np.int64)


def _int64(a: np.ndarray) -> np.ndarray:
    """``a`` as an int64 array: itself when it is one already (the trace's gathers of the
    step's int64 tensors are), with no conversion call between model forwards."""
    if type(a) is np.ndarray and a.dtype is _INT64:
        return a
    return np.asarray(a).astype(np.int64, copy=False)


def check_step(tracker: StepTracker, trace: StepTrace) -> None:
    """Check one forward against the previous one the tracker saw, and remember it."""
    tracker.schedule(trace.plan)
    tracker.verify_rows(trace.verify_ids, trace.num_accepted)
    tracker.draft_rows(trace.drafter_ids, trace.proposals, num_proposed=trace.num_proposed)
