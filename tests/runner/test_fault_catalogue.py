"""Every catalogued fault, both ways: what it does to an unguarded engine, and where
strict contracts at full depth stop it (the rule, the seq, its batch position).

The step-to-step rules run a step late (when a forward's outputs reach the host), so a
fault that also breaks a rule of a single object is stopped by that rule first: adding
the step tracker to the engine changed no expectation of the per-object faults.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import numpy as np
import pytest
from engine_builders import (
    MODEL,
    chunk_boundary,
    constrained_prefills,
    divergence,
    memory_pressure,
    padded_decode,
    remote_prefills,
    short_drafter,
)

from specguard import contracts
from specguard.adapters import StepState, StepTracker
from specguard.runner import engine as engine_module
from specguard.runner import faults, model_runner
from specguard.runner.engine import Engine
from specguard.runner.faults import FAULTS
from specguard.runner.workload import Request

#: The hand-made workload that reaches each fault's code path.
WORKLOADS = {
    faults.COMPACT_DRAFT_ROWS: chunk_boundary,
    faults.SENTINEL_TO_EMBEDDING: chunk_boundary,
    faults.COMPACT_BLOCK_TABLES: chunk_boundary,
    faults.DUPLICATE_SEQ_ID: memory_pressure,
    faults.WRONG_DRAFT_WIDTH: chunk_boundary,
    faults.SENTINEL_IN_TARGET_INPUT: chunk_boundary,
    faults.SKIPPED_REJECTION_ROLLBACK: chunk_boundary,
    faults.STALE_DRAFTS: chunk_boundary,
    faults.STALE_PADDING_SLOTS: padded_decode,
    faults.UNPROPOSED_DRAFTS: short_drafter,
    faults.REMOTE_DRAFTS_LOST: remote_prefills,
    faults.UNTRIMMED_OUTPUT: chunk_boundary,
    faults.MISALIGNED_LOGITS_ROWS: constrained_prefills,
    faults.STALE_DRAFT_SEQ_LENS: chunk_boundary,
}

#: The engine finishes and its tokens differ from greedy decoding.
DIVERGES = "diverges"
#: The engine finishes with greedy's tokens, accepting far fewer drafts than a clean one.
SLOWER = "slower"

#: Without contracts: the exception the engine dies with, or how a finished run is wrong.
UNGUARDED = {
    faults.COMPACT_DRAFT_ROWS: (IndexError, "index 3 is out of bounds for axis 0 with size 3"),
    faults.SENTINEL_TO_EMBEDDING: (IndexError, "index out of range in self"),
    faults.COMPACT_BLOCK_TABLES: (IndexError, "out of bounds for dimension with size 0"),
    faults.DUPLICATE_SEQ_ID: DIVERGES,
    faults.WRONG_DRAFT_WIDTH: (IndexError, "is out of bounds for dimension 0"),
    faults.SENTINEL_IN_TARGET_INPUT: (IndexError, "index out of range in self"),
    faults.SKIPPED_REJECTION_ROLLBACK: DIVERGES,
    faults.STALE_DRAFTS: SLOWER,
    faults.STALE_PADDING_SLOTS: DIVERGES,
    faults.UNPROPOSED_DRAFTS: SLOWER,
    faults.REMOTE_DRAFTS_LOST: SLOWER,
    faults.UNTRIMMED_OUTPUT: DIVERGES,
    faults.MISALIGNED_LOGITS_ROWS: DIVERGES,
    faults.STALE_DRAFT_SEQ_LENS: SLOWER,
}

#: Faults stopped at a row that belongs to no seq (a padding row): the violation names
#: the row of the token stream instead of a seq.
NO_SEQ = {faults.STALE_PADDING_SLOTS}


#: The faults one engine shows; those that only show across ranks have their own tests
#: (tests/runner/test_data_parallel.py).
ENGINE_FAULTS = [name for name, fault in FAULTS.items() if not fault.across_ranks]


def _engine(name: str) -> tuple[Engine, list]:
    cfg, requests = WORKLOADS[name]()
    return Engine(cfg, fault=name, model=MODEL), requests


def test_catalogue_is_covered():
    """Every fault in the catalogue has a workload and expectations here."""
    assert set(ENGINE_FAULTS) == set(WORKLOADS) == set(UNGUARDED)


@pytest.mark.parametrize("name", ENGINE_FAULTS)
def test_catalogue_states_what_happens_without_contracts(name):
    """Each fault's documented contracts-off outcome agrees with what this module observes."""
    text, expected = FAULTS[name].unguarded, UNGUARDED[name]
    if expected == DIVERGES:
        assert text.startswith("finishes;") and "differ from plain greedy decoding" in text
    elif expected == SLOWER:
        assert text.startswith("finishes") and "identical to plain greedy decoding" in text
    else:
        assert text.startswith(expected[0].__name__ + " in ")


