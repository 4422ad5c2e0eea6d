"""SGLang 0.5.23's overlap worker, read into boundary objects: :class:`SglangV2View`.

Duck typing on SGLang's names (``ScheduleBatch``, ``EagleDraftInput``,
``EagleVerifyInput``, ``GenerationBatchResult``); SGLang is not imported. One step of
``EAGLEWorkerV2.forward_batch_generation`` hands over, in order::

    view = SglangV2View(spec_steps=3, vocab_size=129280, tracker=StepTracker(),
                        carried=True)
    step = view.schedule(batch)                 # at the worker's entry, inputs resolved
    view.verify_input(step, verify_input)       # what EagleDraftWorker.draft returns
    view.verified(step, result)                 # run_eagle_verify's GenerationBatchResult
    view.drafted(step, result.next_draft_input) # after the draft extend: the next step's

An extend batch (prefill) hands over ``schedule`` and ``drafted`` only. Rows are the
batch's requests in its own order; from step to step they are matched by request id,
never by row: finished requests keep their rows until the next ``filter_batch``, a
request joins at the end (``merge_batch``), and ``retract_decode`` sorts the rows.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import holds_integers, host_array
from specguard.adapters._tracked_names import TrackedNames
from specguard.adapters.engines.sglang._rids import RequestIds, read_rids
from specguard.adapters.engines.sglang.v2._relay import Relay
from specguard.adapters.engines.sglang.v2.layout import (
    SglangForwardEntry,
    SglangV2VerifyInput,
    SglangV2VerifyResult,
)
from specguard.adapters.step_tracker import StepPlan, StepTracker
from specguard.contracts import DrafterOutput, VerifyOutput
from specguard.contracts.ops import arange_like

__all__ = ["SglangV2Step", "SglangV2View"]

@dataclass(frozen=True)
class SglangV2Step:
    """One checked worker entry, for the later hand-overs of the step."""

    rids: Sequence[str]
    """Request ids in the batch's row order (row ``i`` is ``rids[i]``)."""
    ids: np.ndarray
    """Integer ids the step trackers follow across steps, by request id."""
    extend: bool
    """Whether the batch is an extend (prefill) batch."""
    seq_lens: Any
    """``seq_lens`` as handed (committed tokens per request)."""
    bonus_tokens: Any
    """A decode batch's relayed bonus tokens (None for an extend batch)."""
    first_drafts: Any
    """A decode batch's relayed first drafts, ``topk_index[:, 0]`` (None for extend)."""
    entry: SglangForwardEntry | None = None
    """The checked entry object."""
    tracked: bool = False
    """Whether the step trackers follow this step (decided at its entry)."""


