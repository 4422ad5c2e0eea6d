"""SGLang's EAGLE/MTP worker (release 0.5.10, the v1 ``EAGLEWorker``), read by duck typing
and checked against the contracts.

SGLang is not imported: :class:`SglangView` reads the objects the worker hands around in
one step, by SGLang's own names, and builds boundary objects from them::

    view = SglangView(spec_steps=3, vocab_size=129280, tracker=StepTracker())
    view.schedule(batch)                      # forward_batch_generation(batch), on entry
    view.draft_prefill(batch, next_token_ids) # forward_draft_extend(...), on return
    verify_input = worker.draft(batch)
    view.drafted(batch, verify_input)         # draft(batch), on return
    view.verified(batch, verify_input, verify_output, model_worker_batch)
    view.draft_extend(batch)                  # forward_draft_extend_after_decode, on return

What each hand-over checks, with SGLang's objects:

* **schedule**: a prefill (``EXTEND``) batch is what the target embeds
  (``ModelInput``: ids in the vocabulary, SG301; positions ``prefix + j``, slots inside
  the pool at full depth); a ``DECODE`` batch carries an ``EagleDraftInput`` with one row
  per request (SG640), each the request's own: its ``verified_id`` is the token the
  request was last given, by request id (SG647, the step-to-step rule);
* **drafted**: the ``EagleVerifyInput`` the draft chain became: ``bs * (steps + 1)`` rows
  in ``reqs`` order (SG641), one linear chain at consecutive positions (SG642), each
  anchored at its request's verified id and first draft (SG643), drafts in the
  vocabulary (``DrafterOutput``, SG108);
* **verified**: the ``EagleVerifyOutput``: one accept length per request within
  ``[0, steps]`` and ``sum(accepted + 1)`` verified ids (SG644), the next draft input
  holding the unfinished requests in order (SG645), the verify rows as
  ``VerifyOutput`` (SG201, SG202) and the target's verify forward as ``ModelInput``;
* **draft_prefill** / **draft_extend**: what the draft model embeds (``DrafterInput``,
  SG301, SG302), and after a verify the accepted tokens of each unfinished request at
  the positions after its prefix (SG646).

Contract seq ids are batch positions in ``batch.reqs`` order and messages name each
request's ``rid``; the step tracker follows requests by ``rid`` across steps, including
a prefill batch and a running decode batch taking turns, and a request retracted and
prefilled again (its ``req_pool_indices`` change; rows are never matched by them).
Values on an accelerator are compared there (deferred verdicts); what the view needs on
the host to relate steps (the tokens a request was given) is read only where it is on
the host already, or under ``device_values="sync"``: elsewhere those rows are unknown
and not checked.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import countOf
from typing import Any

import numpy as np

from specguard.adapters._build import build
from specguard.adapters._host import holds_integers, host_array
from specguard.adapters._tracked_names import TrackedNames
from specguard.adapters.engines.sglang._rids import Picked, RequestIds, read_rids
from specguard.adapters.engines.sglang.layout import (
    DRAFT_INPUT_PARTS,
    SglangDraftExtend,
    SglangDraftInput,
    SglangVerifyInput,
    SglangVerifyResult,
)
from specguard.adapters.step_tracker import StepPlan, StepTracker
from specguard.contracts import (
    Boundary,
    Depth,
    DrafterInput,
    DrafterOutput,
    Finding,
    ModelInput,
    VerifyOutput,
    current_config,
    report,
)
from specguard.contracts.ops import PLACEHOLDER, arange_like, is_int

__all__ = ["SglangStep", "SglangView"]

_SUBJECT = "SGLang ScheduleBatch"
#: Requests the view keeps ids and last tokens for before it forgets them all (a bound
#: on its memory when requests leave without being seen finishing).
_MAX_REQUESTS = 1 << 16
#: The slot count when the KV pool's size is not given: no slot is out of range.
_ANY_SLOT = 1 << 62


@dataclass
class SglangStep:
    """The decode step in flight, between ``drafted`` and ``draft_extend``."""

    req_ids: Sequence[str]
    """``rid`` of each request, in ``batch.reqs`` order."""
    tracker_ids: np.ndarray
    """The integer id the view follows each request by."""
    accept_length: np.ndarray | None = None
    """Accepted drafts per request, once verified."""
    unfinished: np.ndarray | None = None
    """Batch positions of the requests still running after the verify."""


class SglangView:
    """Validates what crosses SGLang's v1 EAGLE worker; one per worker (it keeps state).

    ``spec_steps`` is ``speculative_num_steps`` (drafts per request), ``vocab_size`` the
    target's vocabulary, ``topk`` ``speculative_eagle_topk`` (1 for MTP, the only shape
    the chain rules hold to). ``num_slots`` is the KV pool's slot count (slots are
    checked against it at full depth), ``max_model_len`` the context length.
    """

    def __init__(self, *, spec_steps: int, vocab_size: int, topk: int = 1,
                 num_slots: int | None = None, max_model_len: int | None = None,
                 tracker: StepTracker | None = None) -> None:
        self.mtp_k = spec_steps
        self.vocab_size = vocab_size
        self.topk = topk
        self.num_slots = num_slots
        self.max_model_len = max_model_len
        self.tracker = tracker
        self.step: SglangStep | None = None
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._next_id = 0
        self._order: tuple[str, ...] | None = None  # the last batch's rids, and their ids
        self._numbers = np.zeros(0, dtype=np.int64)
        self._last: dict[int, int] = {}  # tracker id -> the token the request was last given
        self._last_version = 0  # counts the changes of ``_last``
        self._raw: tuple[Any, ...] | None = None  # the last batch's rids as read, all str
        # The last decode entry's expected ids, for its tracker ids and ``_last_version``.
        self._expected: tuple[np.ndarray, int, np.ndarray] | None = None

    # -- the hand-overs --------------------------------------------------------------

    def schedule(self, batch: Any) -> ModelInput | SglangDraftInput | None:
        """``forward_batch_generation(batch)`` on entry: a prefill batch as the target
        embeds it, a decode batch's draft input against its requests. Returns the
        checked object (None for another forward mode: an ``IDLE`` batch has no rows)."""
        req_ids = self._req_ids(batch)
        mode = _mode(batch)
        ids = self._tracker_ids(req_ids)
        if mode == "EXTEND":
            return self._prefill(batch, req_ids, ids)
        if mode == "DECODE":
            return self._decode_entry(batch, req_ids, ids)
        return None

    def drafted(self, batch: Any, verify_input: Any) -> SglangStep:
        """``draft(batch)`` on return: the ``EagleVerifyInput`` against the batch."""
        req_ids = self._req_ids(batch)
        ids = self._tracker_ids(req_ids)
        size = len(req_ids)
        spec = getattr(batch, "spec_info", None)
        steps = _read(verify_input, "spec_steps")
        width = _read(verify_input, "draft_token_num")
        tokens = _read(verify_input, "draft_token")
        drafts = _drafts(tokens, size, width)
        # The view's own state first: a violation raised below leaves it right.
        self.step = SglangStep(req_ids, ids)
        if self.tracker is not None:
            self._plan_decode(batch, ids, drafts)
        topk_index = getattr(spec, "topk_index", None)
        firsts = topk_index[:, 0] if topk_index is not None and _rank(topk_index) == 2 \
            and topk_index.shape[1] else _like(tokens, np.zeros(0, dtype=np.int64))
        build(SglangVerifyInput, {
            "spec_steps": steps, "topk": _read(verify_input, "topk"),
            "draft_token_num": width, "seq_ids": _positions(tokens, size),
            "seq_lens": _read(batch, "seq_lens"),
            "anchors": getattr(spec, "verified_id", None), "first_drafts": firsts,
            "draft_token": tokens, "positions": _read(verify_input, "positions"),
            "retrive_index": _read(verify_input, *_RETRIEVE_INDEX),
            "retrive_next_token": _read(verify_input, *_RETRIEVE_NEXT_TOKEN),
            "retrive_next_sibling": _read(verify_input, *_RETRIEVE_NEXT_SIBLING)},
            names=req_ids)
        build(DrafterOutput, {"mtp_k": self.mtp_k, "vocab_size": self.vocab_size,
                              "seq_ids": _positions(drafts, size), "draft_token_ids": drafts},
              names=req_ids)
        return self.step

    def verified(self, batch: Any, verify_input: Any, verify_output: Any,
                 model_worker_batch: Any = None) -> SglangStep:
        """``verify(batch, spec_info)`` on return: the ``EagleVerifyOutput`` against the
        batch it verified, and the target's verify forward (``model_worker_batch``)."""
        req_ids = self._req_ids(batch)
        step = self.step if self.step is not None and self.step.req_ids == req_ids \
            else SglangStep(req_ids, self._tracker_ids(req_ids))
        self.step = step
        size = len(req_ids)
        accept = _int_vector(_read(verify_output, *_ACCEPTED_PER_REQUEST))
        finished = np.array([_finished(r) for r in _read(batch, "reqs") or ()], dtype=bool)
        verified = _read(verify_output, "verified_id")
        nxt = _read(verify_output, "draft_input")
        rows = None
        if accept is not None and isinstance(accept, np.ndarray) and accept.shape == (size,) \
                and holds_integers(accept) and finished.shape == (size,):
            # The view's own state first: a violation raised below leaves it right.
            step.accept_length = accept.astype(np.int64)
            step.unfinished = np.flatnonzero(~finished)
            verified_ids = _token_ids(verified, "verified_id", Boundary.VERIFY,
                                      "SGLang EagleVerifyOutput")
            rows = _verify_rows(verified_ids, step.accept_length, self.mtp_k)
            if rows is not None:
                ends = np.cumsum(step.accept_length + 1) - 1
                self._remember(step.tracker_ids, np.asarray(host_array(verified))[ends])
            else:
                self._forget(step.tracker_ids)
            if self._follows():
                for position in np.flatnonzero(finished).tolist():
                    self._retire(req_ids[int(position)])
        build(SglangVerifyResult, {
            "spec_steps": self.mtp_k, "seq_ids": np.arange(size), "finished": finished,
            "accept_length": accept, "num_verified": _numel(verified),
            "next_accept_length": _int_vector(_first_of(nxt, _NEXT_ACCEPTED)),
            "num_next_verified": _numel(getattr(nxt, "verified_id", None)),
            "num_next_hidden": _rows(getattr(nxt, "hidden_states", None))}, names=req_ids)
        if step.accept_length is not None:
            if rows is not None:
                build(VerifyOutput, {"mtp_k": self.mtp_k, "vocab_size": self.vocab_size,
                                     "seq_ids": np.arange(size), "token_ids": rows,
                                     "num_accepted": step.accept_length}, names=req_ids)
            if self.tracker is not None:
                self.tracker.verify_rows(step.tracker_ids, step.accept_length)
                if rows is not None and current_config().depth is Depth.FULL:
                    self.tracker.record_emitted(step.tracker_ids, rows, step.accept_length)
        if model_worker_batch is not None:
            self._verify_forward(verify_input, model_worker_batch, req_ids)
        return step

    def draft_prefill(self, batch: Any, next_token_ids: Any) -> DrafterInput:
        """``forward_draft_extend(batch, hidden_states, next_token_ids, ...)`` on return:
        the prefill's ids shifted left by one with each request's sampled token last,
        as the draft model embedded them."""
        req_ids = self._req_ids(batch)
        ids = self._tracker_ids(req_ids)
        extend = _int_vector(_read(batch, "extend_lens"))
        prefix = _int_vector(_read(batch, "prefix_lens"))
        tokens = _read(batch, "input_ids")
        starts = _starts(extend)
        drafter = build(DrafterInput, {
            "vocab_size": self.vocab_size, "num_tokens": _numel(tokens),
            "seq_ids": _positions(tokens, len(req_ids)), "input_ids": tokens,
            "positions": _span_positions(prefix, extend, tokens),
            "query_start_loc": _like(tokens, starts) if starts is not None else None,
            "sample_indices": _like(tokens, starts[1:] - 1) if starts is not None else None,
            "max_model_len": self.max_model_len}, names=req_ids)
        sampled = _token_ids(next_token_ids, "next_token_ids", Boundary.DRAFT_INPUT,
                             "SGLang forward_draft_extend")
        if sampled is not None and sampled.shape == (len(req_ids),):
            self._remember(ids, sampled)
            if self.tracker is not None:
                # A chunk that does not end its prompt samples a token SGLang drops.
                kept = np.array([not getattr(r, "is_chunked", 0)
                                 for r in getattr(batch, "reqs", ())], dtype=bool)
                self.tracker.record_sampled(ids, sampled, kept)
        else:
            self._forget(ids)
        return drafter

    def draft_extend(self, batch: Any) -> SglangDraftExtend | None:
        """``forward_draft_extend_after_decode(batch)`` on return: the unfinished
        requests' accepted tokens, their positions and the draft input left for the next
        step."""
        step = self.step
        if step is None or step.accept_length is None or step.unfinished is None:
            return None
        kept = step.unfinished
        names = Picked(step.req_ids, kept.tolist())
        spec = getattr(batch, "spec_info", None)
        accept = step.accept_length[kept]
        lens = host_array(getattr(spec, "seq_lens_for_draft_extend_cpu", None))
        ids = _read(batch, "input_ids")
        spans = accept + 1
        starts = _starts(spans)
        assert starts is not None
        # The expected positions, one per re-fed token: only as many as the batch holds
        # (accepted counts out of range are the verify result's violation, not a size).
        if lens is not None and lens.shape == accept.shape and holds_integers(lens) \
                and (spans > 0).all() and _plausible(int(starts[-1]), ids):
            owner = np.repeat(np.arange(spans.shape[0]), spans)
            local = np.arange(int(starts[-1])) - np.repeat(starts[:-1], spans)
            wanted = (lens.astype(np.int64) - spans)[owner] + local
        else:  # unknown lengths: no position is expected (the rule says what differs)
            wanted = np.full(0, -1, dtype=np.int64)
        out = build(SglangDraftExtend, {
            "num_tokens": _numel(ids), "num_accepted_tokens": int(starts[-1]),
            "seq_ids": _positions(ids, kept.shape[0]), "input_ids": ids,
            "positions": getattr(spec, "positions", None),
            "expected_positions": _like(ids, wanted), "span_ends": _like(ids, starts[1:] - 1),
            "verified_id": getattr(spec, "verified_id", None)}, names=names)
        build(DrafterInput, {
            "vocab_size": self.vocab_size, "num_tokens": _numel(ids),
            "seq_ids": _positions(ids, kept.shape[0]), "input_ids": ids,
            "positions": getattr(spec, "positions", None),
            "query_start_loc": _like(ids, starts), "sample_indices": _like(ids, starts[1:] - 1),
            "max_model_len": self.max_model_len}, names=names)
        self.step = None
        return out

    # -- what each hand-over builds --------------------------------------------------

    def _prefill(self, batch: Any, req_ids: Sequence[str], ids: np.ndarray) -> ModelInput:
        extend = _int_vector(_read(batch, "extend_lens"))
        prefix = _int_vector(_read(batch, "prefix_lens"))
        tokens = _read(batch, "input_ids")
        starts = _starts(extend)
        target = build(ModelInput, {
            "vocab_size": self.vocab_size,
            "num_slots": self.num_slots if self.num_slots is not None else _ANY_SLOT,
            "num_tokens": _numel(tokens), "seq_ids": _positions(tokens, len(req_ids)),
            "input_ids": tokens, "positions": _span_positions(prefix, extend, tokens),
            "slot_mapping": _read(batch, "out_cache_loc"),
            "query_start_loc": _like(tokens, starts) if starts is not None else None,
            "max_model_len": self.max_model_len}, names=req_ids)
        # Warn mode hands on what the contract refused: only counts the tracker can read.
        if self.tracker is None or not isinstance(extend, np.ndarray) \
                or not isinstance(prefix, np.ndarray) or extend.shape != (len(req_ids),) \
                or prefix.shape != extend.shape or not holds_integers(extend) \
                or not holds_integers(prefix):
            return target
        empty = np.zeros((0, self.mtp_k), dtype=np.int64)
        self.tracker.schedule(StepPlan(
            self.mtp_k, ids, np.zeros(len(req_ids), dtype=bool), prefix.astype(np.int64),
            extend.astype(np.int64), empty, np.zeros(0, dtype=np.int64),
            token_ids=host_array(tokens), stable_ids=False), names=TrackedNames(self._names))
        return target

    def _decode_entry(self, batch: Any, req_ids: Sequence[str],
                      ids: np.ndarray) -> SglangDraftInput | None:
        spec = getattr(batch, "spec_info", None)
        if spec is None:
            report(_SUBJECT, [("SG001", Finding(
                "a DECODE batch without spec_info", "spec_info",
                expected="an EagleDraftInput"))], boundary=Boundary.SCHEDULE.value)
            return None
        owners = (spec, spec, spec, spec, batch, batch)
        rows = {f"{name}_rows": _rows(getattr(owner, name, None))
                for owner, name in zip(owners, DRAFT_INPUT_PARTS, strict=True)}
        topk_index = getattr(spec, "topk_index", None)
        verified = getattr(spec, "verified_id", None)
        expected = self._expected_ids(ids)
        return build(SglangDraftInput, {
            "topk": self.topk,
            "topk_width": topk_index.shape[1]
            if topk_index is not None and _rank(topk_index) == 2 else -1,
            **rows, "seq_ids": _positions(verified, len(req_ids)), "verified_id": verified,
            "expected_ids": _like(verified, expected)}, names=req_ids)

    def _verify_forward(self, verify_input: Any, worker_batch: Any,
                        req_ids: Sequence[str]) -> None:
        """The target's verify forward: ``draft_token`` at ``positions`` into
        ``out_cache_loc``, ``draft_token_num`` tokens per request."""
        tokens = getattr(verify_input, "draft_token", None)
        width = getattr(verify_input, "draft_token_num", None)
        size = len(req_ids)
        # Spans of draft_token_num tokens, where that is a count they can be laid out by
        # (SG641 names any other).
        starts = np.arange(size + 1, dtype=np.int64) * int(width) \
            if is_int(width) and 0 <= int(width) <= _INT64_MAX // (size + 1) else None
        build(ModelInput, {
            "vocab_size": self.vocab_size,
            "num_slots": self.num_slots if self.num_slots is not None else _ANY_SLOT,
            "num_tokens": _numel(tokens), "seq_ids": _positions(tokens, size),
            "input_ids": tokens,
            "positions": getattr(verify_input, "positions", None),
            "slot_mapping": getattr(worker_batch, "out_cache_loc", None),
            "query_start_loc": _like(tokens, starts) if starts is not None else None,
            "max_model_len": self.max_model_len}, names=req_ids)

    def _plan_decode(self, batch: Any, ids: np.ndarray, drafts: Any) -> None:
        assert self.tracker is not None
        lens = host_array(getattr(batch, "seq_lens_cpu", None))
        if lens is None:
            lens = host_array(getattr(batch, "seq_lens", None))
        rows = host_array(drafts)
        size = ids.shape[0]
        if lens is None or rows is None or lens.shape != (size,) \
                or rows.shape != (size, self.mtp_k) or not holds_integers(lens) \
                or not holds_integers(rows):
            self.tracker.reset()
            return
        self.tracker.schedule(StepPlan(
            self.mtp_k, ids, np.ones(size, dtype=bool), lens.astype(np.int64),
            np.full(size, self.mtp_k + 1, dtype=np.int64), rows.astype(np.int64),
            np.full(size, self.mtp_k, dtype=np.int64), stable_ids=False),
            names=TrackedNames(self._names))

    # -- request ids and what the view remembers of them ------------------------------

    def _follows(self) -> bool:
        """Whether the view follows requests from step to step by id: for its tracker,
        and for SG647, which holds a request's draft row to the token it was last given.
        At metadata depth without a tracker nothing reads a request's id but the message
        of a violation, so the ids are read only for one (:class:`RequestIds`), and the
        view remembers nothing (what it knew is dropped: a deeper check later starts
        from what it sees then)."""
        return self.tracker is not None or current_config().depth is not Depth.METADATA

    def _req_ids(self, batch: Any) -> Sequence[str]:
        """``rid`` of each request of ``batch.reqs``. The same rids again (every decode
        step of a steady batch) are the last batch's tuple: one tuple comparison instead
        of checking each rid's type again."""
        reqs = _read(batch, "reqs")
        if not isinstance(reqs, list | tuple):
            return ()
        if not self._follows():
            return RequestIds(list(reqs))
        rids: tuple[Any, ...] = read_rids(reqs)
        raw = self._raw
        if raw is not None and rids == raw:
            return raw
        names = _as_names(rids)
        self._raw = names if names is rids else None
        return names

    def _expected_ids(self, ids: np.ndarray) -> np.ndarray:
        """The token each request was last given (``-1`` where none is known), by tracker
        id. Kept while neither the batch's ids nor what the view remembers change: a
        steady decode batch scheduled again reads no request one by one."""
        if not self._follows():
            return np.full(ids.shape[0], -1, dtype=np.int64)  # nothing is remembered
        cached = self._expected
        if cached is not None and cached[0] is ids and cached[1] == self._last_version:
            return cached[2]
        expected = np.fromiter(map(self._last.get, ids.tolist(), repeat(-1)),
                               dtype=np.int64, count=ids.shape[0])
        self._expected = (ids, self._last_version, expected)
        return expected

    def _tracker_ids(self, req_ids: Sequence[str]) -> np.ndarray:
        """A stable integer per ``rid``, for as long as the request runs. The same batch
        again (every decode step of a steady batch) costs one tuple comparison."""
        if not isinstance(req_ids, tuple):  # not followed (see _follows): batch positions
            self._forget_all()
            return np.arange(len(req_ids), dtype=np.int64)
        if req_ids is self._order or req_ids == self._order:
            return self._numbers
        if len(self._ids) > _MAX_REQUESTS:
            self._ids.clear()
            self._names.clear()
            self._last.clear()
            self._last_version += 1
            if self.tracker is not None:
                self.tracker.reset()
        numbers = np.fromiter(map(self._ids.get, req_ids, repeat(-1)), dtype=np.int64,
                              count=len(req_ids))
        for position in np.flatnonzero(numbers < 0).tolist():
            rid = req_ids[position]
            number = self._ids.get(rid)  # a rid listed twice gets one number
            if number is None:
                number = self._ids[rid] = self._next_id
                self._names[number] = rid
                self._next_id += 1
            numbers[position] = number
        self._order, self._numbers = req_ids, numbers
        return numbers

    def _forget_all(self) -> None:
        self._order = None
        if self._last:
            self._last.clear()
            self._last_version += 1

    def _remember(self, ids: np.ndarray, tokens: np.ndarray) -> None:
        if not self._follows():
            return
        self._last.update(zip(ids.tolist(), tokens.astype(np.int64).tolist(), strict=True))
        self._last_version += 1

    def _forget(self, ids: np.ndarray) -> None:
        for number in ids.tolist():
            self._last.pop(number, None)
        self._last_version += 1

    def _retire(self, rid: str) -> None:
        self._order = None
        number = self._ids.pop(rid, None)
        if number is not None:
            self._last.pop(number, None)
            self._names.pop(number, None)
            self._last_version += 1


