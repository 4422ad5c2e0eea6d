"""vLLM Model Runner V2's own traffic (vLLM 0.33.0's scheduler, MRV2's GPUModelRunner
methods and triton kernels, recorded on CPU), replayed through ``Mrv2View``: valid
traffic gives no violation at full depth, buggy traffic the right rule naming the
request and its batch position."""

from __future__ import annotations

import contextlib
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from vllm_traffic import scheduler_output

from specguard import contracts
from specguard.adapters import Mrv2View
from specguard.adapters.corpus import Corpus, corpus_files, read_corpus

CORPUS = Path(__file__).parent / "corpus" / "vllm-mrv2"
FILES = sorted(corpus_files(CORPUS))


@cache
def _corpus(scenario: str) -> Corpus:
    return read_corpus(CORPUS / "0.33.0" / f"{scenario}.json")


def _setting(corpus: Corpus, name: str) -> int:
    """An integer of the recorded engine config."""
    value = corpus.config[name]
    assert isinstance(value, int), (name, value)
    return value


def _view(corpus: Corpus) -> Mrv2View:
    return Mrv2View(mtp_k=_setting(corpus, "mtp_k"), vocab_size=_setting(corpus, "vocab_size"))


def _replay(corpus: Corpus, change: Any = None, *,
            depth: str = "full") -> list[contracts.Violation]:
    """Every violation the view reports, strict and at full depth; ``change(event,
    fields)`` may alter a recorded event first."""
    view = _view(corpus)
    batch = None
    found: list[contracts.Violation] = []
    with contracts.checking(mode="strict", depth=depth):
        for event in corpus.events:
            fields = event.values()
            if change is not None:
                change(event.event, fields)
            try:
                if event.event == "schedule":
                    view.scheduler_view.schedule(scheduler_output(fields),
                                                 req_ids=fields["req_ids"])
                elif event.event == "input_batch":
                    batch = view.schedule(
                        SimpleNamespace(**fields), max_num_reqs=_setting(corpus, "max_num_reqs"))
                elif event.event == "sampled" and batch is not None:
                    view.verified(batch, SimpleNamespace(**fields))
                elif event.event == "drafted" and batch is not None:
                    view.drafted(batch, fields["draft_tokens"],
                                 num_speculative_tokens=fields["num_speculative_tokens"])
            except contracts.ContractViolation as error:
                found.extend(error.violations)
                break
    return found


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORPUS)) for p in FILES])
def test_recorded_mrv2_traffic_at_the_default_depth_reports_nothing_unexpected(path):
    """At the default depth valid traffic replays with no violation; buggy traffic reports
    only rules its recording expects."""
    corpus = read_corpus(path)
    found = _replay(corpus, depth="essential")
    if corpus.valid:
        assert [v.format() for v in found] == []
    else:
        assert {v.code for v in found} <= {e.code for e in corpus.expect}


def _events(corpus: Corpus, name: str) -> list[dict[str, Any]]:
    return [event.values() for event in corpus.events if event.event == name]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORPUS)) for p in FILES])
def test_recorded_model_runner_v2_traffic_replays_as_expected(path):
    """Valid MRV2 runs replay with no violation at full depth; buggy ones report the
    expected rule, request and batch position first."""
    corpus = read_corpus(path)
    found = _replay(corpus)
    if corpus.valid:
        assert found == []
    else:
        first = found[0]
        expected = corpus.expect[0]
        assert (first.code, first.position) == (expected.code, expected.position)
        assert f"request {expected.seq_id!r}" in first.reason


def test_corpus_holds_the_model_runner_v2_scenarios():
    """Steady decode, chunked prefill, a mixed batch, prefix-cache hits, async scheduling,
    dynamic K and the over-scheduled drafts bug are recorded for vLLM 0.33.0."""
    assert {p.stem for p in FILES} == {
        "steady-decode", "chunked-prefill", "mixed-batch", "prefix-cache-hit",
        "async-scheduling", "dynamic-k", "over-scheduled-drafts"}
    assert all(read_corpus(p).engine == "vllm-mrv2" for p in FILES)


