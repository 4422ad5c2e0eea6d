"""The engine's step tracker: every forward checked against the one before it.

A clean engine keeps every relation (checked here independently of the tracker, from the
traces it is fed); a trace bent in one place is caught by the rule of that relation,
naming the seq and its batch position; with contracts off or at metadata depth nothing
is recorded and no tracker is built.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch
from engine_builders import MODEL, chunk_boundary, config, memory_pressure, requests_of

from specguard import contracts
from specguard.adapters import StepTracker
from specguard.runner import engine as engine_module
from specguard.runner import step_relations
from specguard.runner.config import ModelConfig
from specguard.runner.engine import Engine
from specguard.runner.oracle import first_divergence, greedy_reference
from specguard.runner.step_relations import PendingTrace, StepTrace, check_step
from specguard.runner.workload import Request


def _mixed() -> tuple:
    """Long and short prompts, a small budget and a tight cache: every kind of step."""
    return config(num_blocks=24, max_num_batched_tokens=48), \
        requests_of([70, 9, 33, 120, 5, 18], max_tokens=24, seed=3)


WORKLOADS = {"chunk-boundary": chunk_boundary, "memory-pressure": memory_pressure,
             "mixed": _mixed}


def _traced_run(workload, monkeypatch, *, host_trace: bool | None = None
                ) -> tuple[Engine, list[StepTrace]]:
    """A clean strict run at full depth, with every trace the tracker was fed;
    ``host_trace`` overrides how the runner reads its trace (see ``ModelRunner``)."""
    seen: list[StepTrace] = []

    def recording_check(tracker, trace):
        seen.append(trace)
        check_step(tracker, trace)

    monkeypatch.setattr(engine_module, "check_step", recording_check)
    cfg, requests = workload()
    engine = Engine(cfg, model=MODEL)
    if host_trace is not None:
        engine.runner.host_trace = host_trace
    with contracts.checking(mode="strict", depth="full", collect="all"):
        result = engine.generate(requests)
    assert result.stats.violations == 0
    return engine, seen


def _row(trace: StepTrace, seq_id: int) -> int:
    return trace.plan.seq_ids.tolist().index(seq_id)


def _advance(trace: StepTrace, row: int) -> int:
    """Positions that stuck in that forward: the chunk, or the accepted drafts and one."""
    if not trace.plan.is_decode[row]:
        return int(trace.plan.num_scheduled[row])
    verify_row = trace.verify_ids.tolist().index(int(trace.plan.seq_ids[row]))
    return int(trace.num_accepted[verify_row]) + 1


def _continuations(traces: list[StepTrace]):
    """(previous trace, its row, this trace, this row) for each seq in consecutive forwards."""
    for before, after in itertools.pairwise(traces):
        assert after.step == before.step + 1
        for row, seq_id in enumerate(after.plan.seq_ids.tolist()):
            if seq_id in before.plan.seq_ids.tolist():
                yield before, _row(before, seq_id), after, row


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_clean_engine_resumes_every_seq_where_it_left_off(name, monkeypatch):
    """Each seq in two consecutive forwards starts the second where the first left it."""
    _, traces = _traced_run(WORKLOADS[name], monkeypatch)
    checked = 0
    for before, prev_row, after, row in _continuations(traces):
        expected = int(before.plan.starts[prev_row]) + _advance(before, prev_row)
        assert int(after.plan.starts[row]) == expected, (after.step, row)
        checked += 1
    assert checked > len(traces)  # the relation was exercised, not vacuously true


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_clean_engine_verifies_the_drafts_proposed_the_step_before(name, monkeypatch):
    """A decode seq of the previous forward is verified with the drafts proposed for it."""
    _, traces = _traced_run(WORKLOADS[name], monkeypatch)
    checked = 0
    for before, _, after, row in _continuations(traces):
        if not after.plan.is_decode[row]:
            continue
        decode_row = int(after.plan.is_decode[:row].sum())
        count = int(after.plan.num_drafts[decode_row])
        assert count == after.plan.mtp_k
        proposed = before.proposals[before.drafter_ids.tolist().index(after.plan.seq_ids[row])]
        assert after.plan.draft_token_ids[decode_row].tolist() == proposed.tolist()
        checked += 1
    assert checked > 0


def test_memory_pressure_run_preempts_and_stays_clean(monkeypatch):
    """Preempted seqs restart from position 0 without breaking a relation."""
    engine, traces = _traced_run(memory_pressure, monkeypatch)
    assert engine.scheduler.num_preemptions > 0
    restarts = [(t.step, s) for t in traces for s, start, decode in
                zip(t.plan.seq_ids, t.plan.starts, t.plan.is_decode, strict=True)
                if start == 0 and not decode and t.step > 1]
    assert restarts


def _preempts_without_a_forward() -> tuple:
    """A cache so small that round 7 preempts seq 1 and, having nothing left, runs nothing."""
    cfg = config(mtp_k=1, block_size=1, num_blocks=15, max_num_seqs=2,
                 max_num_batched_tokens=4,
                 model=ModelConfig(vocab_size=61, d_model=32, num_heads=2, num_layers=1,
                                   d_ff=64))
    prompts = ([16, 18], [2, 4], [1, 10])
    return cfg, [Request(i, np.array(p, dtype=np.int64), 8) for i, p in enumerate(prompts)]


def test_preemption_in_a_round_without_a_forward_restarts_the_chain(monkeypatch):
    """A seq preempted between two forwards restarts at 0; the next forward is related to none."""
    breaks = []
    real = Engine._break_relations

    def counted(self):
        breaks.append(self.current_step)
        real(self)

    monkeypatch.setattr(Engine, "_break_relations", counted)
    cfg, requests = _preempts_without_a_forward()
    engine = Engine(cfg)
    with contracts.checking(mode="strict", depth="full", collect="all"):
        result = engine.generate(requests)
    assert result.stats.violations == 0 and breaks == [7]
    assert _matches_greedy(engine, requests)


def test_without_the_break_the_restarted_seq_is_still_a_legal_restart(monkeypatch):
    """Related to the forward before the empty round, seq 1 restarting at 0 as a prefill is
    a recompute (SG601 allows it); its re-fed tokens are its own (SG608 holds)."""
    monkeypatch.setattr(Engine, "_break_relations", lambda self: None)
    cfg, requests = _preempts_without_a_forward()
    engine = Engine(cfg)
    with contracts.checking(mode="strict", depth="full", collect="all"):
        result = engine.generate(requests)
    assert result.stats.violations == 0 and engine.scheduler.num_preemptions > 0
    assert _matches_greedy(engine, requests)


def _matches_greedy(engine: Engine, requests) -> bool:
    """Whether the run's tokens are plain greedy decoding's."""
    expected = greedy_reference(engine.model, requests)
    return first_divergence(expected, engine.scheduler.outputs()) is None


# --- a clean trace bent in one place is caught by the rule of that relation --------------


def _bent(change, monkeypatch) -> contracts.ContractViolation:
    """Replay a clean chunk-boundary run's traces into a fresh tracker, step 5 changed."""
    _, traces = _traced_run(chunk_boundary, monkeypatch)
    tracker = StepTracker()
    with contracts.checking(mode="strict", depth="full"):
        for trace in traces:
            if trace.step == 5:
                trace = change(trace)
            try:
                check_step(tracker, trace)
            except contracts.ContractViolation as error:
                return error
    raise AssertionError("the bent trace passed")


