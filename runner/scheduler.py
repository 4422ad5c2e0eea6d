"""Continuous batching with chunked prefill, MTP decode spans and preemption.

Each step has a token budget and a seq limit. The running seqs are visited in order,
then waiting requests are admitted with what is left:

* Partial prefills sit at the head of ``running`` (as in ATOM), so a long prompt keeps
  its turn: it takes as much of the budget as it needs, and decode seqs behind it may
  miss the step. A seq that has just finished its prefill therefore often precedes
  decode seqs that missed the previous step.
* A decoding seq is scheduled ``mtp_k + 1`` tokens: its anchor (the last token) and
  ``mtp_k`` draft slots, whether or not its drafts have reached the host yet.
* When KV blocks run out, the youngest seq (by arrival) not yet in this step is
  preempted: its blocks are freed and it returns to the head of ``waiting``, to be
  recomputed. An older request never yields to a newer one, so the oldest always
  progresses; and no request is admitted in a step that had to preempt.

Outputs arrive one step late (deferred output): when step t is scheduled, step t-1 is
still in flight. A decoding seq's KV need is therefore an upper bound: the tokens known
on the host, plus everything the step in flight may deliver (``pending``), plus this
step's ``mtp_k`` draft slots. The runner corrects the context length with the accepted
counts it holds on the device.

A request prefilled on another instance (P/D disaggregation, ``Request.remote_prefill``)
is admitted without a prefill step: ``prefill_elsewhere`` writes its prompt's KV into
the blocks it is given and hands back the first token and that instance's drafts, and
the seq decodes from the next step on, its first draft row marked as handed over.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specguard import contracts
from specguard.runner import faults
from specguard.runner.config import EngineConfig
from specguard.runner.kv_cache import BlockAllocator, blocks_for
from specguard.runner.request_output import given_tokens
from specguard.runner.scheduler_output import SchedulerOutput
from specguard.runner.sequence import Seq, Status
from specguard.runner.step_output import StepResult
from specguard.runner.workload import Request

__all__ = ["Scheduler"]

_IDS = np.int64

#: Prefills a prompt on "another instance": given the prompt's tokens and the blocks the
#: consumer holds for them, writes their KV there; returns the first token and the
#: drafts the prefill instance's drafter proposed after it.
PrefillElsewhere = Callable[[list[int], list[int]], tuple[int, np.ndarray]]


@dataclass
class _Entry:
    """One seq's share of a step: a prefill chunk or a decode span."""

    seq: Seq
    is_decode: bool
    num_tokens: int
    context_len: int
    start: int = 0
    samples: bool = True