def _read(obj: Any, *names: str) -> Any:
    """An SGLang field, under whichever of its release names ``obj`` has (0.5.10's
    first), or None, reported as SG001 naming every spelling, when it has none."""
    value = _first_of(obj, names, _ABSENT)
    if value is not _ABSENT:
        return value
    report(_SUBJECT, [("SG001", Finding(
        f"{type(obj).__name__} has no field {' or '.join(map(repr, names))}", names[0],
        expected=f"SGLang's {names[0]}"))], boundary=Boundary.SCHEDULE.value)
    return None


#: Fields SGLang renamed between releases of the v1 worker, 0.5.10's name first (what
#: the boundary objects and messages call them): 0.5.11 spells ``retrieve_*`` and counts
#: accepted drafts as ``num_accepted_drafts_*``. Read from the releases' own sources.
_RETRIEVE_INDEX = ("retrive_index", "retrieve_index")
_RETRIEVE_NEXT_TOKEN = ("retrive_next_token", "retrieve_next_token")
_RETRIEVE_NEXT_SIBLING = ("retrive_next_sibling", "retrieve_next_sibling")
_ACCEPTED_PER_REQUEST = ("accept_length_per_req_cpu", "num_accepted_drafts_per_req_cpu")
_NEXT_ACCEPTED = ("accept_length_cpu", "num_accepted_drafts_cpu")


