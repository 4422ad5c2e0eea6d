"""The scheduler on its own, fed by a stand-in runner that accepts one draft per step."""

from __future__ import annotations

import numpy as np
import pytest
from engine_builders import SMALL, chunk_boundary, config, memory_pressure, requests_of

from specguard import contracts
from specguard.runner import faults
from specguard.runner.scheduler import Scheduler
from specguard.runner.scheduler_output import SchedulerOutput, scheduled_batch
from specguard.runner.sequence import Status
from specguard.runner.step_output import StepResult

TOKEN = 7
DRAFTS = (1, 2, 3)


class StandInRunner:
    """Returns the previous step's outputs (deferred), like the model runner does."""

    def __init__(self, mtp_k: int, accepted: int = 1) -> None:
        self.mtp_k, self.accepted = mtp_k, accepted
        self.previous: SchedulerOutput | None = None

    def step(self, scheduled: SchedulerOutput | None) -> StepResult | None:
        done, self.previous = self.previous, scheduled
        return None if done is None else self._outputs(done)

    def _outputs(self, done: SchedulerOutput) -> StepResult:
        batch, k = done, self.mtp_k
        n = batch.seq_ids.shape[0]
        tokens = np.full((n, k + 1), -1)
        tokens[batch.is_decode, :self.accepted + 1] = TOKEN
        tokens[~batch.is_decode & batch.samples, 0] = TOKEN
        drafts = np.tile(np.array(DRAFTS[:k] + (4,) * (k - 3)), (n, 1))
        num_drafts = np.where(batch.is_decode, k, 0)
        return StepResult(batch.seq_ids.copy(), tokens, drafts, batch.is_decode.copy(),
                          num_drafts)


def _drive(scheduler: Scheduler, steps: int) -> list[SchedulerOutput]:
    """Run ``steps`` schedule/deliver rounds; the batches scheduled."""
    runner, batches = StandInRunner(scheduler.mtp_k), []
    for _ in range(steps):
        scheduled = scheduler.schedule()
        scheduler.update(runner.step(scheduled))
        if scheduled is not None:
            batches.append(scheduled)
    return batches


def _scheduler(cfg=SMALL, requests=(), fault=None) -> Scheduler:
    scheduler = Scheduler(cfg, fault)
    for request in requests:
        scheduler.add(request)
    return scheduler


def test_long_prompt_is_chunked_under_the_token_budget():
    """A 150-token prompt under a 64-token budget runs as chunks of 64, 64 and 22."""
    batches = _drive(_scheduler(requests=requests_of([150])), 3)
    assert [int(b.num_tokens) for b in batches] == [64, 64, 22]
    assert [int(b.context_lens[0]) for b in batches] == [64, 128, 150]
    assert [bool(b.samples[0]) for b in batches] == [False, False, True]


def test_middle_chunk_backup_token_is_the_next_prompt_token():
    """A mid-prompt row hands the drafter the prompt token after its chunk."""
    requests = requests_of([150])
    first = _drive(_scheduler(requests=requests), 1)[0]
    assert int(first.backup_token_ids[0]) == int(requests[0].prompt[64])


def test_partial_prefill_moves_to_the_head_of_running():
    """The long prompt admitted last keeps its turn ahead of the decoding seqs."""
    cfg, requests = chunk_boundary()
    scheduler = _scheduler(cfg, requests)
    _drive(scheduler, 1)
    assert [s.seq_id for s in scheduler.running] == [3, 0, 1, 2]


def test_decode_batch_after_a_chunk_boundary():
    """Step 4: seq 3 (prefill just ended) leads three seqs that missed step 3."""
    # Every decode seq is scheduled mtp_k + 1 tokens. Seq 3's outputs are in flight, so its
    # context is an upper bound and its draft row is a placeholder (its own last token);
    # seqs 0-2 have their drafts and context on the host.
    cfg, requests = chunk_boundary()
    batch = _drive(_scheduler(cfg, requests), 4)[3]
    k = cfg.mtp_k
    assert batch.seq_ids.tolist() == [3, 0, 1, 2]
    assert batch.num_scheduled_tokens.tolist() == [k + 1] * 4
    assert batch.context_lens.tolist() == [130 + 1 + k, 21 + k, 21 + k, 21 + k]
    assert batch.num_drafts.tolist() == [0, k, k, k]
    assert batch.draft_token_ids[0].tolist() == [int(requests[3].prompt[-1])] * k
    assert batch.draft_token_ids[1:].tolist() == [list(DRAFTS)] * 3


