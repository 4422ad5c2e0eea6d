"""Step-to-step contracts: what one step leaves behind, checked when the next one crosses.

Consecutive steps are related. A decode seq's first scheduled position advances by the
drafts it had accepted plus one, a prefill's by its chunk; the drafts a seq carries are
the ones proposed for it, and all of them; verify and drafter rows follow the batch
order; a row the runner refills from its previous-step buffers must have had a row there.
A :class:`StepTracker` keeps the minimal state to check that (O(batch) numpy arrays of the
previous step only) and feeds each relation to a rule (SG601-SG608, SG660, SG661)::

    tracker = StepTracker()
    for step in engine:
        links = tracker.schedule(batch)      # checks batch against the previous step
        ...                                  # links.prev_rows: row in the previous forward
        tracker.verified(verify_output)      # rows follow the batch, accepted <= drafts
        tracker.drafted(drafter_output)      # rows follow the batch; drafts remembered

Relations are value checks: they run whenever value rules do (the default depth and
full), each at its rule's depth, and the tracker keeps what a rule reads (the per-seq
memory, the token history) only where that rule runs. Values on an accelerator are read
only under ``device_values="sync"``; otherwise the seqs concerned are not checked.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from itertools import repeat
from typing import Any, cast

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import as_int64, host_array
from specguard.adapters._seen_seqs import SeenSeqs
from specguard.adapters._seq_memory import DEFAULT_MAX_BYTES, SeqMemory
from specguard.adapters._step_clearance import (
    fused_draft_rows,
    fused_transition,
    fused_verify_rows,
)
from specguard.adapters._step_plan import (
    UNKNOWN,
    IdLookup,
    StepLinks,
    StepPlan,
    is_integer,
    rows_in,
)
from specguard.adapters._step_rules import (
    DRAFTER,
    PROGRESS,
    RECOMPUTE,
    TRANSITION,
    VERIFY,
    DraftRows,
    RecomputedTokens,
    StepTransition,
    VerifyRows,
    runs,
)
from specguard.contracts import (
    Array,
    Bool,
    Boundary,
    BoundaryObject,
    DrafterOutput,
    Index,
    Mode,
    ScheduledBatch,
    VerifyOutput,
    boundary_object,
    current_config,
)
from specguard.contracts._core._compiled import verdict
from specguard.contracts._core._numpy_calls import count_nonzero as _count_nonzero
from specguard.contracts._core._numpy_calls import minimum_of as _minimum

__all__ = ["StepLinks", "StepPlan", "StepState", "StepTracker"]


@boundary_object(Boundary.ANY, minimums={"mtp_k": 1, "step": 0})
class StepState(BoundaryObject):
    """What one finished step leaves for the next: per seq of its forward, in batch order."""

    mtp_k: int
    """Draft tokens per decode seq in that step."""
    step: int
    """How many steps the tracker had seen before this one."""
    seq_ids: Index[Array, "num_seqs"]
    """The seqs of the forward, in batch order: row ``i`` is ``seq_ids[i]``."""
    is_decode: Bool[Array, "num_seqs"]
    """Phase of each seq in that step."""
    starts: Index[Array, "num_seqs"]
    """First scheduled position of each seq in that step."""
    advance: Index[Array, "num_seqs"]
    """Positions that stuck: the chunk of a prefill, accepted drafts + 1 of a decode; -1
    while the verifier's counts are not known."""
    drafted: Bool[Array, "num_seqs"]
    """Whether the drafter proposed drafts for the seq in that step."""
    proposals: Index[Array, "num_seqs mtp_k"]
    """The proposed drafts (meaningful where ``drafted``)."""
    num_proposed: Index[Array, "num_seqs"] | None = None
    """How many of each row's drafts the drafter really proposed (``mtp_k`` where it did
    not say); the rest of the row is placeholder."""


#: Every rule a tracker checks: it watches where one of them runs.
_EVERY_RULE = (*TRANSITION, *VERIFY, *DRAFTER, *RECOMPUTE)