def test_mrv2_scheduler_lists_only_minus_one_drafts_the_real_ones_stay_on_the_device():
    """MRV2 hands the scheduler [-1] * K per request; the drafts reach input_ids from the
    device row, so the span tails hold real ids while the scheduler's lists hold -1."""
    corpus = _corpus("steady-decode")
    listed = [d for s in _events(corpus, "schedule")
              for d in s["scheduled_spec_decode_tokens"].values()]
    assert listed and all(set(d) == {-1} for d in listed)
    batches = [b for b in _events(corpus, "input_batch") if b["num_draft_tokens"] > 0]
    assert batches and all(int(b["input_ids"].min()) >= 0 for b in batches)


def test_mrv2_full_prefix_hit_draft_slots_come_from_the_zeroed_device_row():
    """The fully cached request's [-1] * k draft slots are filled from its zeroed device
    row (ids 0, legal) and rejected as placeholders: no violation."""
    corpus = _corpus("prefix-cache-hit")
    hit = next(b for b in _events(corpus, "input_batch")
               if b["is_prefilling_np"].any() and b["num_draft_tokens"] > 0)
    row = int(np.flatnonzero(hit["num_draft_tokens_per_req"])[0])
    end = int(hit["query_start_loc_np"][row + 1])
    drafts = int(hit["num_draft_tokens_per_req"][row])
    assert hit["input_ids"][end - drafts:end].tolist() == [0] * drafts
    assert _replay(corpus) == []


def test_mrv2_async_host_mirror_runs_ahead_of_the_device_positions():
    """Under async scheduling MRV2's host num_computed_tokens is an upper bound (drafts
    counted before the rejections come back) while positions come from the device
    count: no rule reads positions from the host mirror, and the run is clean."""
    corpus = _corpus("async-scheduling")
    ahead = [b for b in _events(corpus, "input_batch")
             if (b["num_computed_tokens_np"] > b["positions"][b["query_start_loc_np"][:-1]]
                 ).any()]
    assert ahead
    assert _replay(corpus) == []


def test_mrv2_dynamic_k_minus_one_columns_past_k_t_are_legal():
    """Under dynamic K the device rows hold -1 past K_t; the next step schedules K_t drafts,
    so no -1 is copied into input_ids and the replay is clean."""
    corpus = _corpus("dynamic-k")
    narrow = [d for d in _events(corpus, "drafted") if 0 < d["num_speculative_tokens"] < 3]
    assert narrow and all((d["draft_tokens"][:, d["num_speculative_tokens"]:] == -1).all()
                          for d in narrow)
    assert _replay(corpus) == []


def test_mrv2_sampled_rows_past_num_sampled_are_never_read():
    """MRV2's rejection rows are new_empty, not -1 padded: a stale id past num_sampled is
    not a violation, one inside is SG630."""
    corpus = _corpus("steady-decode")

    def stale_tail(event: str, fields: dict[str, Any]) -> None:
        if event == "sampled":
            fields["sampled_token_ids"][fields["sampled_token_ids"] == 777] = -5

    assert _replay(corpus, stale_tail) == []

    def bad_first(event: str, fields: dict[str, Any]) -> None:
        if event == "sampled" and fields["step"] == 1:
            fields["sampled_token_ids"][1, 0] = 1000

    (violation,) = _replay(corpus, bad_first)
    assert violation.code == "SG630" and violation.position == 1
    assert violation.reason == "request 'r1': column 0 is 1000"
    assert violation.expected == "0 <= id < vocab_size=1000"


def test_mrv2_minus_one_copied_into_input_ids_is_sg628():
    """The over-scheduled request's -1 draft slots reach input_ids through MRV2's own
    combine kernel: SG628 names the request, its position and the token."""
    (violation,) = _replay(_corpus("over-scheduled-drafts"))
    assert (violation.code, violation.position, violation.token) == ("SG628", 0, 2)
    assert violation.reason == "request 'r1': input id is -1"
    assert violation.expected == "0 <= id < vocab_size=1000"


def test_mrv2_minus_one_in_input_ids_passes_at_metadata_depth():
    """Metadata depth reads no values: the same traffic passes (SG628 runs from the
    essential depth on, the default)."""
    corpus = _corpus("over-scheduled-drafts")
    batch = next(b for b in _events(corpus, "input_batch") if -1 in b["input_ids"].tolist())
    view = _view(corpus)
    with contracts.checking(mode="strict", depth="metadata"):
        view.schedule(SimpleNamespace(**batch))
    with contracts.checking(mode="strict", depth="essential"), \
            pytest.raises(contracts.ContractViolation, match="SG628"):
        view.schedule(SimpleNamespace(**batch))