def _first_of(obj: Any, names: tuple[str, ...], default: Any = None) -> Any:
    """The first of ``names`` that ``obj`` has, or ``default``."""
    for name in names:
        value = getattr(obj, name, _ABSENT)
        if value is not _ABSENT:
            return value
    return default


_ABSENT = object()


def _as_names(rids: tuple[Any, ...]) -> tuple[str, ...]:
    """``rids`` as they are when all are strings (SGLang's; one C-level pass), else each
    as ``str``."""
    return rids if countOf(map(type, rids), str) == len(rids) else tuple(map(str, rids))


def _mode(batch: Any) -> str | None:
    mode = getattr(batch, "forward_mode", None)
    name = getattr(mode, "name", None)
    return name if isinstance(name, str) else None


def _finished(req: Any) -> bool:
    finished = getattr(req, "finished", None)
    return bool(finished()) if callable(finished) else False


def _rank(value: Any) -> int:
    return len(getattr(value, "shape", ())) if hasattr(value, "shape") else -1


def _rows(value: Any) -> int:
    shape = getattr(value, "shape", None)
    return int(shape[0]) if shape is not None and len(shape) >= 1 else -1


def _numel(value: Any) -> int:
    shape = getattr(value, "shape", None)
    if shape is None:
        return -1
    return int(np.prod(tuple(shape), dtype=np.int64)) if len(shape) else 1