def _plan(trace: StepTrace, **changes) -> StepTrace:
    return dataclasses.replace(trace, plan=dataclasses.replace(trace.plan, **changes))


def test_a_start_one_position_late_is_sg601(monkeypatch):
    """Seq 3 (batch position 0 of step 5) starting one position late breaks SG601."""
    def late(trace):
        starts = trace.plan.starts.copy()
        starts[0] += 1
        return _plan(trace, starts=starts)

    error = _bent(late, monkeypatch)
    assert error.codes == ("SG601",)
    assert "seq 3 at batch position 0: starts at position" in str(error)


def test_drafts_of_two_seqs_swapped_is_sg602(monkeypatch):
    """The first two decode rows of step 5 carrying each other's drafts break SG602."""
    def swapped(trace):
        drafts = trace.plan.draft_token_ids.copy()
        drafts[[0, 1]] = drafts[[1, 0]]
        return _plan(trace, draft_token_ids=drafts)

    error = _bent(swapped, monkeypatch)
    assert error.codes == ("SG602",)
    assert "seq 3 at batch position 0: draft 0 is" in str(error)


def test_verify_rows_out_of_batch_order_is_sg604(monkeypatch):
    """Verifier rows in reverse order break SG604 at the first decode seq."""
    error = _bent(lambda t: dataclasses.replace(t, verify_ids=t.verify_ids[::-1].copy()),
                  monkeypatch)
    assert error.codes == ("SG604",)
    assert "seq 3 at batch position 0: verify row 0 belongs to seq" in str(error)


def test_a_row_verified_without_its_proposal_is_sg607(monkeypatch):
    """Seq 3 verified in step 5 with none of the drafts step 4 proposed for it breaks SG607."""
    def no_drafts(trace):
        drafts = trace.plan.num_drafts.copy()
        drafts[0] = 0
        return _plan(trace, num_drafts=drafts)

    error = _bent(no_drafts, monkeypatch)
    assert error.codes == ("SG607",)
    assert "seq 3 at batch position 0: carries 0 drafts, but the previous step proposed 3 " \
        "for this seq" in str(error)