@pytest.mark.parametrize("name", ENGINE_FAULTS)
def test_clean_engine_passes_the_same_workload(name):
    """Without the fault, the workload runs clean at full depth and matches greedy."""
    cfg, requests = WORKLOADS[name]()
    with contracts.checking(mode="strict", depth="full"):
        engine = Engine(cfg, model=MODEL)
        result = engine.generate(requests)
    assert result.stats.violations == 0
    assert divergence(result, requests) is None


@pytest.mark.parametrize("name", ENGINE_FAULTS)
def test_without_contracts_the_fault_breaks_the_engine(name):
    """Contracts off: the engine fails deep inside, or its tokens differ from greedy."""
    engine, requests = _engine(name)
    expected = UNGUARDED[name]
    with contracts.checking(mode="off"):
        if expected == DIVERGES:
            assert divergence(engine.generate(requests), requests) is not None
        elif expected == SLOWER:
            result = engine.generate(requests)
            assert divergence(result, requests) is None
            clean = Engine(engine.config, model=MODEL).generate(requests)
            assert result.stats.acceptance_rate < clean.stats.acceptance_rate / 2
        else:
            error_type, message = expected
            with pytest.raises(error_type, match=re.escape(message)):
                engine.generate(requests)
    assert engine.stats.contract_checks == 0
    assert engine.tracker is None


@pytest.mark.parametrize("name", ENGINE_FAULTS)
def test_strict_contracts_stop_the_fault_at_the_boundary(name):
    """Strict, full depth: a ContractViolation naming the rule, the seq and its position."""
    engine, requests = _engine(name)
    with contracts.checking(mode="strict", depth="full"), \
            pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    violation = caught.value.violations[0]
    assert (violation.code, violation.subject) == (FAULTS[name].rule, FAULTS[name].subject)
    if name in NO_SEQ:
        assert violation.token is not None and violation.seq_id is None
        assert f"token {violation.token}:" in str(caught.value)
        return
    assert violation.seq_id is not None and violation.position is not None
    assert f"seq {violation.seq_id} at batch position {violation.position}" in str(caught.value)
    assert str(caught.value).startswith(f"{FAULTS[name].subject} broke 1 rule:")


@pytest.mark.parametrize("name", [faults.SKIPPED_REJECTION_ROLLBACK, faults.STALE_DRAFTS])
def test_the_step_faults_are_stopped_at_the_default_depth(name):
    """The faults only the relation between steps shows are caught at the default
    settings: the engine keeps a tracker from the default depth on, and SG601-SG607 run
    there."""
    engine, requests = _engine(name)
    with contracts.checking(mode="strict"), \
            pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    violation = caught.value.violations[0]
    assert violation.code in (FAULTS[name].rule, *FAULTS[name].also)
    assert violation.subject == FAULTS[name].subject and engine.tracker is not None


def test_metadata_depth_keeps_no_tracker():
    """Where no step rule runs, the engine records nothing for one."""
    engine, requests = _engine(faults.STALE_DRAFTS)
    with contracts.checking(mode="strict", depth="metadata"):
        engine.generate(requests)
    assert engine.tracker is None


def test_an_engine_without_a_step_tracker_relates_no_forward():
    """step_tracker=False: the stale drafts pass every single object, and nothing relates
    the steps, so the run finishes (slower, with tokens still greedy's)."""
    config, requests = WORKLOADS[faults.STALE_DRAFTS]()
    engine = Engine(config, fault=faults.STALE_DRAFTS, model=MODEL, step_tracker=False)
    with contracts.checking(mode="strict"):
        result = engine.generate(requests)
    assert divergence(result, requests) is None and engine.tracker is None