class SglangV2View:
    """Validates what crosses ``EAGLEWorkerV2``'s hand-overs; one per worker.

    ``tracker`` follows the verify rows from step to step (SG601 a request resumes at
    the previous ``new_seq_lens``, SG604-SG605 the verify rows, SG608 a re-prefill after
    a retract re-feeds the tokens it was emitted). ``carried=True`` checks what the relay
    carries into the next step (SG602: a request's bonus token and first draft at the
    next entry are the ones the previous step produced for it, by request id); the view
    keeps the relay itself (see ``_relay``), at one comparison per step. A
    ``StepTracker`` there, as earlier releases took, means the same. Both follow the
    steps where one of their rules runs (from the default depth on); below it they are
    left alone, and the first step checked after that is related to none before it.
    """

    def __init__(self, *, spec_steps: int, vocab_size: int, topk: int = 1,
                 tracker: StepTracker | None = None,
                 carried: bool | StepTracker | None = None, id_limit: int = 1 << 16) -> None:
        self.mtp_k = spec_steps
        self.vocab_size = vocab_size
        self.topk = topk
        self.num_draft_tokens = spec_steps + 1
        self.tracker = tracker
        #: The relay check (None: not checked).
        self.carried = Relay() if carried is not None and carried is not False else None
        self._ids: OrderedDict[str, int] = OrderedDict()  # request id -> tracker id, LRU
        self._names: dict[int, str] = {}
        self._next_id = 0
        self._id_limit = id_limit
        self._awaiting_rows = False  # a decode entry whose verify rows did not come
        self._idle = False  # the trackers were reset when they stopped watching
        self._last: tuple[tuple[str, ...], np.ndarray] | None = None  # the previous batch

    # - the hand-overs -

    def schedule(self, batch: Any) -> SglangV2Step:
        """Check the ``ScheduleBatch`` at ``EAGLEWorkerV2.forward_batch_generation``'s entry,
        after ``resolve_forward_inputs``: rows, the relay keys, and every id the worker
        embeds first. The draft input's stale rows are never read: only what
        ``resolve_forward_inputs`` gathered by ``future_indices``."""
        reqs = _list(batch, "reqs")
        tracking = self._tracking()
        # Followed from step to step, requests are matched by id; otherwise the ids only
        # name a violation's request, and are read if one is reported.
        rids: Sequence[str] = read_rids(reqs) if tracking else RequestIds(reqs)
        extend = _is_extend(getattr(batch, "forward_mode", None))
        spec = getattr(batch, "spec_info", None)
        seq_lens = getattr(batch, "seq_lens", None)
        fields: dict[str, Any] = {
            "vocab_size": self.vocab_size, "topk": self.topk,
            "seq_ids": _positions(seq_lens, len(rids)), "seq_lens": seq_lens,
            "req_pool_indices": getattr(batch, "req_pool_indices", None)}
        bonus = first = None
        if extend:
            ids = getattr(batch, "input_ids", None)
            lens = _ints(getattr(batch, "extend_lens", None))
            fields |= {"input_ids": ids, "extend_lens": _like(seq_lens, lens)}
        else:
            bonus = getattr(spec, "bonus_tokens", None)
            topk_index = getattr(spec, "topk_index", None)
            first = topk_index[:, 0] if topk_index is not None and _matrix(topk_index) \
                else None
            fields |= {"future_indices": getattr(spec, "future_indices", None),
                       "bonus_tokens": bonus, "topk_index": topk_index}
        entry = build(SglangForwardEntry, fields, names=rids)
        ids = self._stable_ids(tuple(rids)) if tracking else np.arange(len(rids))
        step = SglangV2Step(rids, ids, extend, seq_lens, bonus, first, entry, tracking)
        if tracking:
            self._schedule_trackers(batch, step)
        return step

    def verify_input(self, step: SglangV2Step, verify_input: Any) -> SglangV2VerifyInput:
        """Check the ``EagleVerifyInput`` ``EagleDraftWorker.draft`` returns: each row is
        the request's carried bonus token and first draft, then the chain, at the
        positions after its committed tokens, in one linear tree; every draft in the
        vocabulary."""
        bs, width = len(step.rids), self.num_draft_tokens
        tokens = _rows(getattr(verify_input, "draft_token", None), bs, width)
        checked = build(SglangV2VerifyInput, {
            "spec_steps": getattr(verify_input, "spec_steps", None),
            "topk": getattr(verify_input, "topk", None),
            "draft_token_num": getattr(verify_input, "draft_token_num", None),
            "seq_ids": _positions(step.seq_lens, bs), "seq_lens": step.seq_lens,
            "bonus_tokens": step.bonus_tokens, "first_drafts": step.first_drafts,
            "draft_token": tokens,
            "positions": _rows(getattr(verify_input, "positions", None), bs, width),
            "retrieve_index": getattr(verify_input, "retrieve_index", None),
            "retrieve_next_token": getattr(verify_input, "retrieve_next_token", None),
            "retrieve_next_sibling": getattr(verify_input, "retrieve_next_sibling", None)},
            names=step.rids)
        chain = tokens[:, 1:] if _matrix(tokens) and tokens.shape[1] == width else tokens
        build(DrafterOutput, {"mtp_k": self.mtp_k, "vocab_size": self.vocab_size,
                              "seq_ids": _positions(chain, bs), "draft_token_ids": chain},
              names=step.rids)
        if self.tracker is not None and self._awaiting_rows:
            self._awaiting_rows = False
            self._track_verify_rows(step, chain)
        return checked

    def verified(self, step: SglangV2Step, result: Any) -> SglangV2VerifyResult:
        """Check ``run_eagle_verify``'s result: ``accept_lens`` count the bonus token,
        ``accept_index`` is each row's own ``-1`` padded prefix, ``new_seq_lens`` advance
        by ``accept_lens``, and each bonus token is the row's last accepted token."""
        bs, width = len(step.rids), self.num_draft_tokens
        predict = _rows(getattr(result, "next_token_ids", None), bs, width)
        draft_input = getattr(result, "next_draft_input", None)
        lens = getattr(result, "accept_lens", None)
        checked = build(SglangV2VerifyResult, {
            "spec_steps": self.mtp_k, "draft_token_num": width,
            "seq_ids": _positions(step.seq_lens, bs),
            "seq_lens": step.seq_lens, "accept_lens": lens,
            # an idle batch's (DP attention) is flat: torch.empty(0) in eagle_sample
            "accept_index": _rows(getattr(result, "accept_index", None), bs, self.mtp_k + 1),
            "new_seq_lens": getattr(result, "new_seq_lens", None), "predict": predict,
            "bonus_tokens": getattr(draft_input, "bonus_tokens", None)},
            names=step.rids)
        if self.tracker is not None and step.tracked:
            self._track_verified(step, predict, lens)
        return checked

    def drafted(self, step: SglangV2Step, next_draft_input: Any) -> None:
        """Take the next step's draft input (``next_draft_input`` after the draft
        extend): what the relay must carry, by request id, into the next entry. After a
        prefill its bonus tokens are the target's sampled tokens."""
        if not step.tracked:
            return
        bonus = host_array(getattr(next_draft_input, "bonus_tokens", None))
        topk_index = host_array(getattr(next_draft_input, "topk_index", None))
        if bonus is None or bonus.shape != step.ids.shape:
            return  # the next entry's checks speak for a short or missing row
        if self.tracker is not None and step.extend:
            self.tracker.record_sampled(step.ids, bonus)
        if self.carried is not None and topk_index is not None and topk_index.ndim == 2 \
                and topk_index.shape[0] == bonus.shape[0] and topk_index.shape[1] >= 1 \
                and holds_integers(bonus, topk_index):
            self.carried.made(step.ids, np.stack(
                [bonus.astype(np.int64), topk_index[:, 0].astype(np.int64)], 1))

    # - the step trackers -

    def _tracking(self) -> bool:
        """Whether the trackers follow this step: where one of their rules runs. Where
        none does (contracts off, metadata depth) they are left alone, and forget what
        they knew on the way, so that a step checked later is never related to one from
        before they looked away; the request ids are then not read either."""
        trackers = [t for t in (self.tracker, self.carried) if t is not None]
        if any(t.watching() for t in trackers):
            self._idle = False
            return True
        if trackers and not self._idle:
            self._reset()
            self._awaiting_rows = False
            self._idle = True
        return False

    def _schedule_trackers(self, batch: Any, step: SglangV2Step) -> None:
        n = len(step.rids)
        names = TrackedNames(self._names)
        lens = _counts(getattr(batch, "seq_lens_cpu", None), n)
        if lens is None:
            lens = _counts(step.seq_lens, n)  # the entry's own checks speak for it
        if self.tracker is not None and self._awaiting_rows:
            self.tracker.reset()  # a decode step whose verify rows never came
        self._awaiting_rows = False
        if step.extend:
            starts = _ints(getattr(batch, "prefix_lens", None))
            counts = _ints(getattr(batch, "extend_lens", None))
            if starts is None or counts is None:
                self._reset()
                return
            tokens = host_array(getattr(batch, "input_ids", None))
            if self.tracker is not None:
                self.tracker.schedule(StepPlan(
                    self.mtp_k, step.ids, np.zeros(n, dtype=bool), starts, counts,
                    np.zeros((0, self.mtp_k), dtype=np.int64), np.zeros(0, dtype=np.int64),
                    token_ids=tokens, stable_ids=False), names=names)
            if self.carried is not None:
                self.carried.entered(step.ids, None, starts=starts, names=names)
            return
        if lens is None:
            self._reset()
            return
        self._awaiting_rows = self.tracker is not None
        self._decode_lens = lens.astype(np.int64)
        if self.carried is None:
            return
        bonus, first = host_array(step.bonus_tokens), host_array(step.first_drafts)
        if bonus is None or first is None or bonus.shape != (n,) or first.shape != (n,):
            self.carried.reset()
            return
        if not holds_integers(bonus, first):
            self.carried.reset()  # the entry's own checks speak for tokens that are not ids
            return
        self.carried.entered(
            step.ids, np.stack([bonus.astype(np.int64), first.astype(np.int64)], 1),
            starts=self._decode_lens, names=names)

    def _track_verify_rows(self, step: SglangV2Step, chain: Any) -> None:
        assert self.tracker is not None
        n = len(step.rids)
        drafts = host_array(chain)
        if drafts is None or drafts.shape != (n, self.mtp_k):
            self.tracker.reset()
            return
        self.tracker.schedule(StepPlan(
            self.mtp_k, step.ids, np.ones(n, dtype=bool), self._decode_lens,
            np.full(n, self.num_draft_tokens, dtype=np.int64), drafts.astype(np.int64),
            np.full(n, self.mtp_k, dtype=np.int64), stable_ids=False),
            names=TrackedNames(self._names))

    def _track_verified(self, step: SglangV2Step, predict: Any, lens: Any) -> None:
        assert self.tracker is not None
        tokens, accepted = host_array(predict), host_array(lens)
        n, width = len(step.rids), self.num_draft_tokens
        if tokens is None or accepted is None or tokens.shape != (n, width) \
                or accepted.shape != (n,) or not np.issubdtype(accepted.dtype, np.integer):
            return
        columns = np.arange(width)[None, :]
        rows = np.where(columns < accepted[:, None], tokens, -1)
        self.tracker.verified(build(VerifyOutput, {
            "mtp_k": self.mtp_k, "vocab_size": self.vocab_size, "seq_ids": step.ids,
            "token_ids": rows.astype(np.int64),
            "num_accepted": accepted.astype(np.int64) - 1}, names=step.rids))

    def _reset(self) -> None:
        for tracker in (self.tracker, self.carried):
            if tracker is not None:
                tracker.reset()

    def _stable_ids(self, rids: tuple[str, ...]) -> np.ndarray:
        """One integer per request id, the same while SGLang keeps the request (up to
        ``id_limit`` requests are remembered, the least recently seen forgotten first)."""
        last = self._last
        if last is not None and last[0] == rids:  # the steady state: the same batch again
            same: np.ndarray = last[1].copy()
            return same
        numbers = np.empty(len(rids), dtype=np.int64)
        for i, rid in enumerate(rids):
            number = self._ids.get(rid)
            if number is None:
                number = self._next_id
                self._next_id += 1
                self._ids[rid] = number
                self._names[number] = rid
                if len(self._ids) > self._id_limit:
                    _, old = self._ids.popitem(last=False)
                    self._names.pop(old, None)
            else:
                self._ids.move_to_end(rid)
            numbers[i] = number
        self._last = (rids, numbers.copy())
        return numbers