def _int_vector(value: Any) -> Any:
    """A Python list of counts (SGLang keeps them on the host) as an int64 vector; a
    host array as it is; anything else unchanged, for the contract to report."""
    if isinstance(value, list | tuple):
        if all(isinstance(v, int) and not isinstance(v, bool) for v in value):
            return np.array(value, dtype=np.int64).reshape(len(value))
        return value
    host = host_array(value)
    return host if host is not None else value


_INT64_MAX = 2**63 - 1


def _plausible(total: int, stream: Any) -> bool:
    """Whether ``total`` tokens laid out by the batch's counts are few enough to compute
    positions for: within a few times the tokens the batch holds. Counts far past that
    are the counts' own violation, and an array of their size could not be allocated
    (accepted counts of 2**40 asked for 16 TiB); a small mismatch is kept, so that the
    positions' length says by how much the spans miss the stream."""
    return 0 <= total <= 4 * max(_numel(stream), 1024)


def _token_ids(value: Any, name: str, boundary: Boundary, subject: str) -> np.ndarray | None:
    """``value`` as host token ids, or None: when it is not on the host, or (reported as
    SG002) when it holds something else than integers, which no object of the hand-over
    would otherwise see (only its count is checked there)."""
    host = host_array(value)
    if host is None or holds_integers(host):
        return host
    report(subject, [("SG002", Finding(
        f"{name} must hold token ids, got {host.dtype} values", name,
        expected="integer token ids", actual=str(host.dtype)))], boundary=boundary.value)
    return None