def _stop(name: str) -> tuple[Engine, contracts.Violation]:
    engine, requests = _engine(name)
    with contracts.checking(mode="strict", depth="full"), \
            pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    return engine, caught.value.violations[0]


def _previous(engine: Engine) -> StepState:
    """The state the engine's step tracker keeps of the step before the violation."""
    assert engine.tracker is not None and engine.tracker.previous is not None
    return engine.tracker.previous


def test_compact_draft_rows_names_the_seq_without_drafts():
    """The ATOM seed: the violation points at the just-prefilled seq, at step 4."""
    engine, violation = _stop(faults.COMPACT_DRAFT_ROWS)
    assert (violation.seq_id, violation.position, engine.current_step) == (3, 0, 4)
    assert engine.scheduler.seqs[3].drafts.size == 0
    assert violation.expected == "num_decode=4" and violation.actual == "3"


def test_sentinel_to_embedding_names_the_mid_prompt_seq():
    """The vLLM seed: the -1 sits at the sample index of the discarded (mid-prompt) row."""
    engine, violation = _stop(faults.SENTINEL_TO_EMBEDDING)
    assert (violation.seq_id, engine.current_step) == (3, 1)
    assert violation.token == 63  # seq 3's 4-token chunk ends the 64-token stream
    assert "input id is -1" in violation.reason


def test_compact_block_tables_names_the_first_seq_without_a_table():
    """Step 1 admits every seq; their tables were gathered before allocation."""
    engine, violation = _stop(faults.COMPACT_BLOCK_TABLES)
    assert (violation.seq_id, violation.position, engine.current_step) == (0, 0, 1)


def test_duplicate_seq_id_names_the_second_occurrence():
    """The preempted seq left in ``running`` is scheduled twice in one step."""
    engine, violation = _stop(faults.DUPLICATE_SEQ_ID)
    assert violation.seq_id is not None
    assert engine.scheduler.seqs[violation.seq_id].num_preemptions > 0
    assert engine.scheduler.running.count(engine.scheduler.seqs[violation.seq_id]) > 1
    assert "appears twice" in violation.reason


def test_wrong_draft_width_names_the_trimmed_seq():
    """The seq scheduled fewer than mtp_k + 1 tokens is the one near its limit."""
    engine, violation = _stop(faults.WRONG_DRAFT_WIDTH)
    assert violation.seq_id is not None
    seq = engine.scheduler.seqs[violation.seq_id]
    assert seq.max_tokens - seq.num_output <= engine.config.mtp_k + 1
    assert violation.expected == f"mtp_k+1={engine.config.mtp_k + 1}"


def test_sentinel_in_target_input_names_the_first_decode():
    """The -1 padding of seq 3's first decode reaches the target's input ids."""
    engine, violation = _stop(faults.SENTINEL_IN_TARGET_INPUT)
    assert (violation.seq_id, violation.position, engine.current_step) == (3, 0, 4)
    assert violation.token == 1  # the first draft slot after seq 3's anchor


def test_skipped_rejection_rollback_names_the_seq_that_resumes_too_far():
    """Seq 3 rejected drafts in step 4; step 5 starts it past them (found during step 6)."""
    # Expected: the previous start plus the accepted drafts and one; actual: past it by
    # exactly the drafts step 4 rejected.
    engine, violation = _stop(faults.SKIPPED_REJECTION_ROLLBACK)
    assert (violation.seq_id, violation.position) == (3, 0)
    assert (engine.violation_step, engine.current_step) == (5, 6)
    previous = _previous(engine)
    row = previous.seq_ids.tolist().index(3)
    accepted = int(previous.advance[row]) - 1
    assert violation.expected == str(int(previous.starts[row]) + accepted + 1)
    rejected = engine.config.mtp_k - accepted
    assert rejected > 0
    assert violation.actual is not None and violation.expected is not None
    assert int(violation.actual) - int(violation.expected) == rejected