def _mixed_step(change: Any, mtp_k: int = 3) -> list[contracts.Violation]:
    """The violations of the mixed step (r0 verifying 3 drafts, r2 and r1 prefilling)
    after ``change``."""
    corpus = _corpus("mixed-batch")
    batch = next(b for b in _events(corpus, "input_batch") if len(b["req_ids"]) == 3
                 and b["is_prefilling_np"].any())
    assert batch["req_ids"] == ["r0", "r2", "r1"]
    change(batch)
    view = Mrv2View(mtp_k=mtp_k, vocab_size=1000)
    with contracts.checking(mode="strict", depth="full"):
        try:
            view.schedule(SimpleNamespace(**batch), max_num_reqs=8)
        except contracts.ContractViolation as error:
            return list(error.violations)
    return []


def test_mrv2_wrong_cu_num_logits_is_sg624():
    """A cu_num_logits that gives the first request one row too many: SG624 at that
    request."""
    def shift(batch: dict[str, Any]) -> None:
        batch["cu_num_logits_np"][1:] += 1
        batch["logits_indices"] = np.concatenate([batch["logits_indices"][:1],
                                                  batch["logits_indices"]])

    (violation,) = _mixed_step(shift)
    assert (violation.code, violation.position) == ("SG624", 0)
    assert violation.reason == "request 'r0': 5 logits rows for 3 drafts"
    assert violation.expected == "1 + 3 rows"


def test_mrv2_logits_row_off_the_span_tail_is_sg625():
    """A logits row one token early reads the wrong hidden state: SG625 names the request."""
    def early(batch: dict[str, Any]) -> None:
        batch["logits_indices"][-1] -= 1

    (violation,) = _mixed_step(early)
    assert (violation.code, violation.position) == ("SG625", 2)
    assert violation.reason == "request 'r1': logits row 5 reads token 16"
    assert violation.expected == "token 17"


def test_mrv2_two_positions_on_one_request_state_row_is_sg626():
    """Two batch positions mapped to one request-state row: SG626 at the second."""
    def shared(batch: dict[str, Any]) -> None:
        batch["idx_mapping_np"][1] = batch["idx_mapping_np"][0]

    (violation,) = _mixed_step(shared)
    assert (violation.code, violation.position) == ("SG626", 1)
    assert violation.reason == "request 'r2': request-state row 7 is another position's row too"


def test_mrv2_more_drafts_than_the_device_row_is_sg627():
    """Three draft slots for a speculator of two steps: SG627 at that request."""
    (violation,) = _mixed_step(lambda batch: None, mtp_k=2)
    assert (violation.code, violation.position) == ("SG627", 0)
    assert violation.reason == "request 'r0': 3 draft slots"


def test_mrv2_span_that_disagrees_with_its_count_is_sg623():
    """A count one token above its span in query_start_loc: SG623 at that request."""
    def longer(batch: dict[str, Any]) -> None:
        batch["num_scheduled_tokens"][1] += 1

    (violation,) = _mixed_step(longer)
    assert (violation.code, violation.position) == ("SG623", 1)
    assert violation.reason == "request 'r2': span of 5 tokens for 6 scheduled"


def test_mrv2_sampling_from_a_prefill_chunk_is_sg629():
    """A request in the middle of its prefill that samples a token: SG629."""
    corpus = _corpus("chunked-prefill")

    def sample_chunk(event: str, fields: dict[str, Any]) -> None:
        if event == "sampled":
            fields["num_sampled"][fields["num_sampled"] == 0] = 1

    (violation,) = _replay(corpus, sample_chunk)
    assert violation.code == "SG629"
    assert violation.reason == "request 'long': 1 tokens sampled from 1 logits rows"
    assert violation.expected == "0 (prefill goes on)"


def test_mrv2_minus_one_inside_k_t_is_sg631():
    """A -1 among the first K_t drafts the next step will copy: SG631."""
    corpus = _corpus("steady-decode")

    def hole(event: str, fields: dict[str, Any]) -> None:
        if event == "drafted" and fields["step"] == 2:
            fields["draft_tokens"][0, 1] = -1

    (violation,) = _replay(corpus, hole)
    assert (violation.code, violation.position) == ("SG631", 0)