class _Step:
    """The step in flight: its plan, and what the verifier and drafter said about it."""

    def __init__(self, plan: StepPlan, number: int, previous: IdLookup | None = None) -> None:
        self.plan = plan
        self.number = number
        # The previous step's sort serves again when the batch's ids are the same.
        self.lookup = IdLookup(plan.seq_ids, like=previous)
        n = plan.seq_ids.shape[0]
        # A new array either way: the step's own.
        self.advance = as_int64(np.where(plan.is_decode, UNKNOWN, plan.num_scheduled))
        # Positions a decode seq moves on besides its accepted drafts: its anchor, and
        # whatever the engine scheduled ahead of the drafts (StepPlan.num_before_drafts).
        self.before = np.ones(n, dtype=np.int64)
        if plan.num_before_drafts is not None:
            self.before[plan.is_decode.nonzero()[0]] = plan.num_before_drafts
        self.drafted = np.zeros(n, dtype=bool)
        self.proposals = np.zeros((n, plan.mtp_k), dtype=np.int64)
        self.num_proposed = np.full(n, plan.mtp_k, dtype=np.int64)

    def state(self) -> StepState:
        plan = self.plan
        return _own_state(
            mtp_k=plan.mtp_k, step=self.number, seq_ids=plan.seq_ids.astype(np.int64),
            is_decode=plan.is_decode, starts=plan.starts.astype(np.int64),
            advance=self.advance, drafted=self.drafted, proposals=self.proposals,
            num_proposed=self.num_proposed)


def _own_state(**fields: Any) -> StepState:
    """A StepState of the tracker's own making, not validated: every array is one the
    tracker derived on the host from a plan it already checked (``StepPlan.is_sound``),
    so validating it again each step would cost a step's worth of metadata checks for
    nothing."""
    state = object.__new__(StepState)
    for name, value in fields.items():
        object.__setattr__(state, name, value)
    return state


