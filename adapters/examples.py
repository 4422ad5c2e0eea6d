"""Broken objects for the engine adapters' rules, and the complete example catalogue.

The adapters' rules (step to step, ATOM's layout, vLLM's conventions) are broken through
the adapters themselves: a :class:`~specguard.adapters.step_tracker.StepTracker` fed two
steps, an :class:`~specguard.adapters.engines.atom.view.AtomView` or a
:class:`~specguard.adapters.engines.vllm.view.VllmView` fed an engine's own objects
(stand-ins with the engine's field names). :data:`EXAMPLES` and :data:`STORIES` join
them with the contract rules' examples of :mod:`specguard.contracts.examples`: one broken
object for every rule of the catalogue, which the docs print and the tests hold the
registry to.
"""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import numpy as np

from specguard import contracts as sg
from specguard.adapters.engines.atom.view import AtomView
from specguard.adapters.engines.sglang.v2.view import SglangV2View
from specguard.adapters.engines.sglang.view import SglangView
from specguard.adapters.engines.vllm.mrv2.view import Mrv2View
from specguard.adapters.engines.vllm.view import VllmView
from specguard.adapters.ranks import RankStep, check_ranks
from specguard.adapters.step_tracker import StepTracker
from specguard.contracts import ContractViolation
from specguard.contracts import examples as contract_examples
from specguard.contracts.examples import (
    CLEAN,
    MTP_K,
    NO_EXAMPLE,
    Example,
    drafter_output,
    ids,
    scheduled_batch,
    verify_output,
    violation_of,
)

__all__ = [
    "CLEAN",
    "EXAMPLES",
    "NO_EXAMPLE",
    "STORIES",
    "Example",
    "example_message",
    "example_violation",
    "violation_of",
]

_MTP_K, _VOCAB = MTP_K, contract_examples.VOCAB
_ids = ids


def _next_batch(**changes: Any) -> sg.ScheduledBatch:
    """The clean batch one step later: every seq resumed where the clean step left it."""
    return scheduled_batch(**{"context_lens": _ids(24, 38, 10, 10), **changes})


def _proposals() -> sg.DrafterOutput:
    return sg.DrafterOutput(
        mtp_k=_MTP_K, vocab_size=_VOCAB, seq_ids=_ids(11, 12, 13, 14),
        draft_token_ids=_ids([201, 202, 203], [204, 205, 206], [207, 208, 209],
                             [210, 211, 212]))


def _resumed_elsewhere() -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch())
    tracker.verified(verify_output())  # seq 12 accepted 1 of 3 drafts: it resumes at 34
    tracker.schedule(_next_batch(context_lens=_ids(24, 40, 10, 10)))


def _swapped_drafts() -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch())
    tracker.drafted(_proposals())
    tracker.schedule(_next_batch(
        draft_token_ids=_ids([204, 205, 206], [201, 202, 203], [207, 208, 209]),
        num_drafts=_ids(3, 3, 3)))


def _proposal_left_behind() -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch())
    tracker.drafted(_proposals())
    # Seq 13's proposal is still on the device; the runner reads its row from the host,
    # where it is as empty as in the step before.
    tracker.schedule(_next_batch(
        draft_token_ids=_ids([201, 202, 203], [204, 205, 206], [108, 108, 108])))


def _unproposed_drafts() -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch())
    # Seq 12 is past the drafter's context limit: its row is the skipped drafter's zeros.
    tracker.drafted(sg.DrafterOutput(
        mtp_k=_MTP_K, vocab_size=_VOCAB, seq_ids=_ids(11, 12, 13, 14),
        draft_token_ids=_ids([201, 202, 203], [0, 0, 0], [207, 208, 209], [210, 211, 212]),
        num_proposed=_ids(3, 0, 3, 3)))
    tracker.schedule(_next_batch(
        draft_token_ids=_ids([201, 202, 203], [0, 0, 0], [207, 208, 209]),
        num_drafts=_ids(3, 3, 3)))