def _counts(value: Any, n: int) -> np.ndarray | None:
    """A host vector of ``n`` integer counts (``seq_lens``), or None: what the trackers
    may relate steps by (a float or string vector is the entry's violation, not a
    length to follow)."""
    lens = host_array(value)
    if lens is None or lens.shape != (n,) or not holds_integers(lens):
        return None
    return lens


def _is_extend(mode: Any) -> bool:
    """``ForwardMode.is_extend()`` of SGLang's mode, or its name when handed as one."""
    test = getattr(mode, "is_extend", None)
    if callable(test):
        return bool(test())
    return str(getattr(mode, "name", mode)) in ("EXTEND", "MIXED", "DRAFT_EXTEND")


def _list(obj: Any, name: str) -> list[Any]:
    value = getattr(obj, name, None)
    return list(value) if isinstance(value, list | tuple) else []


def _ints(value: Any) -> np.ndarray | None:
    """A host list of counts (``prefix_lens``, ``extend_lens``) as an array, or None."""
    if isinstance(value, np.ndarray):
        return value.astype(np.int64) if np.issubdtype(value.dtype, np.integer) else None
    if isinstance(value, list | tuple) and all(
            isinstance(v, int | np.integer) and not isinstance(v, bool) for v in value):
        return np.asarray(value, dtype=np.int64).reshape(-1)
    return None


