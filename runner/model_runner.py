"""The model runner: from a ScheduledBatch to target forward, verification and drafts.

Deferred output, as ATOM does it: a step's sampled tokens and drafts stay on the device
and reach the scheduler one step later. So when step t runs, the scheduler has not seen
step t-1's results, and a decode batch mixes two kinds of seqs:

* *deferred* seqs were in step t-1's forward. Their anchor (the token sampled last) and
  drafts exist only on the device; the batch holds stale placeholders for them and an
  upper bound of their context, which the runner corrects by the rejected drafts;
* *new* seqs were not. Everything about them is on the host: the anchor in
  ``token_ids``, the drafts in the batch's draft rows.

Seqs are matched to the previous forward by id, never by position.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import numpy as np
import torch

from specguard import contracts
from specguard.runner import faults
from specguard.runner._timing import CLOCK, guarded
from specguard.runner.attention import AttentionGroup, make_group
from specguard.runner.config import EngineConfig
from specguard.runner.drafter import Drafter, drafter_input, next_token_ids
from specguard.runner.kv_cache import slot_matrix
from specguard.runner.model import TinyLM
from specguard.runner.scheduler_output import SchedulerOutput, scheduled_batch
from specguard.runner.step_output import StepResult
from specguard.runner.step_relations import PendingTrace, recording
from specguard.runner.token_bans import BanLayout, TokenBans, apply_bans
from specguard.runner.verifier import verify_greedy

__all__ = ["ModelRunner"]

_I64 = torch.int64
_count_nonzero = np.count_nonzero


_NO_ROWS = np.zeros(0, dtype=np.int64)


def _tensor(value: object) -> torch.Tensor:
    """A boundary-object field this runner filled with a tensor itself."""
    return cast(torch.Tensor, value)


@dataclass(frozen=True)
class _InFlight:
    """One forward's outputs, still on the device."""

    seq_ids: np.ndarray
    is_decode: np.ndarray
    num_drafts: np.ndarray
    sampled: torch.Tensor
    next_tokens: torch.Tensor
    num_rejected: torch.Tensor
    drafts: torch.Tensor
    num_proposed: np.ndarray
    """Drafts really proposed per row (host): ``mtp_k``, or 0 where the drafter did not
    run or the row was discarded."""
    trace: PendingTrace | None

    def to_host(self) -> StepResult:
        sampled, drafts = self.sampled.cpu().numpy(), self.drafts.cpu().numpy()
        # After the outputs, whose copy waits for the forward: the trace's copy only copies.
        trace = CLOCK.checking(self.trace.to_host, drafts) if self.trace is not None else None
        return StepResult(self.seq_ids, sampled, drafts, self.is_decode, self.num_drafts,
                          self.num_proposed, trace)


class _LogitsLayout(NamedTuple):
    """Which logits rows the sampler reads, decided on the host before the forward."""

    finals: np.ndarray
    """Batch positions of the prefill seqs that sample (one row each, after the spans)."""
    sampling: np.ndarray
    """Batch positions of every seq that samples, in logits order: decode, then finals."""
    bans: BanLayout
    """The banned-token bitmask's rows for them."""


@dataclass(frozen=True)
class _Sampled:
    """What verification and sampling produced for one forward, on the device."""

    tokens: torch.Tensor
    """``[num_seqs, width]`` greedy tokens per seq, -1 padded."""
    num_rejected: torch.Tensor
    """``[num_seqs]`` rejected drafts (0 for prefill rows)."""
    num_drafts: np.ndarray
    """``[num_seqs]`` real drafts each decode row was verified with (host)."""
    verified: contracts.VerifyOutput | None
    """The verifier's output, when the batch has decode seqs."""


@dataclass(frozen=True)
class _DecodeLayout:
    """Where the decode seqs sit: batch positions, token spans, previous-forward rows."""

    positions: np.ndarray
    token_index: torch.Tensor
    prev_rows: np.ndarray
    """Row of each decode seq in the previous forward, -1 for a new seq."""
    host_drafts: np.ndarray
    """Rows whose drafts come from the batch (the host) rather than the device."""

    @property
    def count(self) -> int:
        return int(self.positions.shape[0])