def _drafts_from_nowhere() -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch(  # the engine's first step: two prompts
        num_decode=0, num_tokens=10, seq_ids=_ids(13, 14), is_decode=np.array([False, False]),
        num_scheduled_tokens=_ids(5, 5), context_lens=_ids(5, 5),
        block_tables=_ids([5, -1], [6, -1]), token_ids=np.arange(100, 110, dtype=np.int32),
        draft_token_ids=np.zeros((0, _MTP_K), dtype=np.int32), num_drafts=_ids()))
    # Seq 15 was prefilled on another instance; its first decode here carries a row of
    # zeros as three real drafts, though nothing proposed or handed any over.
    tracker.schedule(scheduled_batch(
        seq_ids=_ids(13, 14, 15), is_decode=np.array([True, True, True]), num_tokens=12,
        num_scheduled_tokens=_ids(4, 4, 4), context_lens=_ids(9, 9, 20),
        block_tables=_ids([5, -1], [6, -1], [7, 8]),
        token_ids=np.arange(100, 112, dtype=np.int32),
        draft_token_ids=_ids([101, 102, 103], [105, 106, 107], [0, 0, 0]),
        num_drafts=_ids(0, 0, 3)))


def _placeholder_for_a_newcomer() -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch())
    tracker.schedule(_next_batch(
        seq_ids=_ids(11, 12, 15, 14), draft_placeholder=-1,
        draft_token_ids=_ids([101, 102, 103], [105, 106, 107], [-1, -1, -1])))


def _recomputed_with_a_placeholder() -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch())
    tracker.verified(verify_output())  # seq 12 (start 32) emitted 105, 555 at 33 and 34
    # Preempted, seq 12 is recomputed from position 0; position 34 holds the EOS (2)
    # placeholder its scheduler appended for a step whose output never arrived.
    history = np.arange(200, 235, dtype=np.int32)
    history[33:35] = (105, 2)
    tracker.schedule(scheduled_batch(
        num_decode=0, num_tokens=35, seq_ids=_ids(12), is_decode=np.array([False]),
        num_scheduled_tokens=_ids(35), context_lens=_ids(35), block_tables=_ids([2, 3, 4]),
        token_ids=history, draft_token_ids=np.zeros((0, _MTP_K), dtype=np.int32),
        num_drafts=np.zeros(0, dtype=np.int32)))


def _tracked(verify: sg.VerifyOutput | None = None,
             drafts: sg.DrafterOutput | None = None) -> None:
    tracker = StepTracker()
    tracker.schedule(scheduled_batch())
    if verify is not None:
        tracker.verified(verify)
    if drafts is not None:
        tracker.drafted(drafts)


def _atom_batch(**changes: Any) -> SimpleNamespace:
    """An object with the fields of ATOM's ScheduledBatch: three decode seqs, mtp_k 3."""
    fields: dict[str, Any] = {
        "req_ids": [11, 12, 13], "total_seqs_num_prefill": 0, "total_seqs_num_decode": 3,
        "context_lens": _ids(20, 36, 9), "num_rejected": _ids(0, 0, 0),
        "num_scheduled_tokens": _ids(4, 4, 4), "total_tokens_num": 12,
        "scheduled_tokens": np.arange(100, 112, dtype=np.int32),
        "scheduled_spec_decode_tokens": _ids([101, 102, 103], [105, 106, 107],
                                             [108, 108, 108]),
        "block_tables": [[0, 1], [2, 3, 4], [5]], "per_req_cache_groups": [],
        "num_spec_step": _MTP_K,
    }
    fields.update(changes)
    return SimpleNamespace(**fields)


def _atom_view(tracker: StepTracker | None = None, layout: str = "pr1771") -> AtomView:
    return AtomView(mtp_k=_MTP_K, vocab_size=_VOCAB, block_size=16, tracker=tracker,
                    layout=layout)


def _atom_mixed_phases() -> None:
    _atom_view()(_atom_batch(
        req_ids=[14, 11, 12, 13], total_seqs_num_prefill=1, context_lens=_ids(5, 20, 36, 9),
        num_rejected=_ids(0, 0, 0, 0), num_scheduled_tokens=_ids(5, 4, 4, 4),
        total_tokens_num=17, scheduled_tokens=np.arange(100, 117, dtype=np.int32),
        block_tables=[[6], [0, 1], [2, 3, 4], [5]]))


def _atom_new_before_deferred() -> None:
    view = _atom_view(StepTracker(), layout="pre-1771")
    view(_atom_batch())
    view(_atom_batch(req_ids=[15, 11, 12], context_lens=_ids(9, 24, 40),
                     block_tables=[[5], [0, 1], [2, 3, 4]]))