class StepTracker:
    """Carries the last step's per-seq state into the checks of the next step.

    ``progress=False`` skips SG601, for engines whose scheduler runs a step ahead of the
    verifier (vLLM's async scheduling counts scheduled drafts as computed until the
    rejections come back). ``whole_proposals=False`` skips SG607, for engines that verify
    fewer drafts than were proposed on purpose (vLLM trims a request's drafts to the token
    budget and ``max_model_len``, and structured output drops grammar-invalid ones).

    Across steps the tracker remembers, per seq, where it left off and the tokens the
    engine sampled for it, for the seqs seen most recently: at most ``memory_limit``
    seqs and ``memory_bytes`` bytes (default 64 MiB; a seq costs about 400 bytes plus 8
    per sampled token, so 1 KiB at 64 sampled tokens and 2.4 KiB at 256). A seq it has
    forgotten is one it never saw: its resume point and tokens are not checked, so the
    bound costs coverage of long-absent seqs, never a false alarm.

    It also keeps which seqs it has ever seen (a fixed 2 MiB filter that may take a new
    seq for a seen one, never the other way round), so that a seq first seen at decode
    with real drafts is caught (SG661). That needs the tracker to see every seq the
    engine runs: ``sees_every_seq=False`` says it was attached to an engine already
    serving; a first batch with decode seqs, or a :meth:`reset`, says so too.
    """

    def __init__(self, *, progress: bool = True, whole_proposals: bool = True,
                 memory_limit: int = 1 << 16, memory_bytes: int = DEFAULT_MAX_BYTES,
                 sees_every_seq: bool = True) -> None:
        self.progress = progress
        self.whole_proposals = whole_proposals
        # Whether every seq the engine runs passes through this tracker from its first
        # step: only then is a seq it has never seen new to the engine (SG661).
        self._sees_every_seq = sees_every_seq
        self._seen: SeenSeqs | None = None  # made when SG661 first runs
        self._previous: StepState | None = None
        self._previous_lookup: IdLookup | None = None  # the previous step's ids, sorted once
        self._current: _Step | None = None
        self._count = 0
        self._memory = SeqMemory(memory_limit, max_bytes=memory_bytes)
        # Seqs whose latest proposal was short of mtp_k (a skipped drafter, a seq past
        # its context limit), with its count: a seq that sits out steps keeps its drafts
        # and is held to that count when it comes back (SG660). Full proposals need no
        # entry; the oldest entries go past the bound, which only forgoes that check.
        self._short_proposals: dict[int, int] = {}
        self._short_limit = memory_limit
        self._fresh = True  # no batch forwarded yet
        # Seqs that batches the runner did not keep as its previous forward moved on
        # since the previous forward (their progress is in the memory), one array a batch.
        self._moved_since: list[np.ndarray] = []

    @property
    def remembered_bytes(self) -> int:
        """What the per-seq memory holds now, in bytes (at most the ``memory_bytes`` bound)."""
        return self._memory.nbytes

    @property
    def previous(self) -> StepState | None:
        """The finished step the next batch is checked against, once it has closed."""
        return self._previous

    @property
    def before_first_forward(self) -> bool:
        """Whether no batch has been forwarded since the tracker was made.

        The runner then has no previous forward either (ATOM's ``prev_batch`` is None):
        nothing of the batch comes from its previous-step buffers. False once a batch was
        forwarded, and after :meth:`reset`, which cannot tell.
        """
        return self._fresh

    def close(self) -> StepState | None:
        """Finish the step in flight, making it the previous one; idempotent."""
        if self._current is not None:
            self._previous = self._current.state()
            self._previous_lookup = self._current.lookup
            self._current = None
            self._note_short_proposals(self._previous)
            if self._keeps_ends():
                _remember(self._memory, self._previous)
        return self._previous

    def _note_short_proposals(self, state: StepState) -> None:
        """Remember the step's proposals short of ``mtp_k``, forget those made whole and
        those of seqs the drafter did not run for: numpy over the step, a Python loop only
        over the seqs that change an entry.

        Every drafted row counts, prefill rows included: a chunk that ends its prompt is
        drafted for, and its seq's next forward may be a decode that carries those drafts,
        however many steps later (a proposal cut short by the drafter's context limit is
        one). A chunk in the middle of its prompt is noted too; its seq's next forward is
        another chunk, whose own row replaces the entry before any decode reads it.
        """
        # The state is the tracker's own (close()): host numpy arrays.
        drafted, counts = cast(np.ndarray, state.drafted), state.num_proposed
        if counts is None:
            return
        counts = cast(np.ndarray, counts)
        short = self._short_proposals
        # The kernel's row mask is the drafted rows themselves: every one of them counts.
        if not short and verdict("no_short_proposals", drafted, counts, drafted,
                                 state.mtp_k):
            return  # no drafted row's proposal short, none short before: nothing to note
        if not short and (not counts.shape[0] or _minimum(counts, None) >= state.mtp_k):
            return  # every proposal whole, none short before: nothing to note or forget
        ids = cast(np.ndarray, state.seq_ids)
        short_rows = drafted & (counts < state.mtp_k)
        if short:
            # An entry speaks for the seq's last proposal: a whole one ends it, and so does
            # a forward the drafter did not run for (what the seq carries next is unknown).
            for seq in short.keys() & ids[~short_rows].tolist():
                del short[seq]
        if _count_nonzero(short_rows):
            for seq, count in zip(ids[short_rows].tolist(), counts[short_rows].tolist(),
                                  strict=True):
                short.pop(seq, None)  # re-inserted last: the newest entry
                short[seq] = count
            while len(short) > self._short_limit:
                del short[next(iter(short))]

    def reset(self) -> None:
        """Forget everything: the next batch is checked against nothing.

        Seqs may run unseen after a reset, so from then on only an engine's own word
        (:attr:`StepPlan.first_scheduled`) says that a seq is new (SG661).
        """
        self._sees_every_seq = False
        self._previous = self._current = None
        self._previous_lookup = None
        self._short_proposals.clear()
        self._memory.clear()
        self._moved_since.clear()
        self._fresh = False

    def links(self, seq_ids: Any) -> StepLinks:
        """Where ``seq_ids`` sat in the previous forward (closing the step in flight)."""
        ids = host_array(seq_ids)
        if ids is None or ids.ndim != 1 or not is_integer(ids.dtype):
            self.close()
            return StepLinks(np.zeros(0, dtype=np.int64))
        return self._links_of(ids)

    def _links_of(self, ids: np.ndarray) -> StepLinks:
        """:meth:`links` of host integer ids (a sound plan's): nothing to convert."""
        previous = self.close()
        if previous is None:
            return StepLinks(np.full(ids.shape[0], UNKNOWN, dtype=np.int64))
        lookup = self._previous_lookup or IdLookup(cast(np.ndarray, previous.seq_ids))
        rows, same = lookup.links(ids)
        return StepLinks(rows, same_order=same)

    def schedule(self, batch: ScheduledBatch | StepPlan, *, refilled: Any = None,
                 forwarded: bool = True, names: Sequence[str] | None = None) -> StepLinks:
        """Check ``batch`` against the previous step and make it the step in flight.

        ``refilled`` marks the decode rows (in decode order) whose drafts the runner takes
        from its previous-step buffers rather than from this batch. ``forwarded=False``
        says the runner's next step will not see this batch as its previous forward (an
        empty batch the engine never forwards, or one the runner returns from before its
        postprocess): it is checked, its prefill progress is remembered, and the previous
        step stays the one the next batch is linked to. ``names[seq_id]`` is the engine's
        own name of a seq, prefixed to its violations.
        """
        plan = batch if isinstance(batch, StepPlan) else StepPlan.of(batch)
        if current_config().mode is Mode.OFF or plan is None or not plan.is_sound():
            self.reset()
            return StepLinks(np.zeros(0, dtype=np.int64))
        related = runs(*TRANSITION)
        keeps_ends = self._keeps_ends()
        if not keeps_ends and not runs(*RECOMPUTE):
            self._memory.clear()  # progress seen where no rule reads it is not remembered
        links = self._links_of(plan.seq_ids)  # a sound plan's ids: 1-D integers
        previous = self._previous
        rows = _refilled_rows(refilled, plan)
        first_seen = self._first_seen(plan, links, checked=runs("SG661"))
        if previous is not None and related:
            remembered = _remembered(plan.seq_ids, links.prev_rows, self._moved_since)
            ends = np.full(remembered.shape[0], UNKNOWN, dtype=np.int64)
            if keeps_ends and _count_nonzero(remembered):
                ends[remembered] = self._memory.ends(
                    plan.seq_ids[remembered].astype(np.int64))
            last_short = self._last_short_proposals(plan, links)
            if not fused_transition(previous, plan, links, rows, self.progress,
                                    self.whole_proposals, remembered, ends, last_short,
                                    first_seen):
                fields = _transition(previous, plan, links, rows, self.progress,
                                     self.whole_proposals, remembered, ends,
                                     last_short=last_short, first_seen=first_seen)
                build(StepTransition, fields, state=previous, names=names)
        if runs(*RECOMPUTE):
            recomputed = _recomputed(plan, self._memory)
            if recomputed is not None:
                build(RecomputedTokens, recomputed, state=previous, names=names)
        if _count_nonzero(rows):  # the runner fills these rows completely from the previous step
            plan = dataclasses.replace(
                plan, num_drafts=np.where(rows, plan.mtp_k, plan.num_drafts))
        if not forwarded:
            prefill = ~plan.is_decode
            if _count_nonzero(prefill):  # a chunk that ran moved its seq on all the same
                self._moved_since.append(plan.seq_ids[prefill].astype(np.int64))
                if keeps_ends:
                    self._memory.advance(plan.seq_ids[prefill].astype(np.int64),
                                         plan.starts[prefill].astype(np.int64),
                                         plan.num_scheduled[prefill].astype(np.int64))
            return links
        self._current = _Step(plan, self._count, self._previous_lookup)
        self._count += 1
        self._fresh = False
        self._moved_since.clear()  # this forward is the next batch's previous one
        return links

    def watching(self) -> bool:
        """Whether one of the tracker's rules runs under the current settings (contracts
        on, from the default depth on). A view may leave a tracker that is not watching
        alone, and then :meth:`reset` it, so that it never relates a later step to one
        from before it looked away."""
        return current_config().mode is not Mode.OFF and runs(*_EVERY_RULE)

    def _keeps_ends(self) -> bool:
        """Whether the memory keeps where each seq left off: only SG601 reads that, so a
        tracker without it (``progress=False``) keeps the tokens alone, or nothing."""
        return self.progress and runs(*PROGRESS)

    def _last_short_proposals(self, plan: StepPlan, links: StepLinks) -> np.ndarray | None:
        """Per decode row, the count of its seq's last proposal where that was short of
        ``mtp_k`` and the seq is absent from the previous forward (it carries the drafts
        of the last forward it was in), else -1; None when no row has one. Only where
        ids are stable: a renumbered id would be another request's."""
        short = self._short_proposals
        if not short or not plan.stable_ids:
            return None
        decode = plan.is_decode.nonzero()[0]
        absent = (links.prev_rows.take(decode) < 0).nonzero()[0]
        if not absent.shape[0]:
            return None
        ids = plan.seq_ids.take(decode.take(absent)).tolist()
        counts = np.fromiter(map(short.get, ids, repeat(UNKNOWN)), dtype=np.int64,
                             count=len(ids))
        if not _count_nonzero(counts >= 0):
            return None
        last = np.full(decode.shape[0], UNKNOWN, dtype=np.int64)
        last[absent] = counts
        return last

    def _first_seen(self, plan: StepPlan, links: StepLinks, *, checked: bool
                    ) -> np.ndarray | None:
        """Per decode row, whether this step is certainly the first that runs its seq
        (None when not ``checked`` or not known): the engine's word where it gives one;
        else, where ids are stable and the tracker has watched from the engine's first
        step, a seq it has never seen. Records the step's seqs as seen, at every depth,
        so that a deeper check later does not take them for new."""
        decode = plan.is_decode
        if plan.first_scheduled is not None:
            return plan.first_scheduled[decode] if checked else None
        if not plan.stable_ids:
            return None
        if self._seen is None:
            self._seen = SeenSeqs()
            if self._count == 0 and self._previous is None and _count_nonzero(decode):
                # Decode seqs in the first batch ran before the tracker watched (a tracker
                # attached to a running engine, or a P/D consumer's first decode).
                self._sees_every_seq = False
        # Seqs of the previous forward were recorded with it: only the others are
        # looked up and recorded (none, step after step of a steady decode batch).
        linked = links.prev_rows.shape == decode.shape
        wanted = checked and self._sees_every_seq
        first = np.zeros(int(_count_nonzero(decode)), dtype=bool) if wanted else None
        if self._seen.record_batch(plan.seq_ids, decode, links.prev_rows if linked else None,
                                   first):
            return first
        absent = links.prev_rows < 0 if linked else np.ones(decode.shape[0], dtype=bool)
        if first is not None:  # a declined kernel wrote nothing: still all False
            rows = absent[decode].nonzero()[0]
            if rows.shape[0]:
                first[rows] = self._seen.unseen(plan.seq_ids[decode][rows])
        if _count_nonzero(absent):
            self._seen.add(plan.seq_ids[absent])
        return first

    def verified(self, out: VerifyOutput) -> None:
        """Check the verifier's rows against the step in flight; remember accepted counts
        and, where SG608 runs, the tokens each row emitted (what a recompute must re-feed)."""
        self.verify_rows(out.seq_ids, out.num_accepted)
        if runs(*RECOMPUTE):
            self.record_emitted(out.seq_ids, out.token_ids, out.num_accepted)

    def record_emitted(self, seq_ids: Any, token_ids: Any, num_accepted: Any) -> None:
        """Remember the tokens the verifier emitted for each decode seq of the step in
        flight: ``token_ids[i, :num_accepted[i] + 1]`` at the positions after its anchor."""
        step = self._current
        ids, tokens = host_array(seq_ids), host_array(token_ids)
        accepted = host_array(num_accepted)
        if step is None or ids is None or tokens is None or accepted is None \
                or not _same_rows(ids, accepted) or tokens.ndim != 2 \
                or tokens.shape[0] != ids.shape[0] or not np.issubdtype(tokens.dtype, np.integer):
            return
        if step.plan.seq_ids.shape[0] == 0:
            return  # a step without seqs emitted nothing
        positions = step.lookup.rows(ids)
        at = np.maximum(positions, 0)
        starts = step.plan.starts[at]
        # The rows that emitted tokens for a decode seq of the step, chosen in one pass.
        rows = ((positions >= 0) & step.plan.is_decode[at] & (accepted >= 0)
                & (accepted < tokens.shape[1]) & (starts >= 0)).nonzero()[0]
        self._memory.emitted_rows(ids[rows], starts[rows] + 1, tokens[rows],
                                  accepted[rows].astype(np.int64) + 1)

    def record_sampled(self, seq_ids: Any, token_ids: Any, kept: Any = None) -> None:
        """Remember the token the engine sampled for each prefill seq of the step in
        flight, at the position after its chunk (``start + num_scheduled``), where its
        next token goes. ``kept`` marks, per row, the samples the engine keeps as that
        token (ATOM: a chunk that ends the prompt; the sample of a middle chunk is
        dropped); None keeps every prefill row's. Decode rows are left to
        :meth:`record_emitted`. Where SG608 runs: with the verifier's rows,
        this makes the memory hold every token the engine sampled, so a recompute that
        re-feeds anything else at such a position (a placeholder where the prefill's
        sample belongs) is SG608.
        """
        step = self._current
        if step is None or not runs(*RECOMPUTE):
            return
        ids, tokens = host_array(seq_ids), host_array(token_ids)
        keep = host_array(kept) if kept is not None else None
        if ids is None or tokens is None or not _same_rows(ids, tokens) \
                or (kept is not None and (keep is None or keep.shape != ids.shape
                                          or keep.dtype != bool)):
            return
        plan = step.plan
        positions = step.lookup.rows(ids)
        at = np.maximum(positions, 0)
        chosen = (positions >= 0) & ~plan.is_decode[at] & (plan.starts[at] >= 0)
        if keep is not None:
            chosen &= keep
        rows = chosen.nonzero()[0]
        if rows.shape[0]:
            self._memory.emitted_rows(
                ids[rows], (plan.starts[at] + plan.num_scheduled[at])[rows],
                tokens[rows, None], np.ones(rows.shape[0], dtype=np.int64))

    def verify_rows(self, seq_ids: Any, num_accepted: Any) -> None:
        """:meth:`verified` from the arrays alone: one row per decode seq, in batch order."""
        step = self._current
        ids, accepted = host_array(seq_ids), host_array(num_accepted)
        if step is None or ids is None or accepted is None or not _same_rows(ids, accepted):
            return
        plan = step.plan
        if fused_verify_rows(plan, ids, accepted, step.before, step.advance):
            return  # checked, and the accepted counts recorded, in one pass
        decode = plan.is_decode.nonzero()[0]
        if runs(*VERIFY):
            build(VerifyRows, {
                "batch_ids": plan.seq_ids[decode], "positions": decode,
                "num_drafts": plan.num_drafts, "seq_ids": ids, "num_accepted": accepted,
            }, state=self._previous)
        self.record_accepted(ids, accepted)

    def record_accepted(self, seq_ids: Any, num_accepted: Any) -> None:
        """Remember accepted draft counts of the step in flight, matched by seq id, unchecked."""
        step = self._current
        ids, accepted = host_array(seq_ids), host_array(num_accepted)
        if step is None or ids is None or accepted is None or not _same_rows(ids, accepted):
            return
        positions = step.lookup.rows(ids)
        valid = (positions >= 0) & (accepted >= 0) & (accepted <= step.plan.mtp_k)
        valid &= step.plan.is_decode[np.maximum(positions, 0)]
        step.advance[positions[valid]] = accepted[valid] + step.before[positions[valid]]

    def drafted(self, out: DrafterOutput) -> None:
        """Check the drafter's rows against the step in flight; remember its proposals."""
        self.draft_rows(out.seq_ids, out.draft_token_ids, num_proposed=out.num_proposed)

    def draft_rows(self, seq_ids: Any, draft_token_ids: Any, *,
                   names: Sequence[str] | None = None, num_proposed: Any = None) -> None:
        """:meth:`drafted` from the arrays alone: one row per seq of the step, in order.

        ``num_proposed`` says per row how many drafts the drafter really proposed (None:
        all of them); the next step may carry no more of them as real drafts (SG660)."""
        step = self._current
        ids, drafts = host_array(seq_ids), host_array(draft_token_ids)
        if step is None or ids is None or drafts is None or not _same_rows(ids, ids):
            return
        if drafts.ndim != 2 or drafts.shape[0] != ids.shape[0]:
            return
        counts = host_array(num_proposed) if num_proposed is not None else None
        if (num_proposed is None or counts is not None) and fused_draft_rows(
                step.plan, ids, drafts, counts, step.proposals, step.drafted,
                step.num_proposed):
            return  # checked, and the proposals kept, in one pass
        if runs(*DRAFTER):
            build(DraftRows, {"batch_ids": step.plan.seq_ids, "seq_ids": ids},
                  state=self._previous, names=names)
        if drafts.shape[1] != step.plan.mtp_k or not np.issubdtype(drafts.dtype, np.integer):
            return
        positions = step.lookup.rows(ids)
        found = positions >= 0
        step.proposals[positions[found]] = drafts[found]
        step.drafted[positions[found]] = True
        if counts is not None and _same_rows(ids, counts):
            step.num_proposed[positions[found]] = counts[found]