class ModelRunner:
    """Runs one step on the device; returns the previous step's outputs."""

    def __init__(self, config: EngineConfig, model: TinyLM, fault: str | None = None, *,
                 relations: bool = True) -> None:
        self.config = config
        self.relations = relations
        """Whether forwards are recorded for the step tracker (where a step rule runs)."""
        self.model = model
        self.mtp_k = config.mtp_k
        self.device = model.device
        # Whether the tracker's trace is read through numpy views (the host) rather than
        # packed for one copy (a device).
        self.host_trace = self.device.type == "cpu"
        self.fault = faults.check_name(fault)
        self.cache = model.new_cache(config.num_blocks * config.block_size)
        self.drafter = Drafter(model, config.mtp_k, self.fault)
        self.token_bans = TokenBans(model.vocab_size, config.mtp_k, self.device, self.fault)
        """The requests' banned tokens, applied to the logits before sampling and
        verification (the engine registers each request's as it arrives)."""
        self._in_flight: _InFlight | None = None
        self.padding_slot_id = -1
        """The slot padding rows write to (the cache's scratch slot, which no seq owns):
        the ``-1`` a ModelInput assumes when it names none."""
        self.pad_to: int | None = None
        """The token count every forward is padded to (a data-parallel step's agreed
        size), or None to pad decode-only batches to a captured graph's size."""
        self._slot_buffer = torch.full((max(config.max_num_batched_tokens, 1),),
                                       self.padding_slot_id, dtype=_I64, device=self.device)
        # The graph's static slot input: each forward writes its slots there, and the
        # rows past them are padding.
        self.num_forwards = 0
        """Forwards run so far: the engine step of the latest one."""
        self.deferred_rows = 0
        """Decode rows whose anchor and drafts came from the device (seen so far)."""
        self.new_rows = 0
        """Decode rows whose anchor and drafts came from the host (seen so far)."""

    # The scheduler → runner boundary: the view builds (and so validates) the batch's
    # contract object as it is received; with contracts off nothing is built.
    @guarded(scheduled=scheduled_batch)
    def execute(self, scheduled: SchedulerOutput) -> StepResult | None:
        """Run one step's batch; return step t-1's outputs (None on the first step)."""
        self.num_forwards += 1
        decode = self._decode_layout(scheduled)
        model_input = self._model_input(scheduled, decode)
        logits = self._logits_layout(scheduled, decode)
        positions = _tensor(model_input.positions)
        groups = self._attention_groups(scheduled, decode, positions)
        hidden = self.model.forward(_tensor(model_input.input_ids), positions,
                                    _tensor(model_input.slot_mapping), groups, self.cache)
        sampled = self._sample(scheduled, decode, model_input, hidden, logits)
        backup = torch.as_tensor(scheduled.backup_token_ids, dtype=_I64, device=self.device)
        next_tokens = next_token_ids(sampled.tokens, backup, self.fault)
        inputs = drafter_input(model_input=model_input, next_tokens=next_tokens,
                               num_rejected=sampled.num_rejected,
                               vocab_size=self.model.vocab_size,
                               max_seq_len=int(scheduled.context_lens.max(initial=0)))
        num_proposed = self._num_proposed(scheduled)
        if self._drafter_runs(scheduled):
            drafts = self.drafter.propose(
                inputs, hidden, torch.as_tensor(num_proposed, device=self.device))
        else:
            drafts = self.drafter.skipped(inputs)
        previous = self._in_flight
        # The previous forward's outputs first: their copy to the host is engine work in
        # every mode, and the trace's reads of this forward's tensors follow it through
        # conversion code it has just run.
        outputs = previous.to_host() if previous is not None else None
        # The step's own copies (the scheduler reuses its arrays), which the trace shares.
        seq_ids, is_decode = scheduled.seq_ids.copy(), scheduled.is_decode.copy()
        trace = (CLOCK.checking(self._trace, scheduled, decode, model_input, sampled, drafts,
                                num_proposed, seq_ids, is_decode)
                 if self.relations and recording() else None)
        self._in_flight = _InFlight(seq_ids, is_decode,
                                    sampled.num_drafts, sampled.tokens, next_tokens,
                                    sampled.num_rejected, _tensor(drafts.draft_token_ids),
                                    num_proposed, trace)
        return outputs

    def _num_proposed(self, batch: SchedulerOutput) -> np.ndarray:
        """Drafts the drafter proposes per row, decided on the host: ``mtp_k`` for a row
        with a new token, 0 for a discarded (mid-prompt) row and for a row whose drafts
        would pass the drafter's context limit (its context is the host's upper bound:
        a deferred seq's rejections only shorten it). The drafter still runs such rows,
        as vLLM's EAGLE proposer keeps rows past ``max_model_len``; their drafts are
        placeholders to be ignored."""
        drafting = batch.is_decode | batch.samples
        limit = self.config.drafter_max_model_len
        if limit is not None:
            drafting &= batch.context_lens.astype(np.int64) + self.mtp_k <= limit
        return np.where(drafting, self.mtp_k, 0)

    def _drafter_runs(self, batch: SchedulerOutput) -> bool:
        """Whether the drafter runs this step: unless no seq fits its context limit
        (vLLM's ``input_fits_in_drafter``). A step whose rows are all discarded still
        runs it, as padded speculation does."""
        limit = self.config.drafter_max_model_len
        if limit is None:
            return True
        return bool(_count_nonzero(batch.context_lens.astype(np.int64) + self.mtp_k <= limit))

    @torch.inference_mode()
    def prefill_elsewhere(self, tokens: list[int], block_table: list[int]
                          ) -> tuple[int, np.ndarray]:
        """What a prefill instance of the same model hands a decode instance (P/D): the
        prompt's KV, written into ``block_table``'s slots of this runner's cache, the
        first token (greedy) and the ``mtp_k`` drafts its MTP head proposes after it.

        It runs apart from the engine's steps, as another instance would: no boundary
        object of this engine sees the prompt, and no step tracker either.
        """
        model, device = self.model, self.device
        count = len(tokens)
        ids = torch.as_tensor(tokens, dtype=_I64, device=device)
        positions = torch.arange(count, dtype=_I64, device=device)
        table = torch.as_tensor([block_table], dtype=_I64, device=device)
        slots = slot_matrix(table, self.config.block_size, count)
        hidden = model.forward(ids, positions, slots[0], [make_group(positions[None, :],
                                                                     slots, positions)],
                               self.cache)[-1:]
        first = model.greedy(hidden)
        state = model.mtp_step_embedded(hidden, model.embed(first))
        drafts = [model.greedy(state)]
        for _ in range(1, self.mtp_k):  # its metadata advanced with each step: offset 0
            state = model.mtp_step(state, drafts[-1], torch.zeros_like(first))
            drafts.append(model.greedy(state))
        return int(first[0]), torch.cat(drafts).cpu().numpy().astype(np.int64)

    def flush(self) -> StepResult | None:
        """The last forward's outputs, when no further step will carry them."""
        previous, self._in_flight = self._in_flight, None
        return previous.to_host() if previous is not None else None

    # -- inputs ------------------------------------------------------------------------

    def _decode_layout(self, batch: SchedulerOutput) -> _DecodeLayout:
        positions = np.flatnonzero(batch.is_decode)
        counts = batch.num_scheduled_tokens.astype(np.int64)
        starts = np.cumsum(counts) - counts
        index = starts[positions][:, None] + np.arange(self.mtp_k + 1)
        prev_rows = self._previous_rows(batch.seq_ids[positions])
        host_drafts = prev_rows < 0
        if self.fault == faults.STALE_DRAFTS:
            # Every row from the scheduler's draft rows, the anchor alone from the device:
            # for a seq still in flight those drafts were proposed a step earlier.
            host_drafts = np.ones_like(host_drafts)
        return _DecodeLayout(positions, torch.as_tensor(index, device=self.device), prev_rows,
                             host_drafts)

    def _previous_rows(self, seq_ids: np.ndarray) -> np.ndarray:
        rows_of = np.full(seq_ids.shape, -1, dtype=np.int64)
        prev = self._in_flight
        if prev is None:
            return rows_of
        rows = np.arange(prev.seq_ids.shape[0])
        if self.fault == faults.SENTINEL_IN_TARGET_INPUT:
            rows = rows[prev.is_decode]  # only the seqs the verifier saw count as deferred
        if rows.size == 0:
            return rows_of
        order = np.argsort(prev.seq_ids[rows], kind="stable")
        known, rows = prev.seq_ids[rows][order], rows[order]
        found = np.searchsorted(known, seq_ids).clip(max=known.size - 1)
        hit = known[found] == seq_ids
        rows_of[hit] = rows[found[hit]]
        return rows_of

    def _model_input(self, batch: SchedulerOutput, decode: _DecodeLayout) -> contracts.ModelInput:
        device, block_size = self.device, self.config.block_size
        counts = torch.as_tensor(batch.num_scheduled_tokens, dtype=_I64, device=device)
        starts = torch.zeros(counts.shape[0] + 1, dtype=_I64, device=device)
        starts[1:] = torch.cumsum(counts, dim=0)
        input_ids = torch.as_tensor(batch.token_ids, dtype=_I64, device=device).clone()
        context = torch.as_tensor(batch.context_lens, dtype=_I64, device=device).clone()
        if decode.count:
            spans = input_ids[decode.token_index]
            self._merge_decode_rows(batch, decode, spans, context)
            input_ids[decode.token_index] = spans
        num_tokens = batch.num_tokens
        owner = torch.repeat_interleave(torch.arange(counts.shape[0], device=device), counts,
                                        output_size=num_tokens)
        offsets = torch.arange(num_tokens, device=device) - starts[:-1][owner]
        positions = (context - counts)[owner] + offsets
        tables = torch.as_tensor(batch.block_tables, dtype=_I64, device=device)
        slots = tables[owner, positions // block_size] * block_size + positions % block_size
        padded = self._padded_tokens(batch)
        if padded > num_tokens:  # padding rows: token 0 at position 0, like vLLM's
            rows = padded - num_tokens
            input_ids = torch.cat([input_ids, input_ids.new_zeros(rows)])
            positions = torch.cat([positions, positions.new_zeros(rows)])
        return CLOCK.build(
            contracts.ModelInput, vocab_size=self.model.vocab_size,
            num_slots=self.cache.num_slots, num_tokens=padded,
            seq_ids=torch.as_tensor(batch.seq_ids, dtype=_I64, device=device),
            input_ids=input_ids, positions=positions,
            slot_mapping=self._padded_slots(slots, padded), query_start_loc=starts,
            num_padding=padded - num_tokens)

    def dummy_forward(self, num_tokens: int) -> None:
        """An idle data-parallel rank's forward: ``num_tokens`` padding rows, no seq.

        It joins the step's collectives like a real forward and writes its K/V only to
        the padding slot.
        """
        device = self.device
        empty = torch.zeros(0, dtype=_I64, device=device)
        model_input = CLOCK.build(
            contracts.ModelInput, vocab_size=self.model.vocab_size,
            num_slots=self.cache.num_slots, num_tokens=num_tokens, seq_ids=empty,
            input_ids=torch.zeros(num_tokens, dtype=_I64, device=device),
            positions=torch.zeros(num_tokens, dtype=_I64, device=device),
            slot_mapping=self._padded_slots(empty, num_tokens),
            query_start_loc=torch.zeros(1, dtype=_I64, device=device),
            num_padding=num_tokens)
        self.model.forward(_tensor(model_input.input_ids), _tensor(model_input.positions),
                           _tensor(model_input.slot_mapping), [], self.cache)

    def _padded_tokens(self, batch: SchedulerOutput) -> int:
        """The forward's size: the agreed data-parallel size, or for a decode-only batch
        the smallest captured graph that holds it (1, 2, 4 or 8 decode spans, then
        multiples of 8), as CUDA-graph runners pad; mixed batches run as they are."""
        num_tokens = int(batch.num_tokens)
        if self.pad_to is not None:
            return max(self.pad_to, num_tokens)
        num_seqs = int(batch.seq_ids.shape[0])
        if num_seqs == 0 or not batch.is_decode.all():
            return num_tokens
        spans = 1 << (num_seqs - 1).bit_length() if num_seqs <= 8 else -(-num_seqs // 8) * 8
        return max(spans * (self.mtp_k + 1), num_tokens)

    def _padded_slots(self, slots: torch.Tensor, padded: int) -> torch.Tensor:
        """``slots`` written into the static slot buffer, its rows up to ``padded`` set
        to the padding slot: a copy of the first ``padded`` entries."""
        if padded > self._slot_buffer.shape[0]:
            grown = torch.full((padded,), self.padding_slot_id, dtype=_I64, device=self.device)
            grown[:self._slot_buffer.shape[0]] = self._slot_buffer
            self._slot_buffer = grown
        count = slots.shape[0]
        self._slot_buffer[:count] = slots
        if self.fault != faults.STALE_PADDING_SLOTS:
            self._slot_buffer[count:padded] = self.padding_slot_id
        return self._slot_buffer[:padded].clone()

    def _merge_decode_rows(self, batch: SchedulerOutput, decode: _DecodeLayout,
                           spans: torch.Tensor, context: torch.Tensor) -> None:
        """Anchors and drafts into the decode spans: the host's for new seqs, the
        device's for deferred ones (whose context also loses last step's rejections)."""
        new_rows = np.flatnonzero(decode.prev_rows < 0)
        self.new_rows += int(new_rows.size)
        self.deferred_rows += decode.count - int(new_rows.size)
        from_host = np.flatnonzero(decode.host_drafts)
        if from_host.size:
            host_drafts = batch.draft_token_ids[from_host]
            spans[from_host, 1:] = torch.as_tensor(host_drafts, dtype=_I64, device=self.device)
        deferred = np.flatnonzero(decode.prev_rows >= 0)
        prev = self._in_flight
        if deferred.size and prev is not None:
            rows = torch.as_tensor(decode.prev_rows[deferred], device=self.device)
            spans[deferred, 0] = prev.next_tokens[rows]
            refill = deferred[~decode.host_drafts[deferred]]
            if refill.size:
                spans[refill, 1:] = prev.drafts[torch.as_tensor(decode.prev_rows[refill],
                                                                device=self.device)]
            if self.fault != faults.SKIPPED_REJECTION_ROLLBACK:
                at = torch.as_tensor(decode.positions[deferred], device=self.device)
                context[at] -= prev.num_rejected[rows]

    def _attention_groups(self, batch: SchedulerOutput, decode: _DecodeLayout,
                          positions: torch.Tensor) -> list[AttentionGroup]:
        """All decode spans in one group; each prefill chunk in a group of its own."""
        device, block_size = self.device, self.config.block_size
        tables = torch.as_tensor(batch.block_tables, dtype=_I64, device=device)
        groups = []
        if decode.count:
            longest = int(batch.context_lens[decode.positions].max())
            rows = torch.as_tensor(decode.positions, device=device)
            keys = slot_matrix(tables[rows], block_size, longest)
            groups.append(make_group(decode.token_index, keys, positions))
        starts = np.cumsum(batch.num_scheduled_tokens, dtype=np.int64)
        for i in np.flatnonzero(~batch.is_decode):
            end = int(starts[i])
            begin = end - int(batch.num_scheduled_tokens[i])
            queries = torch.arange(begin, end, device=device)[None, :]
            keys = slot_matrix(tables[i:i + 1], block_size, int(batch.context_lens[i]))
            groups.append(make_group(queries, keys, positions))
        return groups

    # -- outputs -----------------------------------------------------------------------

    def _logits_layout(self, batch: SchedulerOutput, decode: _DecodeLayout) -> _LogitsLayout:
        """The logits rows the sampler will read, decided on the host before the forward
        (as vLLM's runner prepares its logits indices and the grammar bitmask's rows):
        each decode seq's span, then one row per prefill that samples; the rows the
        banned-token bitmask holds for each. Handed over (LogitsRows) here, before the
        forward: a layout that breaks the contract stops the step before it runs."""
        finals = np.flatnonzero(~batch.is_decode & batch.samples)
        sampling = np.concatenate([decode.positions, finals])
        bans = self.token_bans.layout(batch.seq_ids[sampling], batch.is_decode[sampling],
                                      batch.num_scheduled_tokens[sampling])
        num_logits = decode.count * (self.mtp_k + 1) + finals.shape[0]
        self._logits_rows(batch, decode, sampling, num_logits, bans)
        return _LogitsLayout(finals, sampling, bans)

    def _sample(
        self, batch: SchedulerOutput, decode: _DecodeLayout,
        model_input: contracts.ModelInput, hidden: torch.Tensor, layout: _LogitsLayout,
    ) -> _Sampled:
        """Greedy tokens per seq, ``[num_seqs, width]`` with -1 padding (vLLM's layout:
        width ``mtp_k + 1`` when any seq decodes, else 1), rejected drafts per seq, and
        the real drafts each decode row was verified with (host)."""
        device, k = self.device, self.mtp_k
        num_seqs = batch.seq_ids.shape[0]
        finals, sampling, bans = layout
        ends = np.cumsum(batch.num_scheduled_tokens, dtype=np.int64)
        rows = torch.cat([decode.token_index.reshape(-1),
                          torch.as_tensor(ends[finals] - 1, dtype=_I64, device=device)])
        logits = self.model.logits(hidden[rows])
        # Each decode seq samples its whole span (mtp_k + 1 rows), a prefill one row.
        apply_bans(logits, bans, np.where(batch.is_decode[sampling], k + 1, 1))
        tokens = logits.argmax(dim=-1)
        sampled = torch.full((num_seqs, k + 1 if decode.count else 1), contracts.PLACEHOLDER,
                             dtype=_I64, device=device)
        sampled[torch.as_tensor(finals, device=device), 0] = tokens[decode.count * (k + 1):]
        num_rejected = torch.zeros(num_seqs, dtype=_I64, device=device)
        num_drafts = np.zeros(num_seqs, dtype=np.int64)
        verified = None
        if decode.count:
            drafts_per_row = np.where(decode.host_drafts, self._host_num_drafts(batch, decode),
                                      self._device_num_drafts(decode))
            num_drafts[decode.positions] = drafts_per_row
            at = torch.as_tensor(decode.positions, device=device)
            verified = verify_greedy(
                seq_ids=_tensor(model_input.seq_ids)[at],
                draft_token_ids=_tensor(model_input.input_ids)[decode.token_index[:, 1:]],
                target_token_ids=tokens[:decode.count * (k + 1)].view(decode.count, k + 1),
                num_drafts=torch.as_tensor(drafts_per_row, device=device),
                mtp_k=k, vocab_size=self.model.vocab_size)
            sampled[at] = _tensor(verified.token_ids)
            num_rejected[at] = k - _tensor(verified.num_accepted)
        return _Sampled(sampled, num_rejected, num_drafts, verified)

    @staticmethod
    def _logits_rows(batch: SchedulerOutput, decode: _DecodeLayout, sampling: np.ndarray,
                     num_logits: int, bans: BanLayout) -> None:
        """The logits rows the verifier and the sampler read: each decode seq's span
        (one row per scheduled draft plus one), then one row per prefill that samples;
        and the rows the banned-token bitmask holds for each of them."""
        if contracts.current_config().mode is contracts.Mode.OFF:
            return
        drafts = np.zeros(sampling.shape[0], dtype=np.int64)
        drafts[:decode.count] = batch.num_scheduled_tokens[decode.positions] - 1
        CLOCK.build(contracts.LogitsRows, num_logits=num_logits, num_rows=bans.num_rows,
                    seq_ids=batch.seq_ids[sampling], num_drafts=drafts,
                    row_starts=bans.row_starts, row_counts=bans.row_counts)

    def _trace(self, batch: SchedulerOutput, decode: _DecodeLayout,
               model_input: contracts.ModelInput, sampled: _Sampled,
               drafts: contracts.DrafterOutput, num_proposed: np.ndarray,
               seq_ids: np.ndarray, is_decode: np.ndarray) -> PendingTrace:
        """What the step tracker needs of this forward, read from what it really used
        (``seq_ids`` and ``is_decode``: the step's own copies of the batch's)."""
        verified = sampled.verified
        fields: dict[str, Any] = {
            "step": self.num_forwards, "mtp_k": self.mtp_k, "seq_ids": seq_ids,
            "is_decode": is_decode,
            "num_scheduled": batch.num_scheduled_tokens.copy(),
            "num_drafts": sampled.num_drafts[decode.positions],
            "draft_placeholder": batch.draft_placeholder, "num_proposed": num_proposed,
            "drafts_handed_over": batch.drafts_handed_over,
        }
        if self.host_trace:
            # On the host the same gathers through numpy views of the step's tensors: a
            # handful of small torch operations cost more than every check of the step.
            starts = _tensor(model_input.query_start_loc).numpy()[:-1]
            token_index = decode.token_index.numpy()[:, 1:]
            # take(): the gathers of fancy indexing, through numpy's shorter path.
            host = (_tensor(model_input.positions).numpy().take(starts),
                    _tensor(model_input.input_ids).numpy().take(token_index),
                    *((_tensor(verified.seq_ids).numpy(), _tensor(verified.num_accepted).numpy())
                      if verified is not None else (_NO_ROWS, _NO_ROWS)),
                    _tensor(drafts.seq_ids).numpy())
            return PendingTrace.on_host(**fields, arrays=host)
        first = _tensor(model_input.query_start_loc)[:-1]
        carried = _tensor(model_input.input_ids)[decode.token_index[:, 1:]]
        if verified is None:
            no_rows = torch.zeros(0, dtype=_I64, device=self.device)
            verify_ids, accepted = no_rows, no_rows
        else:
            verify_ids, accepted = _tensor(verified.seq_ids), _tensor(verified.num_accepted)
        return PendingTrace.record(
            **fields, tensors=(_tensor(model_input.positions)[first], carried, verify_ids,
                               accepted, _tensor(drafts.seq_ids)))

    def _device_num_drafts(self, decode: _DecodeLayout) -> np.ndarray:
        """Real drafts in each deferred row's previous-step buffer: what the drafter
        proposed for it (placeholders past that are verified as placeholders)."""
        prev = self._in_flight
        if prev is None or self.fault == faults.UNPROPOSED_DRAFTS:
            return np.full(decode.count, self.mtp_k, dtype=np.int64)
        return np.where(decode.prev_rows >= 0, prev.num_proposed[decode.prev_rows], self.mtp_k)

    @staticmethod
    def _host_num_drafts(batch: SchedulerOutput, decode: _DecodeLayout) -> np.ndarray:
        counts = np.zeros(decode.count, dtype=np.int64)
        from_host = np.flatnonzero(decode.host_drafts)
        counts[from_host] = batch.num_drafts[from_host]
        return counts