def _scheduler_output(**changes: Any) -> SimpleNamespace:
    """An object with the fields of vLLM's SchedulerOutput: two requests verifying drafts,
    one prefill chunk."""
    fields: dict[str, Any] = {
        "num_scheduled_tokens": {"req-a": 4, "req-b": 4, "req-c": 5},
        "scheduled_spec_decode_tokens": {"req-a": [101, 102, 103], "req-b": [105, 106, 107]},
        "total_num_scheduled_tokens": 13, "scheduled_new_reqs": [],
        "scheduled_cached_reqs": None,
    }
    fields.update(changes)
    return SimpleNamespace(**fields)


def _vllm_schedule(output: SimpleNamespace) -> None:
    VllmView(mtp_k=_MTP_K, vocab_size=_VOCAB).schedule(output)


def _mrv2_input_batch(**changes: Any) -> SimpleNamespace:
    """An object with the fields of vLLM Model Runner V2's InputBatch: req-a verifying
    three drafts, req-b a chunk of its prefill (MRV2 sorts decodes first)."""
    fields: dict[str, Any] = {
        "req_ids": ["req-a", "req-b"], "num_tokens": 9,
        "idx_mapping_np": np.array([5, 2]), "num_scheduled_tokens": _ids(4, 5),
        "num_draft_tokens_per_req": _ids(3, 0), "query_start_loc_np": _ids(0, 4, 9),
        "cu_num_logits_np": _ids(0, 4, 5), "logits_indices": np.array([0, 1, 2, 3, 8]),
        "input_ids": np.array([501, 502, 503, 504, 11, 12, 13, 14, 15]),
        "query_start_loc": _ids(0, 4, 9), "num_computed_tokens_np": _ids(20, 5),
        "prefill_len_np": _ids(17, 30)}
    fields.update(changes)
    return SimpleNamespace(**fields)


def _mrv2(batch: SimpleNamespace, *, sampled: Any = None, drafts: Any = None,
          num_speculative_tokens: int = _MTP_K) -> None:
    view = Mrv2View(mtp_k=_MTP_K, vocab_size=_VOCAB)
    checked = view.schedule(batch, max_num_reqs=8)
    if sampled is not None:
        view.verified(checked, sampled)
    if drafts is not None:
        view.drafted(checked, drafts, num_speculative_tokens=num_speculative_tokens)


def _mrv2_sampled(**changes: Any) -> SimpleNamespace:
    """MRV2's SamplerOutput for :func:`_mrv2_input_batch`: req-a accepted one draft, req-b
    (mid-prefill) sampled nothing; the columns past num_sampled are unset."""
    fields: dict[str, Any] = {
        "sampled_token_ids": np.array([[502, 77, 9999, 9999], [9999, 9999, 9999, 9999]]),
        "num_sampled": _ids(2, 0), "num_rejected": _ids(2, 0)}
    fields.update(changes)
    return SimpleNamespace(**fields)


def _sglang_reqs(*finished: bool) -> list[SimpleNamespace]:
    return [SimpleNamespace(rid=rid, finished=lambda f=f: f, is_chunked=0)
            for rid, f in zip(("req-a", "req-b"), finished or (False, False), strict=True)]


def _sglang_decode(**changes: Any) -> SimpleNamespace:
    """SGLang's decode ``ScheduleBatch`` on entry to ``forward_batch_generation``: req-a at
    length 5 and req-b at length 3, their ``EagleDraftInput`` rows from the draft extend."""
    spec = {"verified_id": np.array([31, 41], dtype=np.int32),
            "topk_index": np.array([[32], [42]]), "topk_p": np.ones((2, 1), np.float32),
            "hidden_states": np.zeros((2, 8), np.float32)}
    spec.update(changes)
    return SimpleNamespace(reqs=_sglang_reqs(), forward_mode=SimpleNamespace(name="DECODE"),
                           seq_lens=_ids(5, 3), seq_lens_cpu=_ids(5, 3),
                           req_pool_indices=_ids(1, 2), spec_info=SimpleNamespace(**spec))