def _remember(memory: SeqMemory, state: StepState) -> None:
    """Fold where ``state`` left each of its seqs into the per-seq memory."""
    # The state is the tracker's own (close()): int64 host arrays; the memory copies
    # what it keeps.
    memory.advance(cast(np.ndarray, state.seq_ids), cast(np.ndarray, state.starts),
                   cast(np.ndarray, state.advance))


def _remembered(seq_ids: np.ndarray, prev_rows: np.ndarray,
                moved_since: list[np.ndarray]) -> np.ndarray:
    """The seqs whose resume point the memory gives, not the previous forward: those that
    were not in it, and those that a batch the runner ran but did not keep as its previous
    forward (ATOM's middle prefill chunks) moved on since. Only these are looked up."""
    remembered = prev_rows < 0
    if moved_since:
        moved = moved_since[0] if len(moved_since) == 1 else np.concatenate(moved_since)
        remembered |= rows_in(moved, seq_ids.astype(np.int64)) >= 0
    return remembered


def _same_rows(ids: np.ndarray, values: np.ndarray) -> bool:
    return ids.ndim == 1 and values.shape == ids.shape and is_integer(values.dtype)


def _refilled_rows(refilled: Any, plan: StepPlan) -> np.ndarray:
    decode = plan.num_drafts.shape[0]
    mask = host_array(refilled) if refilled is not None else None
    if mask is None or mask.shape != (decode,) or mask.dtype != bool:
        return np.zeros(decode, dtype=bool)
    return mask