@pytest.mark.parametrize("width", [4, -1, 10**6, True, 2.5])
@pytest.mark.parametrize("depth", ["metadata", "essential", "full"])
def test_mrv2_an_impossible_k_t_is_sg102_not_clamped(width, depth):
    """K_t outside [0, mtp_k] says nothing of which columns the next step reads: a
    violation at every depth (with K_t=-1, a -1 draft in column 0 went unchecked)."""
    corpus = _corpus("steady-decode")
    mtp_k = _setting(corpus, "mtp_k")
    view = _view(corpus)
    batch = view.schedule(SimpleNamespace(**_first("steady-decode", "input_batch")),
                          max_num_reqs=_setting(corpus, "max_num_reqs"))
    drafts = np.array(_first("steady-decode", "drafted")["draft_tokens"])
    drafts[0, 0] = -1
    with contracts.checking(mode="strict", depth=depth), \
            pytest.raises(contracts.ContractViolation) as raised:
        view.drafted(batch, drafts, num_speculative_tokens=width)
    (violation,) = raised.value.violations
    assert violation.code == "SG102"
    assert violation.reason == (f"num_speculative_tokens={width!r} is not a count in "
                                f"[0, mtp_k={mtp_k}]")
    with contracts.checking(mode="strict", depth=depth):  # the same drafts, a real K_t: clean
        view.drafted(batch, np.array(_first("steady-decode", "drafted")["draft_tokens"]),
                     num_speculative_tokens=mtp_k)


def test_mrv2_device_input_ids_give_a_deferred_verdict(monkeypatch):
    """On a device the ids and logits rows are compared there and read at the next sync
    point: building the object raises nothing, flushing reports SG628."""
    from specguard.contracts._core import _values

    monkeypatch.setattr(_values, "HOST_DEVICE_TYPES", set())
    corpus = _corpus("over-scheduled-drafts")
    batch = next(b for b in _events(corpus, "input_batch") if -1 in b["input_ids"].tolist())
    for name in ("input_ids", "logits_indices", "query_start_loc"):
        batch[name] = torch.from_numpy(batch[name])
    with contracts.checking(mode="strict", depth="essential", device_values="deferred"):
        _view(corpus).schedule(SimpleNamespace(**batch))
        assert contracts.pending_deferred() == 2  # SG628 on the ids, SG625 on the rows
        with pytest.raises(contracts.DeferredViolation, match="SG628") as caught:
            contracts.flush_deferred()
    assert [v.code for v in caught.value.violations] == ["SG628"]


def test_mrv2_input_batch_without_its_fields_is_a_contract_violation():
    """An object that is not an InputBatch is reported by rule, not as a foreign error."""
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation):
        Mrv2View(mtp_k=2, vocab_size=1000).schedule(SimpleNamespace())


_DEVICE_FIELDS = ("input_ids", "logits_indices", "query_start_loc", "sampled_token_ids",
                  "num_sampled", "num_rejected", "draft_tokens")


@pytest.mark.parametrize("scenario, codes", [("mixed-batch", []), ("chunked-prefill", []),
                                             ("over-scheduled-drafts", ["SG628"])])
def test_mrv2_tensors_on_a_device_are_checked_as_deferred_verdicts_at_full_depth(
        monkeypatch, scenario, codes):
    """The recorded runs with MRV2's device tensors as tensors on a device: every value
    rule runs there without raising, and the verdicts read at the sync point are the
    host replay's."""
    from specguard.contracts._core import _values

    monkeypatch.setattr(_values, "HOST_DEVICE_TYPES", set())

    def on_device(event: str, fields: dict[str, Any]) -> None:
        for name in _DEVICE_FIELDS:
            if isinstance(fields.get(name), np.ndarray):
                fields[name] = torch.from_numpy(fields[name])

    with contracts.checking(device_values="deferred"):
        assert _replay(_corpus(scenario), on_device) == []
        assert contracts.pending_deferred() > 0
        try:
            contracts.flush_deferred()
            found = []
        except contracts.DeferredViolation as error:
            found = [v.code for v in error.violations]
    assert found[:1] == codes