def _sglang_verify_input(**changes: Any) -> SimpleNamespace:
    """The ``EagleVerifyInput`` that ``draft()`` returns for :func:`_sglang_decode`: three
    draft steps, one chain of four tokens per request."""
    fields: dict[str, Any] = {
        "draft_token": np.array([31, 32, 33, 34, 41, 42, 43, 44]),
        "positions": np.array([5, 6, 7, 8, 3, 4, 5, 6]),
        "retrive_index": np.array([[0, 1, 2, 3], [4, 5, 6, 7]]),
        "retrive_next_token": np.array([[1, 2, 3, -1], [1, 2, 3, -1]]),
        "retrive_next_sibling": np.full((2, 4), -1), "spec_steps": _MTP_K, "topk": 1,
        "draft_token_num": _MTP_K + 1}
    fields.update(changes)
    return SimpleNamespace(**fields)


def _sglang_verify_output(**changes: Any) -> SimpleNamespace:
    """The ``EagleVerifyOutput``: req-a accepts two drafts, req-b three."""
    nxt: dict[str, Any] = {"accept_length_cpu": [2, 3],
                           "verified_id": np.array([32, 33, 99, 42, 43, 44, 7], np.int32),
                           "hidden_states": np.zeros((7, 8), np.float32)}
    nxt.update(changes.pop("draft_input", {}))
    fields: dict[str, Any] = {"accept_length_per_req_cpu": [2, 3],
                              "verified_id": np.array([32, 33, 99, 42, 43, 44, 7], np.int32),
                              "draft_input": SimpleNamespace(**nxt)}
    fields.update(changes)
    return SimpleNamespace(**fields)


def _sglang_draft_extend(**changes: Any) -> SimpleNamespace:
    """The batch after ``forward_draft_extend_after_decode``: both requests re-fed their
    accepted tokens and bonus, their next chains starting from the bonus."""
    spec = {"positions": np.array([5, 6, 7, 3, 4, 5, 6]),
            "verified_id": np.array([99, 7], dtype=np.int32),
            "seq_lens_for_draft_extend_cpu": _ids(8, 7), "topk_index": np.array([[1], [2]])}
    spec.update(changes)
    return SimpleNamespace(reqs=_sglang_reqs(), spec_info=SimpleNamespace(**spec),
                           input_ids=np.array([32, 33, 99, 42, 43, 44, 7], np.int32))


def _sglang(*, decode: SimpleNamespace | None = None,
            verify_input: SimpleNamespace | None = None,
            verify_output: SimpleNamespace | None = None,
            extend: SimpleNamespace | None = None, previous: Any = None) -> None:
    """One SGLang decode step through a :class:`SglangView` (``previous``: the tokens the
    requests' prefill sampled, fed as the step before)."""
    view = SglangView(spec_steps=_MTP_K, vocab_size=_VOCAB, tracker=StepTracker())
    if previous is not None:
        prefill = SimpleNamespace(
            reqs=_sglang_reqs(), forward_mode=SimpleNamespace(name="EXTEND"),
            input_ids=np.arange(10, 18), extend_lens=[5, 3], prefix_lens=[0, 0],
            out_cache_loc=np.arange(1, 9))
        view.schedule(prefill)
        view.draft_prefill(prefill, np.array(previous))
    batch = decode or _sglang_decode()
    view.schedule(batch)
    view.drafted(batch, verify_input or _sglang_verify_input())
    verified = SimpleNamespace(reqs=_sglang_reqs(False, False))
    view.verified(verified, verify_input or _sglang_verify_input(),
                  verify_output or _sglang_verify_output(),
                  SimpleNamespace(out_cache_loc=np.arange(9, 17)))
    view.draft_extend(extend or _sglang_draft_extend())


def _ranks(rank: int = 3, **changes: Any) -> None:
    """Four data-parallel ranks at step 5 (rank 2 idle), with ``changes`` on ``rank``'s row."""
    steps = [RankStep(5, _MTP_K, 12, 12, False, 4, [0, 4, 8]),
             RankStep(5, _MTP_K, 8, 12, False, 4, [1, 5]),
             RankStep(5, _MTP_K, 4, 12, True, 4, []),
             RankStep(5, _MTP_K, 12, 12, False, 4, [3, 7, 11])]
    steps[rank] = dataclasses.replace(steps[rank], **changes)
    check_ranks(np.stack([step.row(id_slots=4) for step in steps]))