def _starts(counts: Any) -> np.ndarray | None:
    if not isinstance(counts, np.ndarray) or counts.ndim != 1 or not holds_integers(counts):
        return None
    starts = np.zeros(counts.shape[0] + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    return starts


def _span_positions(prefix: Any, extend: Any, reference: Any) -> Any:
    """``prefix + j`` for the ``j``-th token of each span (what ``ForwardBatch.init_new``
    computes for an extend), on ``reference``'s backend."""
    if not isinstance(prefix, np.ndarray) or not isinstance(extend, np.ndarray) \
            or prefix.shape != extend.shape or prefix.ndim != 1 or not holds_integers(prefix) \
            or not holds_integers(extend) or (extend < 0).any():
        return None
    total = int(extend.sum())
    if not _plausible(total, reference):
        return None  # the spans' own violation (SG304), not an allocation of their size
    owner = np.repeat(np.arange(extend.shape[0]), extend)
    local = np.arange(total) - np.repeat(_starts(extend)[:-1], extend)  # type: ignore[index]
    return _like(reference, prefix.astype(np.int64)[owner] + local)


def _drafts(tokens: Any, size: int, width: Any) -> Any:
    """``draft_token`` as ``(bs, steps)`` draft rows (each row without its head), or the
    flat tensor when it cannot be cut so (SG641 then says why)."""
    if not isinstance(width, int) or width < 2 or _rank(tokens) != 1 \
            or tokens.shape[0] != size * width:
        return np.zeros((0, 0), dtype=np.int64) if size == 0 else tokens
    return tokens.reshape(size, width)[:, 1:]


def _verify_rows(verified: np.ndarray | None, accept: np.ndarray,
                 steps: int) -> np.ndarray | None:
    """The flat ``verified_id`` as ``(bs, steps + 1)`` rows, ``-1`` padded (the
    ``VerifyOutput`` form), or None when its count is not ``sum(accepted + 1)`` or a
    count is outside ``[0, steps]`` (SG644 reports it)."""
    if verified is None or verified.ndim != 1 or not holds_integers(verified) \
            or (accept < 0).any() or (accept > steps).any():
        return None
    spans = accept + 1
    if int(spans.sum()) != verified.shape[0]:
        return None
    rows = np.full((accept.shape[0], steps + 1), PLACEHOLDER, dtype=np.int64)
    owner = np.repeat(np.arange(accept.shape[0]), spans)
    column = np.arange(verified.shape[0]) - np.repeat(_starts(spans)[:-1], spans)  # type: ignore[index]
    rows[owner, column] = verified
    return rows


def _positions(reference: Any, size: int) -> Any:
    """Batch positions ``0..size-1`` on ``reference``'s backend and device (an object's
    arrays share one), numpy when ``reference`` is not an array."""
    if hasattr(reference, "dtype") and hasattr(reference, "shape"):
        return arange_like(reference, size)
    return np.arange(size)


def _like(reference: Any, host: np.ndarray) -> Any:
    """``host`` on the backend and device of ``reference`` (a tensor's integer dtype)."""
    torch = sys.modules.get("torch")
    if torch is None or not isinstance(reference, torch.Tensor):
        return host
    return torch.from_numpy(np.ascontiguousarray(host)).to(
        reference.device, dtype=torch.int64, non_blocking=True)