def _transition(previous: StepState, plan: StepPlan, links: StepLinks,
                refilled: np.ndarray, progress: bool, whole: bool,
                remembered: np.ndarray, ends: np.ndarray, *,
                last_short: np.ndarray | None = None,
                first_seen: np.ndarray | None = None) -> dict[str, Any]:
    """The fields of the StepTransition between ``previous`` and ``plan``: O(batch).

    A seq resumes where its last step left it: the previous forward, or, for a seq that
    was absent from it or that a batch not kept as the previous forward moved on since
    (``remembered``), the memory (``ends``; -1 when it does not know). A prefill that
    starts before that point is a recompute from a cached prefix (after a preemption): a
    legal restart, whose tokens :class:`RecomputedTokens` checks instead.
    """
    rows = links.prev_rows
    # The same seqs in the same order as the previous forward (a steady decode batch):
    # each row is its own, and the gathers below by ``rows`` are the arrays themselves.
    same = links.same_order and rows.shape[0] == previous.seq_ids.shape[0]
    # Gathers by ``take`` and selections by ``where``: a fraction of what fancy and
    # boolean indexing cost at the same sizes.
    if not progress:
        expected = np.full(rows.shape[0], UNKNOWN, dtype=np.int64)
    else:
        expected = np.where(remembered, ends, UNKNOWN).astype(np.int64, copy=False)
        if previous.seq_ids.shape[0]:
            # The state is the tracker's own, on the host: numpy arrays, never tensors.
            advance, starts = np.asarray(previous.advance), np.asarray(previous.starts)
            if same:
                known = ~remembered & (advance >= 0)
            else:
                at = np.maximum(rows, 0)
                advance, starts = advance.take(at), starts.take(at)
                known = (rows >= 0) & ~remembered & (advance >= 0)
            expected = np.where(known, starts + advance,
                                expected).astype(np.int64, copy=False)
        restart = ~plan.is_decode & (plan.starts >= 0) & (plan.starts < expected)
        expected[restart] = UNKNOWN
    decode = plan.is_decode.nonzero()[0]
    decode_rows = decode if same else rows.take(decode)
    same_width = previous.mtp_k == plan.mtp_k and previous.seq_ids.shape[0] > 0
    has_proposal = (decode_rows >= 0) & same_width
    if same_width:
        proposal_rows = decode_rows if same else np.maximum(decode_rows, 0)
        has_proposal &= np.asarray(previous.drafted).take(proposal_rows)
        proposed = np.asarray(previous.proposals).take(proposal_rows, axis=0)
        counts = previous.num_proposed
        proposed_counts = (np.asarray(counts).take(proposal_rows)
                           if counts is not None else np.full(decode.shape[0], plan.mtp_k))
    else:
        proposed = np.zeros((decode.shape[0], plan.mtp_k), dtype=np.int64)
        proposed_counts = np.full(decode.shape[0], plan.mtp_k)
    # A seq absent from the previous forward is held to its last short proposal, if any.
    elsewhere = UNKNOWN if last_short is None else last_short
    num_proposed = np.where(has_proposal, proposed_counts, elsewhere).astype(np.int64,
                                                                            copy=False)
    # A refilled row is filled whole from the runner's buffers, whatever the batch says.
    required = has_proposal & ~refilled if whole else np.zeros_like(has_proposal)
    return {
        "mtp_k": plan.mtp_k, "draft_placeholder": plan.draft_placeholder,
        "seq_ids": plan.seq_ids, "prev_rows": rows, "starts": plan.starts,
        "expected_starts": expected, "decode_positions": decode,
        "draft_token_ids": plan.draft_token_ids, "num_drafts": plan.num_drafts,
        "proposed": proposed, "has_proposal": has_proposal, "refilled": refilled,
        "expected_num_drafts": np.where(required, num_proposed, UNKNOWN).astype(
            np.int64, copy=False),
        "num_proposed": num_proposed,
        "first_seen": first_seen, "drafts_handed_over": plan.drafts_handed_over,
    }