def _sglang_v2_entry(**changes: Any) -> SimpleNamespace:
    """An object with the fields of SGLang 0.5.23's ScheduleBatch at EAGLEWorkerV2's entry
    (inputs resolved): req-a and req-b decoding, their bonus tokens and first drafts
    relayed from their own pool rows."""
    spec: dict[str, Any] = {"future_indices": _ids(7, 3), "bonus_tokens": _ids(501, 601),
                            "topk_index": _ids([502], [602])}
    spec.update({k: v for k, v in changes.items() if k in spec})
    fields: dict[str, Any] = {
        "reqs": [SimpleNamespace(rid="req-a"), SimpleNamespace(rid="req-b")],
        "forward_mode": SimpleNamespace(name="DECODE", is_extend=lambda: False),
        "seq_lens": _ids(20, 9), "seq_lens_cpu": _ids(20, 9), "req_pool_indices": _ids(7, 3),
        "spec_info": SimpleNamespace(**spec)}
    fields.update({k: v for k, v in changes.items() if k not in spec})
    return SimpleNamespace(**fields)


def _sglang_v2_verify_input(**changes: Any) -> SimpleNamespace:
    """The EagleVerifyInput draft() builds for :func:`_sglang_v2_entry`: one chain a row."""
    fields: dict[str, Any] = {
        "spec_steps": 3, "topk": 1, "draft_token_num": 4,
        "draft_token": _ids(501, 502, 503, 504, 601, 602, 603, 604),
        "positions": _ids(20, 21, 22, 23, 9, 10, 11, 12),
        "retrieve_index": _ids([0, 1, 2, 3], [4, 5, 6, 7]),
        "retrieve_next_token": _ids([1, 2, 3, -1], [1, 2, 3, -1]),
        "retrieve_next_sibling": _ids([-1] * 4, [-1] * 4)}
    fields.update(changes)
    return SimpleNamespace(**fields)


def _sglang_v2_result(**changes: Any) -> SimpleNamespace:
    """run_eagle_verify's result for :func:`_sglang_v2_verify_input`: req-a accepted two
    drafts and its bonus token 77, req-b no draft and its bonus token 88."""
    fields: dict[str, Any] = {
        "next_token_ids": _ids(502, 503, 77, 0, 88, 0, 0, 0), "accept_lens": _ids(3, 1),
        "accept_index": _ids([0, 1, 2, -1], [4, -1, -1, -1]), "new_seq_lens": _ids(23, 10),
        "next_draft_input": SimpleNamespace(bonus_tokens=_ids(77, 88))}
    fields.update(changes)
    return SimpleNamespace(**fields)


def _sglang_v2(entry: SimpleNamespace, verify_input: SimpleNamespace | None = None,
            result: SimpleNamespace | None = None) -> None:
    view = SglangV2View(spec_steps=3, vocab_size=_VOCAB)
    step = view.schedule(entry)
    if verify_input is not None:
        view.verify_input(step, verify_input)
    if result is not None:
        view.verified(step, result)

def _ranks_with_counts(rank: int, stale: list[int]) -> None:
    """The four ranks, each carrying its copy of the token counts; ``rank``'s is ``stale``."""
    steps = [RankStep(5, _MTP_K, 12, 12, False, 4, [0, 4, 8]),
             RankStep(5, _MTP_K, 8, 12, False, 4, [1, 5]),
             RankStep(5, _MTP_K, 4, 12, True, 4, []),
             RankStep(5, _MTP_K, 12, 12, False, 4, [3, 7, 11])]
    copies = [[12, 8, 4, 12]] * 4
    copies[rank] = stale
    check_ranks(np.stack([dataclasses.replace(step, tokens_across_ranks=copy).row(id_slots=4)
                          for step, copy in zip(steps, copies, strict=True)]))