def _positions(reference: Any, n: int) -> Any:
    """Batch positions ``0..n-1`` on the backend and device of ``reference`` (numpy when
    it is no array: the object's own checks then report it)."""
    return arange_like(reference, n) if hasattr(reference, "dtype") else np.arange(n)


def _like(reference: Any, host: np.ndarray | None) -> Any:
    """Host counts on the backend and device of ``reference``: for a device tensor a
    ``non_blocking`` copy of a few integers, which waits on no kernel."""
    torch = sys.modules.get("torch")
    if host is None or torch is None or not isinstance(reference, torch.Tensor):
        return host
    return torch.from_numpy(np.ascontiguousarray(host)).to(reference.device,
                                                            non_blocking=True)


def _matrix(value: Any) -> bool:
    return hasattr(value, "dtype") and len(getattr(value, "shape", ())) == 2


def _rows(value: Any, rows: int, width: int) -> Any:
    """A flat per-slot tensor (``draft_token``, ``positions``, ``next_token_ids``) by
    request, ``(rows, width)``; as handed when it has another size (its shape is then
    the violation)."""
    shape = getattr(value, "shape", None)
    if hasattr(value, "reshape") and shape is not None and len(shape) == 1 \
            and shape[0] == rows * width:
        return value.reshape(rows, width)
    return value