def _recomputed(plan: StepPlan, memory: SeqMemory) -> dict[str, Any] | None:
    """The RecomputedTokens fields of the prefill seqs of ``plan`` whose chunk covers
    positions the verifier emitted tokens for; None when there is nothing to compare."""
    tokens = plan.token_ids
    if tokens is None or memory.empty():
        return None
    prefill = (~plan.is_decode).nonzero()[0]
    if prefill.shape[0] == 0:
        return None
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer):
        return None
    offsets = np.concatenate([[0], np.cumsum(plan.num_scheduled)])
    if offsets[-1] != tokens.shape[0]:
        return None  # a token stream of another length is the batch's own violation
    found = np.full(prefill.shape[0], UNKNOWN, dtype=np.int64)
    fed = np.zeros(prefill.shape[0], dtype=np.int64)
    emitted = np.zeros(prefill.shape[0], dtype=np.int64)
    for row, i in enumerate(prefill.tolist()):
        span = tokens[int(offsets[i]):int(offsets[i + 1])]
        hit = memory.first_mismatch(int(plan.seq_ids[i]), int(plan.starts[i]), span)
        if hit is not None:
            found[row], fed[row], emitted[row] = hit
    return {"seq_ids": plan.seq_ids[prefill].astype(np.int64), "positions": prefill,
            "token_positions": found, "fed": fed, "emitted": emitted}