_ADAPTER_EXAMPLES = (
    Example("SG601", "seq 12's context not rolled back for the two drafts it had rejected "
            "(checked by a `StepTracker` across two steps)", _resumed_elsewhere),
    Example("SG602", "the drafts of seqs 11 and 12 swapped on the way into the next step "
            "(`StepTracker`)", _swapped_drafts),
    Example("SG603", "a `-1` placeholder row for seq 15, which was not in the previous "
            "forward, so nothing will overwrite it (`StepTracker`)",
            _placeholder_for_a_newcomer),
    Example("SG604", "verify rows in another order than the batch (`StepTracker`)",
            lambda: _tracked(verify=verify_output(seq_ids=_ids(12, 11, 13)))),
    Example("SG605", "seq 13 accepting a draft from its placeholder row (`StepTracker`)",
            lambda: _tracked(verify=verify_output(
                token_ids=_ids([101, 102, 103, 104], [105, 555, -1, -1], [777, 778, -1, -1]),
                num_accepted=_ids(3, 1, 1)))),
    Example("SG606", "drafter rows only for the decode seqs of a mixed step (`StepTracker`)",
            lambda: _tracked(drafts=drafter_output())),
    Example("SG607", "seq 13 verified with none of the three drafts proposed for it the step "
            "before: its host row was still empty after its prefill (`StepTracker`)",
            _proposal_left_behind),
    Example("SG608", "seq 12 recomputed after a preemption with an EOS placeholder where "
            "the verifier had emitted a token (`StepTracker`)", _recomputed_with_a_placeholder),
    Example("SG660", "seq 12 scheduled the zeros of a drafter that proposed nothing for "
            "it as three real drafts (`StepTracker`)", _unproposed_drafts),
    Example("SG661", "seq 15, prefilled on another instance, at its first decode here with "
            "a row of zeros scheduled as three real drafts (`StepTracker`)",
            _drafts_from_nowhere),
    Example("SG611", "an ATOM batch with a prefill chunk ahead of three decode seqs "
            "(`AtomView`)", _atom_mixed_phases),
    Example("SG612", "a new seq placed ahead of the deferred ones in an ATOM decode batch "
            "(`AtomView(layout=\"pre-1771\")` with a `StepTracker`)", _atom_new_before_deferred),
    Example("SG613", "an ATOM decode batch with num_spec_step 2 for a drafter with mtp_k 3 "
            "(`AtomView`)", lambda: _atom_view()(_atom_batch(num_spec_step=2))),
    Example("SG621", "a vLLM request with three drafts scheduled three tokens (`VllmView`)",
            lambda: _vllm_schedule(_scheduler_output(
                num_scheduled_tokens={"req-a": 4, "req-b": 3, "req-c": 5},
                total_num_scheduled_tokens=12))),
    Example("SG622", "vLLM's total_num_scheduled_tokens left stale after a count changed "
            "(`VllmView`)",
            lambda: _vllm_schedule(_scheduler_output(total_num_scheduled_tokens=12))),
    Example("SG623", "an MRV2 InputBatch whose query_start_loc gives req-b 5 tokens of 6 "
            "scheduled (`Mrv2View.schedule`)",
            lambda: _mrv2(_mrv2_input_batch(num_scheduled_tokens=_ids(4, 6), num_tokens=10))),
    Example("SG624", "an MRV2 cu_num_logits that gives req-a three logits rows for three "
            "drafts (`Mrv2View.schedule`)",
            lambda: _mrv2(_mrv2_input_batch(cu_num_logits_np=_ids(0, 3, 5)))),
    Example("SG625", "MRV2's logits row for req-b one token before the end of its span "
            "(`Mrv2View.schedule`)",
            lambda: _mrv2(_mrv2_input_batch(logits_indices=np.array([0, 1, 2, 3, 7])))),
    Example("SG626", "req-a and req-b mapped to one request-state row "
            "(`Mrv2View.schedule`)",
            lambda: _mrv2(_mrv2_input_batch(idx_mapping_np=np.array([5, 5])))),
    Example("SG627", "req-a scheduled four draft slots for a three-step speculator "
            "(`Mrv2View.schedule`)",
            lambda: _mrv2(_mrv2_input_batch(
                num_draft_tokens_per_req=_ids(4, 0), num_scheduled_tokens=_ids(5, 4),
                cu_num_logits_np=_ids(0, 5, 6), logits_indices=np.array([0, 1, 2, 3, 4, 8]),
                query_start_loc_np=_ids(0, 5, 9), query_start_loc=_ids(0, 5, 9)))),
    Example("SG628", "a -1 copied from req-a's device draft row into MRV2's input_ids "
            "(`Mrv2View.schedule`)",
            lambda: _mrv2(_mrv2_input_batch(
                input_ids=np.array([501, 502, -1, -1, 11, 12, 13, 14, 15])))),
    Example("SG629", "req-b, mid-prefill, sampling a token (`Mrv2View.verified`)",
            lambda: _mrv2(_mrv2_input_batch(), sampled=_mrv2_sampled(
                num_sampled=_ids(2, 1)))),
    Example("SG630", "req-a's accepted draft sampled as -1 (`Mrv2View.verified`)",
            lambda: _mrv2(_mrv2_input_batch(), sampled=_mrv2_sampled(
                sampled_token_ids=np.array([[-1, 77, 9999, 9999], [9999] * 4])))),
    Example("SG631", "a -1 among the K_t=2 drafts MRV2 stores for req-b "
            "(`Mrv2View.drafted`)",
            lambda: _mrv2(_mrv2_input_batch(), num_speculative_tokens=2,
                          drafts=np.array([[7, 8, -1], [9, -1, -1]]))),
    Example("SG640", "SGLang's draft input keeping a third row, of a retracted request, "
            "for a batch of two (`SglangView.schedule`)",
            lambda: _sglang(decode=_sglang_decode(
                verified_id=np.array([31, 41, 51], dtype=np.int32)))),
    Example("SG641", "req-b's tree row pointing at req-a's draft tokens "
            "(`SglangView.drafted`)",
            lambda: _sglang(verify_input=_sglang_verify_input(
                retrive_index=np.array([[0, 1, 2, 3], [0, 1, 2, 3]])))),
    Example("SG642", "req-b's chain placed one position past its length "
            "(`SglangView.drafted`)",
            lambda: _sglang(verify_input=_sglang_verify_input(
                positions=np.array([5, 6, 7, 8, 4, 5, 6, 7])))),
    Example("SG643", "req-b's verify row starting from req-a's verified id "
            "(`SglangView.drafted`)",
            lambda: _sglang(verify_input=_sglang_verify_input(
                draft_token=np.array([31, 32, 33, 34, 31, 42, 43, 44])))),
    Example("SG644", "req-b's accept length counting the bonus token, v2's convention "
            "in the v1 worker (`SglangView.verified`)",
            lambda: _sglang(verify_output=_sglang_verify_output(
                accept_length_per_req_cpu=[2, 4]))),
    Example("SG645", "the next draft input holding the two requests' rows in the "
            "other order (`SglangView.verified`)",
            lambda: _sglang(verify_output=_sglang_verify_output(
                draft_input={"accept_length_cpu": [3, 2]}))),
    Example("SG646", "req-b's accepted tokens re-fed one position late at draft extend "
            "(`SglangView.draft_extend`)",
            lambda: _sglang(extend=_sglang_draft_extend(
                positions=np.array([5, 6, 7, 4, 5, 6, 7])))),
    Example("SG647", "req-a handed req-b's draft row after a filter that kept the first "
            "rows (`SglangView.schedule`, the step after the prefill)",
            lambda: _sglang(previous=[41, 31])),
    Example("SG650", "req-b's relay key left at req-a's pool row after a filter "
            "(`SglangV2View.schedule`)",
            lambda: _sglang_v2(_sglang_v2_entry(future_indices=_ids(7, 7)))),
    Example("SG651", "an overlap placeholder (-3) reaching SGLang's worker as req-b's bonus "
            "token (`SglangV2View.schedule`)",
            lambda: _sglang_v2(_sglang_v2_entry(bonus_tokens=_ids(501, -3)))),
    Example("SG652", "req-a's verify tree with a sibling: not the one chain of topk 1 "
            "(`SglangV2View.verify_input`)",
            lambda: _sglang_v2(_sglang_v2_entry(), _sglang_v2_verify_input(
                retrieve_next_sibling=_ids([-1, 2, -1, -1], [-1] * 4)))),
    Example("SG653", "req-b's verify positions built from a stale seq_len "
            "(`SglangV2View.verify_input`)",
            lambda: _sglang_v2(_sglang_v2_entry(), _sglang_v2_verify_input(
                positions=_ids(20, 21, 22, 23, 8, 9, 10, 11)))),
    Example("SG654", "req-b's verify row started from req-a's bonus token "
            "(`SglangV2View.verify_input`)",
            lambda: _sglang_v2(_sglang_v2_entry(), _sglang_v2_verify_input(
                draft_token=_ids(501, 502, 503, 504, 501, 602, 603, 604)))),
    Example("SG655", "req-b's accept_len 0 in v1's convention, without the bonus token "
            "(`SglangV2View.verified`)",
            lambda: _sglang_v2(_sglang_v2_entry(), _sglang_v2_verify_input(), _sglang_v2_result(
                accept_lens=_ids(3, 0), accept_index=_ids([0, 1, 2, -1], [-1] * 4),
                new_seq_lens=_ids(23, 9)))),
    Example("SG656", "req-b's accept_index pointing at req-a's first verify slot "
            "(`SglangV2View.verified`)",
            lambda: _sglang_v2(_sglang_v2_entry(), _sglang_v2_verify_input(), _sglang_v2_result(
                accept_index=_ids([0, 1, 2, -1], [0, -1, -1, -1])))),
    Example("SG657", "req-a's new_seq_len advanced by its drafts only "
            "(`SglangV2View.verified`)",
            lambda: _sglang_v2(_sglang_v2_entry(), _sglang_v2_verify_input(), _sglang_v2_result(
                new_seq_lens=_ids(22, 10)))),
    Example("SG658", "req-b's bonus token read with the stride of another row "
            "(`SglangV2View.verified`)",
            lambda: _sglang_v2(_sglang_v2_entry(), _sglang_v2_verify_input(), _sglang_v2_result(
                next_draft_input=SimpleNamespace(bonus_tokens=_ids(77, 0))))),
    Example("SG701", "rank 1's own batch broke SG101 in the previous step (`check_ranks`)",
            lambda: _ranks(1, stopped=101)),
    Example("SG702", "idle rank 2 skipped a step without joining its collectives "
            "(`check_ranks`)", lambda: _ranks(2, step=6)),
    Example("SG703", "rank 3 loaded a draft config with one token fewer (`check_ranks`)",
            lambda: _ranks(mtp_k=2, dummy_tokens=3)),
    Example("SG704", "rank 1 pads to its own token count instead of the largest "
            "(`check_ranks`)", lambda: _ranks(1, padded_tokens=8)),
    Example("SG705", "idle rank 2 runs a one-token dummy step, the others a decode span "
            "(`check_ranks`)", lambda: _ranks(2, num_tokens=1, dummy_tokens=1)),
    Example("SG706", "rank 3 numbers its requests from 0, as a single engine does "
            "(`check_ranks`, full depth)", lambda: _ranks(seq_ids=[0, 1, 2])),
    Example("SG710", "rank 3 sizes its step from the token counts of its previous step "
            "(`check_ranks`)", lambda: _ranks_with_counts(3, [12, 8, 12, 12])),
)