def test_stale_drafts_names_the_seq_verified_without_its_proposal():
    """Seq 3's prefill ended in step 3; step 4 verifies none of the drafts step 3 proposed."""
    engine, violation = _stop(faults.STALE_DRAFTS)
    assert (violation.code, violation.seq_id, violation.position) == ("SG607", 3, 0)
    assert (engine.violation_step, engine.current_step) == (4, 5)
    previous = _previous(engine)  # step 3, seq 3's last prefill chunk
    assert previous.drafted[previous.seq_ids.tolist().index(3)]
    assert not previous.is_decode[previous.seq_ids.tolist().index(3)]
    assert (violation.expected, violation.actual) == (str(engine.config.mtp_k), "0")


def test_stale_drafts_further_along_carry_the_older_drafts(monkeypatch):
    """With SG607 off, seq 3 carries into step 5 drafts other than the ones step 4 proposed."""
    monkeypatch.setattr(engine_module, "StepTracker",
                        functools.partial(StepTracker, whole_proposals=False))
    engine, violation = _stop(faults.STALE_DRAFTS)
    assert (violation.code, violation.seq_id, violation.position) == ("SG602", 3, 0)
    assert (engine.violation_step, engine.current_step) == (5, 6)
    previous = _previous(engine)
    proposed = previous.proposals[previous.seq_ids.tolist().index(3)]
    assert violation.expected == str(int(proposed[0]))
    assert violation.actual != violation.expected
    assert "draft 0 is" in violation.reason and "proposed" in violation.reason


def test_unproposed_drafts_names_the_seq_that_carries_a_skipped_drafters_zeros():
    """Step 2's contexts pass the drafter's limit: it proposes nothing, and step 3 still
    verifies seq 0 with three drafts (found while step 3's outputs reach the host)."""
    engine, violation = _stop(faults.UNPROPOSED_DRAFTS)
    assert (violation.code, violation.seq_id, violation.position) == ("SG660", 0, 0)
    previous = _previous(engine)
    row = previous.seq_ids.tolist().index(0)
    assert previous.num_proposed is not None
    assert previous.drafted[row] and int(previous.num_proposed[row]) == 0
    assert (violation.expected, violation.actual) == ("<= 0", str(engine.config.mtp_k))


@pytest.mark.parametrize("name", [faults.SKIPPED_REJECTION_ROLLBACK, faults.STALE_DRAFTS,
                                  faults.UNPROPOSED_DRAFTS])
def test_step_faults_break_no_rule_of_a_single_object(name, monkeypatch):
    """Full depth with the step tracker left out: every object passes, the run finishes."""
    monkeypatch.setattr(model_runner, "recording", lambda: False)
    engine, requests = _engine(name)
    with contracts.checking(mode="strict", depth="full", collect="all"):
        result = engine.generate(requests)
    assert result.stats.violations == 0 and result.stats.contract_checks > 0
    assert engine.tracker is None


def test_stale_padding_slots_names_the_first_padding_row():
    """Step 2 pads three decode spans to four: the padding rows 12-15 still hold the slots
    step 1's prefill wrote there, seq 0's positions 12-15."""
    engine, violation = _stop(faults.STALE_PADDING_SLOTS)
    assert (violation.code, violation.token, engine.current_step) == ("SG308", 12, 2)
    assert "padding row 12's slot is 12" in violation.reason
    assert violation.expected == "padding_slot_id=-1"


def test_misaligned_logits_rows_names_the_prefill_given_a_decode_span():
    """Step 1 samples three constrained prefills, one row each: the producer laid seq 0
    out four rows (mtp_k + 1), so seqs 1 and 2 would be sampled under seq 0's bans."""
    engine, violation = _stop(faults.MISALIGNED_LOGITS_ROWS)
    assert (violation.seq_id, violation.position, engine.current_step) == (0, 0, 1)
    assert "the data holds 4 rows for it, the logits 1" in violation.reason
    assert violation.expected == "1 + num_drafts"