class Scheduler:
    """Decides each step's batch; receives each step's outputs one step late."""

    def __init__(self, config: EngineConfig, fault: str | None = None) -> None:
        self.config = config
        self.mtp_k = config.mtp_k
        self.vocab_size = config.model.vocab_size
        self.fault = faults.check_name(fault)
        self.allocator = BlockAllocator(config.num_blocks)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.seqs: dict[int, Seq] = {}
        self.num_preemptions = 0
        self.delivered_tokens = 0
        self._in_flight: list[_Entry] = []
        # Per request, by arrival: its token limit and its stop ids, which the delivery
        # reads as tables (-1 padded), for a whole forward at once.
        self._limits: list[int] = []
        self._stops: list[tuple[int, ...]] = []
        self._tables: tuple[np.ndarray, np.ndarray] | None = None
        self._received = False  # a remotely prefilled seq was admitted this round
        self.prefill_elsewhere: PrefillElsewhere | None = None
        """Where a remotely prefilled request's prompt is prefilled (the engine sets its
        runner's); None prefills every request here."""

    # -- requests ----------------------------------------------------------------------

    def check_fits(self, request: Request) -> None:
        """ValueError when the request could not fit in the KV cache even on its own."""
        longest = request.prompt_len + request.max_tokens + 2 * self.mtp_k + 1
        needed = blocks_for(longest, self.config.block_size)
        if needed > self.config.num_blocks:
            raise ValueError(f"request {request.request_id} may need {needed} KV blocks "
                             f"({longest} tokens); the cache has {self.config.num_blocks}")

    def add(self, request: Request) -> None:
        """Queue a request (ValueError if it can never fit, see :meth:`check_fits`)."""
        self.check_fits(request)
        seq = Seq.from_request(request, arrival=len(self.seqs))
        self.seqs[seq.seq_id] = seq
        self.waiting.append(seq)
        self._limits.append(request.max_tokens)
        self._stops.append(tuple(int(t) for t in request.stop_token_ids))
        self._tables = None

    def _request_tables(self) -> tuple[np.ndarray, np.ndarray]:
        """``(max_tokens [requests], stop ids [requests, most stop ids])`` by arrival,
        built once after the requests are added."""
        if self._tables is None:
            width = max((len(stops) for stops in self._stops), default=0)
            table = np.full((len(self._stops), width), -1, dtype=_IDS)
            for row, stops in enumerate(self._stops):
                table[row, :len(stops)] = stops
            self._tables = (np.array(self._limits, dtype=_IDS), table)
        return self._tables

    def has_unfinished(self) -> bool:
        """Some request still needs tokens."""
        return any(seq.status is not Status.FINISHED for seq in self.seqs.values())

    # -- scheduling --------------------------------------------------------------------

    def schedule(self) -> SchedulerOutput | None:
        """The next step's batch, or None when nothing can run until outputs arrive."""
        self._received = False
        output = self._schedule_once()
        while output is None and self._received:
            # Only remotely prefilled seqs were admitted, which take no step here: they
            # decode now, rather than leave a step with nothing to run. One that is
            # done at admission (its first token is its last) leaves nothing to run
            # again, so admit until a batch forms or nobody more is received (each
            # round takes a seq from the waiting queue: it ends).
            self._received = False
            output = self._schedule_once()
        return output

    def _schedule_once(self) -> SchedulerOutput | None:
        budget = self.config.max_num_batched_tokens
        entries: list[_Entry] = []
        preemptions = self.num_preemptions
        for seq in list(self.running):
            if len(entries) >= self.config.max_num_seqs or budget == 0:
                break
            if seq.status is not Status.RUNNING:
                continue
            entry = self._plan_running(seq, budget)
            if entry is None or not self._reserve(seq, entry.context_len, entries):
                continue
            entries.append(entry)
            budget -= entry.num_tokens
        # Under memory pressure new requests wait, or they would only be preempted again.
        admitted = self._admit(entries, budget) if self.num_preemptions == preemptions else []
        self._in_flight = entries
        if not entries:
            return None
        output = self._build(entries)
        if self.fault == faults.COMPACT_BLOCK_TABLES:
            for entry in admitted:
                self._allocate(entry.seq, entry.context_len)
        return output

    def _plan_running(self, seq: Seq, budget: int) -> _Entry | None:
        if seq.is_prefilling:
            chunk = min(seq.prefill_len - seq.num_computed, budget)
            end = seq.num_computed + chunk
            return _Entry(seq, False, chunk, end, seq.num_computed, end == seq.prefill_len)
        if seq.finishes_in_flight:
            return None
        width = self._decode_width(seq)
        if width > budget:
            return None
        # Everything the step in flight may deliver, then this step's draft slots.
        return _Entry(seq, True, width, seq.num_tokens + seq.pending + width - 1)

    def _decode_width(self, seq: Seq) -> int:
        width = self.mtp_k + 1
        if self.fault == faults.WRONG_DRAFT_WIDTH:
            # Drafts past the token limit are useless, so the buggy scheduler trims them
            # (vLLM's per-request trim) in an engine whose runner assumes mtp_k + 1.
            still_needed = seq.max_tokens - seq.num_output - (1 if seq.pending else 0)
            width = max(1, min(width, still_needed))
        return width

    def _admit(self, entries: list[_Entry], budget: int) -> list[_Entry]:
        admitted: list[_Entry] = []
        while (self.waiting and budget > 0 and len(entries) < self.config.max_num_seqs
               and self._num_running() < self.config.max_num_seqs):
            seq = self.waiting[0]
            if seq.pending:
                break  # the outputs of its last step are still in flight
            if seq.remote_prefill and self.prefill_elsewhere is not None:
                if not self._receive(seq):
                    break
                continue
            chunk = min(seq.num_tokens, budget)
            if blocks_for(chunk, self.config.block_size) > self.allocator.num_free:
                break
            self.waiting.popleft()
            seq.status, seq.prefill_len, seq.num_computed = Status.RUNNING, seq.num_tokens, 0
            seq.drafts = np.zeros(0, dtype=_IDS)
            if self.fault != faults.COMPACT_BLOCK_TABLES:
                self._allocate(seq, chunk)
            self.running.append(seq)
            entry = _Entry(seq, False, chunk, chunk, 0, chunk == seq.prefill_len)
            entries.append(entry)
            admitted.append(entry)
            budget -= chunk
        return admitted

    def _receive(self, seq: Seq) -> bool:
        """Admit a remotely prefilled seq: blocks for its prompt and first token, the
        prompt's KV written there by the prefill instance, the first token delivered and
        the drafts it handed over kept as the seq's. False when the blocks are not free."""
        prompt = seq.num_tokens
        if blocks_for(prompt + 1, self.config.block_size) > self.allocator.num_free:
            return False
        self.waiting.popleft()
        assert self.prefill_elsewhere is not None
        self._allocate(seq, prompt + 1)
        first, drafts = self.prefill_elsewhere(list(seq.token_ids), list(seq.block_table))
        seq.status, seq.prefill_len, seq.num_computed = Status.RUNNING, prompt, prompt
        seq.remote_prefill = False  # a preempted seq is recomputed here
        seq.token_ids.append(int(first))
        self.delivered_tokens += 1
        if self.fault == faults.REMOTE_DRAFTS_LOST:
            # The transfer brought the KV and the first token but not the drafts, and
            # the consumer schedules the empty draft row it keeps as mtp_k real drafts.
            seq.drafts = np.zeros(self.mtp_k, dtype=_IDS)
        else:
            seq.drafts = np.asarray(drafts, dtype=_IDS)[:self.mtp_k]
            seq.drafts_handed_over = bool(seq.drafts.size)
        self.running.append(seq)
        self._received = True
        if int(first) in self._stops[seq.arrival] or seq.num_output >= seq.max_tokens:
            self._finish(seq)
        return True

    def _num_running(self) -> int:
        return sum(1 for seq in self.running if seq.status is Status.RUNNING)

    # -- KV blocks and preemption ------------------------------------------------------

    def _reserve(self, seq: Seq, context_len: int, scheduled: list[_Entry]) -> bool:
        """Blocks for ``context_len`` tokens, preempting younger seqs that are not in
        this step; False when ``seq`` is the youngest and had to go itself."""
        needed = blocks_for(context_len, self.config.block_size) - len(seq.block_table)
        while needed > self.allocator.num_free:
            victim = self._youngest(seq, {id(e.seq) for e in scheduled})
            self._preempt(victim)
            if victim is seq:
                return False
        self._allocate(seq, context_len)
        return True

    def _youngest(self, seq: Seq, scheduled: set[int]) -> Seq:
        """The latest arrival among ``seq`` and the running seqs not scheduled yet.

        Arrival order, not queue order, decides: an older request is never preempted for
        a newer one, so the oldest always makes progress.
        """
        candidates = [s for s in self.running
                      if s.status is Status.RUNNING and id(s) not in scheduled]
        return max([*candidates, seq], key=lambda s: s.arrival)

    def _allocate(self, seq: Seq, context_len: int) -> None:
        needed = blocks_for(context_len, self.config.block_size) - len(seq.block_table)
        if needed > 0:
            seq.block_table.extend(self.allocator.allocate(needed))

    def _preempt(self, seq: Seq) -> None:
        self.allocator.free(seq.block_table)
        seq.block_table.clear()
        seq.status, seq.num_computed, seq.prefill_len = Status.WAITING, 0, 0
        seq.drafts = np.zeros(0, dtype=_IDS)
        seq.drafts_handed_over = False
        seq.num_preemptions += 1
        self.num_preemptions += 1
        if self.fault != faults.DUPLICATE_SEQ_ID:
            self.running.remove(seq)
        self.waiting.appendleft(seq)

    # -- the hand-over -----------------------------------------------------------------

    def _build(self, entries: list[_Entry]) -> SchedulerOutput:
        seqs = [e.seq for e in entries]
        is_decode = np.array([e.is_decode for e in entries], dtype=bool)
        decode = [e.seq for e in entries if e.is_decode]
        rows, num_drafts, placeholder = self._draft_rows(decode)
        handed = np.array([s.drafts_handed_over for s in decode], dtype=bool)
        for seq in decode:
            seq.drafts_handed_over = False  # only its first decode carries them
        return SchedulerOutput(
            mtp_k=self.mtp_k, vocab_size=self.vocab_size, block_size=self.config.block_size,
            seq_ids=np.array([s.seq_id for s in seqs], dtype=_IDS),
            is_decode=is_decode,
            num_scheduled_tokens=np.array([e.num_tokens for e in entries], dtype=np.int32),
            context_lens=np.array([e.context_len for e in entries], dtype=np.int32),
            block_tables=self._block_table_rows(seqs),
            token_ids=np.concatenate([self._span(e) for e in entries]).astype(_IDS),
            draft_token_ids=rows, num_drafts=num_drafts, draft_placeholder=placeholder,
            draft_seq_ids=np.array([s.seq_id for s in decode], dtype=_IDS),
            drafts_handed_over=handed if handed.any() else None,
            samples=np.array([e.samples for e in entries], dtype=bool),
            backup_token_ids=np.array([self._backup_token(e) for e in entries], dtype=_IDS))

    @staticmethod
    def _span(entry: _Entry) -> np.ndarray:
        seq = entry.seq
        if not entry.is_decode:
            return np.asarray(seq.token_ids[entry.start:entry.start + entry.num_tokens])
        # The anchor, then placeholders the runner replaces with the drafts (from the
        # draft rows for seqs whose outputs are on the host, from the device otherwise).
        return np.full(entry.num_tokens, seq.token_ids[-1])

    @staticmethod
    def _backup_token(entry: _Entry) -> int:
        seq = entry.seq
        if entry.is_decode:
            return seq.token_ids[-1]
        end = entry.start + entry.num_tokens
        return seq.token_ids[end - 1] if entry.samples else seq.token_ids[end]

    def _draft_rows(self, decode: list[Seq]) -> tuple[np.ndarray, np.ndarray, int | None]:
        """One row per decode seq in batch order; a seq without drafts yet (its prefill
        just ended, its drafts are still on the device) gets placeholder ids."""
        with_drafts = {s.seq_id: s.drafts for s in decode if s.drafts.size}
        counts = np.array([s.drafts.size for s in decode], dtype=np.int32)
        if self.fault == faults.COMPACT_DRAFT_ROWS:
            compacted = np.array(list(with_drafts.values()), dtype=_IDS)
            return compacted.reshape(len(with_drafts), self.mtp_k), counts, None
        if self.fault == faults.SENTINEL_IN_TARGET_INPUT:
            rows = np.full((len(decode), self.mtp_k), -1, dtype=_IDS)
            for row, seq in enumerate(decode):
                rows[row, :seq.drafts.size] = seq.drafts
            return rows, counts, -1
        dense = contracts.DraftTokens.from_mapping(
            np.array([s.seq_id for s in decode], dtype=_IDS), with_drafts,
            mtp_k=self.mtp_k, vocab_size=self.vocab_size,
            placeholder=np.array([s.token_ids[-1] for s in decode], dtype=_IDS), dtype=_IDS)
        return np.asarray(dense.draft_token_ids), np.asarray(dense.num_drafts), None

    def _block_table_rows(self, seqs: list[Seq]) -> np.ndarray:
        tables = [s.block_table for s in seqs]
        if self.fault == faults.COMPACT_BLOCK_TABLES:
            tables = [t for t in tables if t]
        width = max((len(t) for t in tables), default=1)
        rows = np.full((len(tables), width), -1, dtype=np.int32)
        for row, table in enumerate(tables):
            rows[row, :len(table)] = table
        return rows

    # -- outputs -----------------------------------------------------------------------

    def update(self, result: StepResult | None) -> None:
        """Deliver the outputs of the step before the last one, then record what the
        last one scheduled (prefill progress, tokens now in flight)."""
        if result is not None:
            self._deliver(result)
        for entry in self._in_flight:
            seq = entry.seq
            if seq.status is not Status.RUNNING:
                continue
            if entry.is_decode:
                seq.pending = entry.num_tokens
            else:
                seq.num_computed += entry.num_tokens
                seq.pending = 1 if entry.samples else 0
        self._in_flight = []
        # Partial prefills move to the head, keeping their order (and everyone else's).
        partial = [s for s in self.running if s.is_prefilling]
        self.running = partial + [s for s in self.running if not s.is_prefilling]

    def _deliver(self, result: StepResult) -> None:
        seqs = [self.seqs.get(seq_id) for seq_id in result.seq_ids.tolist()]
        rows = [row for row, seq in enumerate(seqs)
                if seq is not None and seq.status is not Status.FINISHED]
        if not rows:
            return
        live = [seq for seq in seqs if seq is not None and seq.status is not Status.FINISHED]
        arrivals = np.array([seq.arrival for seq in live], dtype=_IDS)
        at = np.array(rows, dtype=_IDS)
        limits, stops = self._request_tables()
        given = given_tokens(
            seq_ids=result.seq_ids[at], token_ids=result.token_ids[at],
            num_generated=np.array([seq.num_output for seq in live], dtype=_IDS),
            max_tokens=limits[arrivals], stop_token_ids=stops[arrivals],
            vocab_size=self.vocab_size, fault=self.fault)
        for seq, row, count, done in zip(live, rows, given.num_given.tolist(),
                                         given.finished.tolist(), strict=True):
            if seq.status is Status.FINISHED:
                continue  # a seq scheduled twice, finished by its first row
            seq.pending = 0
            if count == 0:
                continue  # a middle prefill chunk samples nothing
            seq.token_ids.extend(result.token_ids[row, :count].tolist())
            seq.drafts = result.draft_token_ids[row, :self._proposed(result, row)]
            self.delivered_tokens += count
            if done or seq.num_output >= seq.max_tokens:  # or a seq delivered twice
                self._finish(seq)

    def _proposed(self, result: StepResult, row: int) -> int:
        """How many of a row's drafts were proposed: the rest is placeholder."""
        if result.num_proposed is None or self.fault == faults.UNPROPOSED_DRAFTS:
            return self.mtp_k
        return int(result.num_proposed[row])

    def _finish(self, seq: Seq) -> None:
        seq.status = Status.FINISHED
        self.allocator.free(seq.block_table)
        seq.block_table.clear()
        self.running = [s for s in self.running if s is not seq]
        self.waiting = deque(s for s in self.waiting if s is not seq)

    def outputs(self) -> dict[int, np.ndarray]:
        """Generated tokens per request id."""
        return {seq_id: seq.output_tokens() for seq_id, seq in self.seqs.items()}