def test_mrv2_checks_off_validate_nothing_and_copy_nothing(monkeypatch):
    """Mode off: the over-scheduled run replays without a violation, and the host arrays
    that only full-depth rules compare are never rebuilt or copied."""
    from specguard.adapters.engines.vllm.mrv2 import view as mrv2_view

    def refuse(*args: Any) -> None:
        raise AssertionError("built with checks off")

    monkeypatch.setattr(mrv2_view, "_tail_rows", refuse)
    monkeypatch.setattr(mrv2_view, "like", refuse)
    corpus = _corpus("over-scheduled-drafts")
    view = _view(corpus)
    with contracts.checking(mode="off", depth="full"):
        batches = [view.schedule(SimpleNamespace(**batch))
                   for batch in _events(corpus, "input_batch")]
        checked = batches[-1]
        for sampled in _events(corpus, "sampled")[-1:]:
            view.verified(checked, SimpleNamespace(**sampled))


_HOSTILE = [None, "text", 3.5, -7, 10**30, True, [], [[]], [["a"]], {"a": 1}, object(),
            np.zeros((2, 2)), np.zeros(0), np.array(["a", "b"]), np.full(3, -1, np.int32),
            np.full(3, 2**40, np.int64), np.full(3, np.nan), torch.zeros((3, 2))]


def _first(scenario: str, name: str) -> dict[str, Any]:
    return dict(_events(_corpus(scenario), name)[0])


@given(field=st.sampled_from(sorted(_first("mixed-batch", "input_batch"))),
       value=st.sampled_from(_HOSTILE), depth=st.sampled_from(["metadata", "full"]))
def test_mrv2_hostile_input_batch_fields_are_accepted_or_violations(field, value, depth):
    """Any field of a recorded InputBatch replaced by a hostile value is accepted or a
    ContractViolation at every depth, never a foreign exception."""
    fields = _first("mixed-batch", "input_batch") | {field: value}
    view = Mrv2View(mtp_k=2, vocab_size=1000)
    with contracts.checking(mode="strict", depth=depth, collect="all"):
        try:
            batch = view.schedule(SimpleNamespace(**fields), max_num_reqs=8)
        except contracts.ContractViolation:
            return
        # The step's later hand-overs, recorded clean, against what the batch became.
        sampled, drafted = _first("mixed-batch", "sampled"), _first("mixed-batch", "drafted")
        for call in (lambda: view.verified(batch, SimpleNamespace(**sampled)),
                     lambda: view.drafted(
                         batch, drafted["draft_tokens"],
                         num_speculative_tokens=drafted["num_speculative_tokens"])):
            with contextlib.suppress(contracts.ContractViolation):
                call()


@given(field=st.sampled_from(["sampled_token_ids", "num_sampled", "num_rejected"]),
       value=st.sampled_from(_HOSTILE))
def test_mrv2_hostile_sampler_outputs_are_accepted_or_violations(field, value):
    """A SamplerOutput field replaced by a hostile value is accepted or a violation."""
    corpus = _corpus("mixed-batch")
    view = _view(corpus)
    with contracts.checking(mode="strict", depth="full", collect="all"):
        batch = view.schedule(SimpleNamespace(**_first("mixed-batch", "input_batch")),
                              max_num_reqs=_setting(corpus, "max_num_reqs"))
        with contextlib.suppress(contracts.ContractViolation):
            view.verified(batch, SimpleNamespace(**(_first("mixed-batch", "sampled")
                                                         | {field: value})))


@given(value=st.sampled_from(_HOSTILE), width=st.sampled_from([None, -1, 0, 1, 2, 3, 2.5]))
def test_mrv2_hostile_drafts_are_accepted_or_violations(value, width):
    """The speculator's draft tensor and K_t of any kind are accepted or a violation."""
    corpus = _corpus("mixed-batch")
    view = _view(corpus)
    with contracts.checking(mode="strict", depth="full", collect="all"):
        batch = view.schedule(SimpleNamespace(**_first("mixed-batch", "input_batch")),
                              max_num_reqs=_setting(corpus, "max_num_reqs"))
        with contextlib.suppress(contracts.ContractViolation):
            view.drafted(batch, value, num_speculative_tokens=width)