def test_max_num_seqs_caps_the_batch():
    """No step schedules more seqs than max_num_seqs."""
    scheduler = _scheduler(config(max_num_seqs=3), requests_of([10] * 6))
    batches = _drive(scheduler, 12)
    assert max(b.seq_ids.shape[0] for b in batches) == 3


def test_preemption_takes_the_youngest_seq_and_requeues_it_first():
    """Under memory pressure the youngest seq outside the step is requeued first, none admitted."""
    cfg, requests = memory_pressure()
    scheduler = _scheduler(cfg, requests)
    runner = StandInRunner(cfg.mtp_k)
    waiting_before: list[int] = []
    scheduled = None
    while scheduler.num_preemptions == 0:
        waiting_before = [s.seq_id for s in scheduler.waiting]
        scheduled = scheduler.schedule()
        scheduler.update(runner.step(scheduled))
    assert scheduled is not None
    victim = scheduler.waiting[0]
    in_step = set(scheduled.seq_ids.tolist())
    others = [s for s in scheduler.running if s.seq_id not in in_step]
    assert all(s.arrival < victim.arrival for s in others)
    assert victim.block_table == [] and victim.status is Status.WAITING
    assert victim not in scheduler.running and victim.seq_id not in in_step
    assert not set(waiting_before) & in_step
    held = sum(len(s.block_table) for s in scheduler.running)
    assert held + scheduler.allocator.num_free == cfg.num_blocks


def test_every_request_finishes_with_exactly_max_tokens():
    """Under preemption too, every request ends with max_tokens outputs and no blocks."""
    cfg, requests = memory_pressure()
    scheduler = _scheduler(cfg, requests)
    runner = StandInRunner(cfg.mtp_k)
    for _ in range(200):
        if not scheduler.has_unfinished():
            break
        scheduler.update(runner.step(scheduler.schedule()))
    assert scheduler.num_preemptions > 0
    assert not scheduler.has_unfinished()
    assert all(len(out) == 40 for out in scheduler.outputs().values())
    assert scheduler.allocator.num_free == cfg.num_blocks


def test_seq_sure_to_finish_in_flight_is_not_scheduled_again():
    """A seq whose step in flight delivers its last token gets no further span."""
    scheduler = _scheduler(requests=requests_of([10], max_tokens=2))
    batches = _drive(scheduler, 4)
    # prefill (token 1), decode (tokens 2-3): the third step has nothing to run.
    assert len(batches) == 2
    assert not scheduler.has_unfinished()


def test_request_that_can_never_fit_is_refused():
    """A request longer than the whole KV cache is rejected when added."""
    scheduler = Scheduler(config(num_blocks=4))
    with pytest.raises(ValueError, match="may need 7 KV blocks"):
        scheduler.add(requests_of([80], max_tokens=16)[0])


def test_scheduled_batches_pass_every_rule_at_full_depth():
    """Every batch the scheduler builds passes every ScheduledBatch rule."""
    cfg, requests = memory_pressure()
    with contracts.checking(mode="strict", depth="full"):
        batches = _drive(_scheduler(cfg, requests), 30)
        for scheduled in batches:
            assert contracts.validate(scheduled_batch(scheduled)) == []


def test_compact_draft_rows_fault_drops_the_draftless_row():
    """With the ATOM fault, rows exist only for seqs with drafts (contracts off)."""
    cfg, requests = chunk_boundary()
    with contracts.checking(mode="off"):
        batch = _drive(_scheduler(cfg, requests, faults.COMPACT_DRAFT_ROWS), 4)[3]
    assert batch.num_decode == 4
    assert batch.draft_token_ids.shape == (3, cfg.mtp_k)


def test_wrong_draft_width_fault_trims_spans_near_the_limit():
    """With the trim fault a seq one token from its limit is scheduled one token."""
    with contracts.checking(mode="off"):
        batches = _drive(_scheduler(requests=requests_of([10], max_tokens=3),
                                    fault=faults.WRONG_DRAFT_WIDTH), 6)
    widths = [int(b.num_scheduled_tokens[0]) for b in batches if b.num_decode]
    assert widths[-1] < SMALL.mtp_k + 1