def test_misaligned_logits_rows_stops_the_step_before_its_forward():
    """The logits rows are decided on the host before the forward and handed over
    there: the broken layout stops the step before the model runs it."""
    engine, requests = _engine(faults.MISALIGNED_LOGITS_ROWS)
    model, ran = engine.runner.model, []
    forward = model.forward

    def counted(*args: Any, **kwargs: Any) -> Any:
        ran.append(engine.runner.num_forwards)
        return forward(*args, **kwargs)

    model.forward = counted  # type: ignore[method-assign]
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    assert caught.value.violations[0].code == "SG312"
    assert engine.runner.num_forwards not in ran  # the step that broke never ran forward
    assert ran == list(range(1, engine.runner.num_forwards))


def test_misaligned_logits_rows_hands_the_next_request_its_neighbours_bans():
    """Without contracts the first token that differs is a constrained request's first,
    chosen under the bans of the first request (its own allow what it was given)."""
    engine, requests = _engine(faults.MISALIGNED_LOGITS_ROWS)
    with contracts.checking(mode="off"):
        found = divergence(engine.generate(requests), requests)
    assert found is not None and found.request_id in (1, 2) and found.position == 0
    assert found.expected not in requests[found.request_id].banned_token_ids
    assert found.actual not in requests[0].banned_token_ids


def test_stale_draft_seq_lens_names_the_first_seq_at_draft_step_one():
    """Seq 0's prefill ends at position 19 in step 1: draft step 1 drafts at position 20
    with the first pass's seq_len of 20."""
    engine, violation = _stop(faults.STALE_DRAFT_SEQ_LENS)
    assert (violation.seq_id, violation.position, engine.current_step) == (0, 0, 1)
    assert "seq_len is 20 at draft step 1" in violation.reason
    assert (violation.expected, violation.actual) == ("21", "20")


@pytest.mark.parametrize(("depth", "first_step"), [("essential", -1), ("full", 1)])
def test_stale_draft_seq_lens_is_stopped_at_the_draft_steps_each_depth_builds(
        monkeypatch, depth, first_step):
    """Below full depth the engine hands over only the last draft step's input (each
    step's metadata is the previous one's advanced, so a step left behind leaves the last
    behind too); at full depth every step's. Either way the stale metadata is stopped,
    at the first step built."""
    from specguard.runner import drafter

    built_steps = []
    drafter_input_of = drafter.draft_step_input

    def recorded(first, step, token_ids, metadata=None):
        built_steps.append(step)
        return drafter_input_of(first, step, token_ids, metadata)

    monkeypatch.setattr(drafter, "draft_step_input", recorded)
    engine, requests = _engine(faults.STALE_DRAFT_SEQ_LENS)
    last = engine.config.mtp_k - 1
    with contracts.checking(mode="strict", depth=depth), \
            pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    violation = caught.value.violations[0]
    stopped_at = last if first_step < 0 else first_step
    assert violation.code == "SG306" and f"at draft step {stopped_at}" in violation.reason
    assert set(built_steps) == ({last} if depth == "essential" else {stopped_at})
    clean, _ = _engine(faults.STALE_DRAFT_SEQ_LENS)
    built_steps.clear()
    with contracts.checking(mode="strict", depth=depth):
        Engine(clean.config, model=MODEL).generate(requests[:1])
    assert set(built_steps) == ({last} if depth == "essential" else set(range(1, last + 1)))


@pytest.mark.parametrize("name", ENGINE_FAULTS)
def test_the_default_settings_stop_the_fault(name):
    """Strict mode at the default depth stops every fault of the catalogue by its rule,
    as full depth does."""
    engine, requests = _engine(name)
    assert contracts.current_config().depth is contracts.Depth.ESSENTIAL
    with contracts.checking(mode="strict"), \
            pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    assert caught.value.violations[0].code == FAULTS[name].rule


def test_unknown_fault_name_is_refused():
    """A typo in a fault name fails at once, listing the known ones."""
    with pytest.raises(ValueError, match=r"unknown fault .compact-rows.*compact-draft-rows"):
        Engine(fault="compact-rows", model=MODEL)