def test_more_accepted_than_carried_is_sg605(monkeypatch):
    """A row accepting more drafts than it carried breaks SG605."""
    def accepts_too_many(trace):
        accepted = trace.num_accepted.copy()
        accepted[0] = trace.plan.mtp_k + 1
        return dataclasses.replace(trace, num_accepted=accepted)

    error = _bent(accepts_too_many, monkeypatch)
    assert error.codes == ("SG605",)
    assert "seq 3 at batch position 0: accepted 4 drafts, but the row carried 3 real drafts" \
        in str(error)


def test_drafter_rows_of_another_order_is_sg606(monkeypatch):
    """Drafter rows in reverse order break SG606 at batch position 0."""
    error = _bent(lambda t: dataclasses.replace(t, drafter_ids=t.drafter_ids[::-1].copy()),
                  monkeypatch)
    assert error.codes == ("SG606",)
    assert "at batch position 0: drafter row 0 belongs to seq" in str(error)


# --- off, metadata, and changes of depth ---------------------------------------------------


def _forbid_tracking(monkeypatch) -> None:
    def refuse(*args, **kwargs):
        raise AssertionError("step relations recorded or a tracker built")

    monkeypatch.setattr(PendingTrace, "record", refuse)
    monkeypatch.setattr(PendingTrace, "on_host", refuse)
    monkeypatch.setattr(engine_module, "StepTracker", refuse)


@pytest.mark.parametrize("settings", [{"mode": "off", "depth": "full"},
                                      {"mode": "strict", "depth": "metadata"}],
                         ids=["off", "metadata"])
def test_no_trace_and_no_tracker_without_value_checks(settings, monkeypatch):
    """Contracts off or metadata depth: nothing recorded, no tracker constructed."""
    _forbid_tracking(monkeypatch)
    cfg, requests = chunk_boundary()
    engine = Engine(cfg, model=MODEL)
    with contracts.checking(**settings):
        result = engine.generate(requests)
    assert engine.tracker is None
    assert result.stats.output_tokens == sum(r.max_tokens for r in requests)


def test_recording_follows_mode_and_depth():
    """Relations are recorded exactly when contracts are on at full depth."""
    for mode in ("off", "warn", "strict"):
        for depth in ("metadata", "full"):
            with contracts.checking(mode=mode, depth=depth):
                assert step_relations.recording() == (mode != "off" and depth == "full")


def test_a_step_without_a_trace_starts_a_fresh_tracker(monkeypatch):
    """Depth lowered for one step: the chain breaks, a new tracker resumes, still clean."""
    cfg, requests = chunk_boundary()
    engine = Engine(cfg, model=MODEL)
    for request in requests:
        engine.scheduler.add(request)
    with contracts.checking(mode="strict", depth="full", collect="all"):
        for _ in range(4):
            engine.step()
        first = engine.tracker
        with contracts.checking(depth="metadata"):
            engine.step()  # checks step 4 (traced); step 5 records nothing
        assert engine.tracker is first
        engine.step()  # step 5's outputs carry no trace: the tracker is dropped
        assert engine.tracker is None
        engine.step()
        engine.step()
    assert engine.tracker is not None and engine.tracker is not first
    assert engine.tracker.previous is not None
    assert engine.tracker.previous.step == 0  # forward 6, the first the new tracker saw


def test_warn_mode_reports_a_step_fault_and_runs_on(caplog):
    """Warn mode logs the step rule's violation and the engine keeps going."""
    cfg, requests = chunk_boundary()
    engine = Engine(cfg, fault="stale-drafts", model=MODEL)
    with contracts.checking(mode="warn", depth="full"):
        result = engine.generate(requests)
    assert result.stats.violations > 0
    assert any("SG602" in record.getMessage() for record in caplog.records)


# --- the trace itself --------------------------------------------------------------------