#: The broken object of every rule of the catalogue that one can break on its own, by code.
EXAMPLES: dict[str, Example] = {
    **contract_examples.EXAMPLES,
    **{example.code: example for example in _ADAPTER_EXAMPLES},
}


def _atom_adapter_1444() -> None:
    # ATOM's own batch before the fix, read by the adapter: seq 13 has no draft row.
    _atom_view()(_atom_batch(scheduled_spec_decode_tokens=_ids([101, 102, 103],
                                                               [105, 106, 107])))


def _vllm_adapter_26231() -> None:
    # What propose() would embed: request "req-c" is mid chunked prefill, and padded
    # speculation gave it -1 as its next token.
    view = VllmView(mtp_k=_MTP_K, vocab_size=129280)
    step = view.schedule(_scheduler_output())
    view.drafter_input(
        step, target_token_ids=np.arange(700, 713, dtype=np.int64),
        target_positions=np.arange(13, dtype=np.int64),
        next_token_ids=np.array([5001, 5002, -1], dtype=np.int64),
        last_token_indices=np.array([3, 7, 12], dtype=np.int64),
        common_attn_metadata=SimpleNamespace(query_start_loc=np.array([0, 4, 8, 13])))


#: The two crashes that motivated specguard, rebuilt as the objects that carry them, and
#: as the engine adapters meet them in ATOM's and vLLM's own objects.
STORIES: dict[str, Example] = {
    "atom-adapter": Example("SG101", "ATOM's compacted scheduled_spec_decode_tokens, read by "
                            "AtomView", _atom_adapter_1444),
    "vllm-adapter": Example("SG301", "vLLM's propose() inputs with a -1 next token, read by "
                            "VllmView", _vllm_adapter_26231),
    **contract_examples.STORIES,
}


def example_violation(code: str, depth: str = "full") -> ContractViolation:
    """Build the broken object of ``code`` under strict checking at ``depth`` (full unless
    told); return its error."""
    return violation_of(EXAMPLES[code], depth)


def example_message(code: str) -> str:
    """The message the broken object of ``code`` raises, exactly as a user reads it."""
    return str(example_violation(code))