def test_faults_are_injected_in_engine_code_not_in_objects():
    """Each fault's sites name scheduler, runner or drafter functions that exist."""
    from specguard.runner import (
        data_parallel,
        drafter,
        model_runner,
        request_output,
        scheduler,
        token_bans,
    )

    owners = {"Scheduler": scheduler.Scheduler, "TokenBans": token_bans.TokenBans,
              "ModelRunner": model_runner.ModelRunner, "drafter": drafter,
              "request_output": request_output,
              "RankEngine": data_parallel.RankEngine, "RankJob": data_parallel.RankJob}
    for fault in FAULTS.values():
        for site in fault.sites:
            owner, name = site.split(".")
            assert hasattr(owners[owner], name), site


def test_warn_mode_logs_the_violation_and_lets_the_fault_through(caplog):
    """Warn mode reports the violation and then the engine fails as without contracts."""
    engine, requests = _engine(faults.COMPACT_DRAFT_ROWS)
    with contracts.checking(mode="warn", depth="full"), pytest.raises(IndexError):
        engine.generate(requests)
    assert any("SG101" in record.getMessage() for record in caplog.records)
    assert np.isfinite(engine.stats.step_seconds)


def test_unproposed_drafts_of_a_seq_that_sat_out_a_step_are_stopped():
    """Once an escape the engine fuzzer found: a drafter context of 26 tokens and a
    20-token budget, so long prompt chunks make decode seqs sit out steps. A seq back
    from one carries the drafts of its last, short, proposal; SG660 holds it to that
    proposal's count, not only to the previous step's."""
    from specguard.runner.config import EngineConfig, ModelConfig

    model = ModelConfig(vocab_size=2048, d_model=32, num_heads=2, num_layers=1, d_ff=64,
                        seed=0)
    cfg = EngineConfig(mtp_k=3, block_size=1, num_blocks=756, max_num_seqs=4,
                       max_num_batched_tokens=20, model=model, drafter_max_model_len=26)
    rng = np.random.default_rng(0)
    draws = [[Request(i, rng.integers(0, 2048, n), m) for i, (n, m) in enumerate(
        zip([65, 66, 66, 40, 28, 52, 49, 47], [8, 6, 1, 4, 8, 2, 3, 1], strict=True))]
        for _ in range(5)]
    requests = draws[-1]  # the fifth draw of prompts is the one that escaped
    with contracts.checking(mode="strict"), \
            pytest.raises(contracts.ContractViolation) as caught:
        Engine(cfg, fault=faults.UNPROPOSED_DRAFTS).generate(requests)
    assert caught.value.codes == ("SG660",)
    assert "but the last step that drafted for it proposed 0" in str(caught.value)


def test_unproposed_drafts_after_a_last_prompt_chunk_and_a_step_out_are_stopped():
    """Once an escape the engine fuzzer found (its long profile): a drafter context of 7
    tokens and 7-token prompts, so no drafter proposal is whole; seq 1's last prompt chunk
    was drafted for (nothing proposed), it sits out two steps while seq 2 prefills, and
    comes back to decode carrying that row's placeholder as a real draft. The correct
    engine runs the same workload clean."""
    from specguard.runner.config import EngineConfig, ModelConfig

    model = ModelConfig(vocab_size=61, d_model=32, num_heads=2, num_layers=1, d_ff=64,
                        seed=0)
    cfg = EngineConfig(mtp_k=1, block_size=1, num_blocks=56, max_num_seqs=2,
                       max_num_batched_tokens=3, model=model, drafter_max_model_len=7)
    prompts = ([6, 32, 1, 55, 44, 4, 51], [54, 26, 43, 25, 30, 14, 36],
               [4, 34, 57, 10, 22, 6, 28])
    requests = [Request(i, np.array(p), m) for i, (p, m) in enumerate(
        zip(prompts, [1, 2, 1], strict=True))]
    with contracts.checking(mode="strict"):
        clean = Engine(cfg).generate(requests)
        assert clean.stats.violations == 0
        with pytest.raises(contracts.ContractViolation) as caught:
            Engine(cfg, fault=faults.UNPROPOSED_DRAFTS).generate(requests)
    assert caught.value.codes == ("SG660",)
    assert ("seq 1 at batch position 0: carries 1 real drafts, but the last step that "
            "drafted for it proposed 0 for this seq") in str(caught.value)
