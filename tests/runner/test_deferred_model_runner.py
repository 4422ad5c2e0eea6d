"""The model runner: deferred output, deferred vs new decode rows, guarded entry."""

from __future__ import annotations

import pytest
import torch
from engine_builders import MODEL, chunk_boundary

from specguard import contracts
from specguard.runner import scheduler_output
from specguard.runner.engine import Engine


def _engine_after(steps: int) -> tuple[Engine, list[contracts.ModelInput]]:
    """The chunk-boundary engine after ``steps`` steps, with every ModelInput it built."""
    cfg, requests = chunk_boundary()
    engine = Engine(cfg, model=MODEL)
    for request in requests:
        engine.scheduler.add(request)
    seen: list[contracts.ModelInput] = []
    build = engine.runner._model_input

    def record(batch, decode):
        seen.append(build(batch, decode))
        return seen[-1]

    engine.runner._model_input = record  # type: ignore[method-assign]
    for _ in range(steps):
        engine.step()
    return engine, seen


def test_first_step_returns_nothing_later_steps_the_previous_one():
    """Outputs are deferred by one step: execute hands back step t-1's rows."""
    cfg, requests = chunk_boundary()
    engine = Engine(cfg, model=MODEL)
    for request in requests:
        engine.scheduler.add(request)
    first = engine.scheduler.schedule()
    assert first is not None and engine.runner.execute(first) is None
    engine.scheduler.update(None)
    second = engine.scheduler.schedule()
    assert second is not None
    result = engine.runner.execute(second)
    assert result is not None and result.seq_ids.tolist() == first.seq_ids.tolist()
    assert result.num_new_tokens.tolist() == [1, 1, 1, 0]  # seq 3 is mid-prompt
    flushed = engine.runner.flush()
    assert flushed is not None and flushed.seq_ids.tolist() == second.seq_ids.tolist()
    assert engine.runner.flush() is None


def test_decode_batch_mixes_deferred_and_new_rows():
    """Step 4 serves seq 3 from the device and seqs 0-2 from the host."""
    engine, _ = _engine_after(4)
    assert (engine.runner.deferred_rows, engine.runner.new_rows) == (1, 3)


def test_positions_follow_the_real_context_of_each_kind_of_row():
    """A new seq's anchor is its last known token; a deferred one's follows its accepted drafts."""
    engine, seen = _engine_after(5)
    k = engine.config.mtp_k
    assert isinstance(seen[3].positions, torch.Tensor)
    assert isinstance(seen[4].positions, torch.Tensor)
    step4 = seen[3].positions.view(-1, k + 1)
    assert step4[:, 0].tolist() == [130, 20, 20, 20]
    seq3 = engine.scheduler.seqs[3]
    accepted_in_step4 = seq3.num_output - 1 - 1  # minus the prefill token and correction
    step5 = seen[4].positions.view(-1, k + 1)
    order = seen[4].seq_ids.tolist()
    assert step5[order.index(3), 0].item() == 130 + accepted_in_step4 + 1


def test_runner_entry_rejects_something_that_is_not_a_batch():
    """The guarded entry point turns a malformed hand-over into a violation, not a crash."""
    cfg, _ = chunk_boundary()
    engine = Engine(cfg, model=MODEL)
    with contracts.checking(mode="strict"), \
            pytest.raises(contracts.ContractViolation) as caught:
        engine.runner.execute({"seq_ids": [1]})  # pyright: ignore[reportArgumentType]
    assert caught.value.codes == ("SG001",)
    assert "ScheduledBatch.mtp_k" in str(caught.value)


def test_the_view_reads_every_field_of_the_contract():
    """The scheduler's record feeds every ScheduledBatch field, none left to defaults."""
    names = {spec.name for spec in contracts.fields_of(contracts.ScheduledBatch)}
    assert names - {"state_slots"} == set(scheduler_output._BATCH_FIELDS)
    cfg, requests = chunk_boundary()
    engine = Engine(cfg, model=MODEL)
    for request in requests:
        engine.scheduler.add(request)
    scheduled = engine.scheduler.schedule()
    assert scheduled is not None
    batch = scheduler_output.scheduled_batch(scheduled)
    assert batch.seq_ids is scheduled.seq_ids and batch.num_tokens == scheduled.num_tokens