@pytest.mark.parametrize("pack", [True, None])
@pytest.mark.parametrize("num_decode", [0, 2])
def test_trace_round_trips_through_one_packed_copy(num_decode, pack):
    """Five tensors of mixed shapes and dtypes come back on the host as they were:
    through one packed copy (what a device forward does), or as host views."""
    k, n = 3, 4
    starts = torch.tensor([5, 0, 17, 40])
    carried = torch.arange(num_decode * k, dtype=torch.int32).reshape(num_decode, k) + 100
    verify_ids = torch.arange(num_decode) + 7
    accepted = torch.full((num_decode,), 2)
    drafter_ids = torch.tensor([7, 8, 1, 2])
    is_decode = np.array([True] * num_decode + [False] * (n - num_decode))
    pending = PendingTrace.record(
        step=9, mtp_k=k, seq_ids=np.array([7, 8, 1, 2]), is_decode=is_decode,
        num_scheduled=np.array([4, 4, 9, 1], dtype=np.int32),
        num_drafts=np.full(num_decode, k), draft_placeholder=None,
        tensors=(starts, carried, verify_ids, accepted, drafter_ids), pack=pack)
    if pack:
        assert pending.packed is not None
        assert pending.packed.dtype == torch.int64 and pending.packed.dim() == 1
    else:  # on the host already: nothing is packed or copied
        assert pending.packed is None and len(pending.host) == 5
    proposals = np.zeros((n, k), dtype=np.int64)
    trace = pending.to_host(proposals)
    assert trace.step == 9 and trace.proposals is proposals
    assert trace.plan.starts.tolist() == starts.tolist()
    assert trace.plan.draft_token_ids.shape == (num_decode, k)
    assert trace.plan.draft_token_ids.tolist() == carried.tolist()
    assert trace.verify_ids.tolist() == verify_ids.tolist()
    assert trace.num_accepted.tolist() == accepted.tolist()
    assert trace.drafter_ids.tolist() == [7, 8, 1, 2]
    assert trace.plan.num_scheduled.dtype == np.int64 and trace.plan.is_sound()


@pytest.mark.parametrize("workload", [chunk_boundary, memory_pressure])
def test_the_host_trace_reads_what_the_packed_trace_copies(workload, monkeypatch):
    """On the host the runner gathers its trace through numpy views; the same run traced
    through torch gathers and one packed copy (a device's path) gives the same traces."""
    _, host = _traced_run(workload, monkeypatch, host_trace=True)
    _, packed = _traced_run(workload, monkeypatch, host_trace=False)
    assert len(host) == len(packed) > 3
    for a, b in zip(host, packed, strict=True):
        assert a.step == b.step
        for name in ("seq_ids", "is_decode", "starts", "num_scheduled", "draft_token_ids",
                     "num_drafts"):
            left, right = getattr(a.plan, name), getattr(b.plan, name)
            assert left.dtype == right.dtype and left.tolist() == right.tolist(), name
        for name in ("verify_ids", "num_accepted", "drafter_ids", "proposals"):
            assert getattr(a, name).tolist() == getattr(b, name).tolist(), name


def test_trace_refuses_the_wrong_number_of_tensors():
    """Recording with a tensor missing is a ValueError naming the expected ones."""
    with pytest.raises(ValueError, match="starts, carried, verify_ids"):
        PendingTrace.record(step=1, mtp_k=3, seq_ids=np.zeros(0, dtype=np.int64),
                            is_decode=np.zeros(0, dtype=bool),
                            num_scheduled=np.zeros(0, dtype=np.int64),
                            num_drafts=np.zeros(0, dtype=np.int64), draft_placeholder=None,
                            tensors=(torch.zeros(0),))


def test_the_runner_counts_forwards_as_engine_steps(monkeypatch):
    """A trace's step is the engine step that ran its forward."""
    engine, traces = _traced_run(chunk_boundary, monkeypatch)
    assert [t.step for t in traces] == list(range(1, engine.stats.steps + 1))
    assert engine.runner.num_forwards == engine.stats.steps


@pytest.mark.parametrize("workload", [chunk_boundary, memory_pressure])
def test_a_batch_in_the_previous_order_is_related_as_any_other(workload, monkeypatch):
    """The tracker relates a batch of the previous forward's seqs in its order without
    gathering by row: every transition it builds is the one the general path builds."""
    from specguard.adapters import _step_plan, step_tracker
    from specguard.contracts._core import _compiled

    def transitions(general: bool) -> list[dict]:
        built: list[dict] = []
        build = step_tracker.build

        def recording(cls, fields, **kwargs):
            if cls is step_tracker.StepTransition:
                built.append(fields)
            return build(cls, fields, **kwargs)

        # Numpy answers: the fused kernels would vouch for clean transitions unbuilt.
        with monkeypatch.context() as patched, _compiled.switched_off():
            patched.setattr(step_tracker, "build", recording)
            if general:  # the lookup still sorts, and never says "the same order"
                identical = _step_plan.IdLookup.identical
                patched.setattr(_step_plan.IdLookup, "identical",
                                lambda self, ids: identical(self, ids) and False)
            _traced_run(workload, monkeypatch)
        return built

    fast, general = transitions(general=False), transitions(general=True)
    assert len(fast) == len(general) > 3
    for a, b in zip(fast, general, strict=True):
        assert a.keys() == b.keys()
        for name in a:
            left, right = a[name], b[name]
            if isinstance(left, np.ndarray):
                assert left.dtype == right.dtype and left.tolist() == right.tolist(), name
            else:
                assert left == right, name
