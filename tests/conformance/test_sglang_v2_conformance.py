"""SGLang's own overlap-worker traffic (0.5.16, 0.5.19 and 0.5.23: its scheduler
objects, FutureMap relay, verify-input assembly and greedy verify, recorded on CPU),
replayed through ``SglangV2View``: valid traffic gives no violation at the default depth
or at full depth; buggy traffic exactly its expected rules, naming the request and its
row."""

from __future__ import annotations

import contextlib
from functools import cache
from itertools import pairwise
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from sglang_v2_traffic import batch as _batch
from sglang_v2_traffic import result as _result

from specguard import contracts
from specguard.adapters import SglangV2View, StepTracker
from specguard.adapters.corpus import Corpus, corpus_files, read_corpus

ROOT = Path(__file__).parent / "corpus" / "sglang"
#: The releases whose overlap worker (``EAGLEWorkerV2``) the v2 view reads; 0.5.10's
#: traffic is the v1 worker's (``test_sglang_conformance``).
RELEASES = ("0.5.16", "0.5.19", "0.5.23")
CORPUS = ROOT / "0.5.23"
FILES = sorted(corpus_files(CORPUS))
EVERY_RELEASE = sorted(path for release in RELEASES for path in corpus_files(ROOT / release))
DEPTHS = ["essential", "full"]


@cache
def _corpus(scenario: str) -> Corpus:
    return read_corpus(CORPUS / f"{scenario}.json")


def _setting(corpus: Corpus, name: str) -> int:
    value = corpus.config[name]
    assert isinstance(value, int), (name, value)
    return value


def _view(corpus: Corpus) -> SglangV2View:
    return SglangV2View(spec_steps=_setting(corpus, "spec_steps"),
                        vocab_size=_setting(corpus, "vocab_size"), tracker=StepTracker(),
                        carried=True)


def _replay(corpus: Corpus, change: Any = None, *, depth: str = "full",
            view: SglangV2View | None = None) -> list[contracts.Violation]:
    """Every violation the view reports, strict, up to the first one raised;
    ``change(event, fields)`` may alter a recorded event first."""
    view = view or _view(corpus)
    step = None
    found: list[contracts.Violation] = []
    with contracts.checking(mode="strict", depth=depth):
        for event in corpus.events:
            fields = event.values()
            if change is not None:
                change(event.event, fields)
            try:
                if event.event == "forward":
                    step = view.schedule(_batch(fields))
                elif event.event == "verify_input" and step is not None:
                    view.verify_input(step, SimpleNamespace(**fields))
                elif event.event == "verified" and step is not None:
                    view.verified(step, _result(fields))
                elif event.event == "drafted" and step is not None:
                    view.drafted(step, SimpleNamespace(**fields))
            except contracts.ContractViolation as error:
                found.extend(error.violations)
                break
    return found


def _events(corpus: Corpus, name: str) -> list[dict[str, Any]]:
    return [event.values() for event in corpus.events if event.event == name]


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("path", EVERY_RELEASE,
                         ids=[f"{p.parent.name}/{p.stem}" for p in EVERY_RELEASE])
def test_recorded_sglang_traffic_replays_as_expected(path, depth):
    """Valid runs replay with no violation; a buggy run reports its expected rule first,
    naming the request and its row, and nothing outside its expected rules."""
    corpus = read_corpus(path)
    found = _replay(corpus, depth=depth)
    if corpus.valid:
        assert [v.format() for v in found] == []
        return
    assert {v.code for v in found} <= {e.code for e in corpus.expect}
    first, expected = found[0], corpus.expect[0]
    assert (first.code, first.position) == (expected.code, expected.position)
    assert first.reason.startswith(f"request {expected.seq_id!r}: ")


@pytest.mark.parametrize("release", RELEASES)
def test_corpus_holds_the_overlap_worker_scenarios(release):
    """Mixed prompt lengths, finishes at prefill and inside a verify, a request joining
    the running batch, a retract and its re-prefill, batch sizes 1 and 9, and three real
    bugs re-created, each named by its rule: for every release."""
    files = sorted(corpus_files(ROOT / release))
    assert {read_corpus(p).engine_version for p in files} == {release}
    valid = {p.stem for p in files if read_corpus(p).valid}
    assert valid == {"mixed-prompt-lengths", "finish-at-prefill-and-in-verify",
                     "join-running-batch", "retract-and-reprefill", "bs1", "bs9"}
    buggy = {p.stem: [e.code for e in read_corpus(p).expect] for p in files
             if not read_corpus(p).valid}
    assert buggy == {"sg650-filter-truncates-relay-rows": ["SG650"],
                     "sg658-bonus-token-wrong-stride": ["SG658"],
                     "sg651-pad-sentinel-in-prefill": ["SG651"]}
    assert all(read_corpus(p).engine == "sglang" for p in files)


def test_batch_sizes_one_and_nine_are_recorded():
    sizes = {len(f["rids"]) for f in _events(_corpus("bs1"), "verify_input")}
    assert sizes == {1}
    assert max(len(f["rids"]) for f in _events(_corpus("bs9"), "verify_input")) == 9


def test_finished_rows_stay_in_the_verify_output_until_the_next_filter():
    """r0 asked for one token: it is in the prefill and in no decode; r1 finishes inside
    a verify: its row is in that verify's output and gone from the next entry."""
    corpus = _corpus("finish-at-prefill-and-in-verify")
    entries = _events(corpus, "forward")
    assert "r0" in entries[0]["rids"] and all("r0" not in e["rids"] for e in entries[1:])
    verified = _events(corpus, "verified")
    last = max(i for i, v in enumerate(verified) if "r1" in v["rids"])
    decodes = [e for e in entries if e["forward_mode"] == "DECODE"]
    assert "r1" in decodes[last]["rids"] and "r1" not in decodes[last + 1]["rids"]


def test_a_merged_request_joins_at_the_end_and_rows_are_matched_by_request():
    """r2 is prefilled alone and merged behind the running requests; a retracted request
    comes back at the end, so rows move between steps: the trackers match by request id
    and the valid runs stay clean."""
    joined = [e["rids"] for e in _events(_corpus("join-running-batch"), "forward")]
    assert ["r2"] in joined and ["r0", "r1", "r2"] in joined
    retracted = [e["rids"] for e in _events(_corpus("retract-and-reprefill"), "forward")]
    assert ["r1", "r2", "r0"] in retracted
    assert _replay(_corpus("retract-and-reprefill")) == []


def test_the_step_trackers_see_every_decode_step_at_full_depth():
    """The carried tracker links a decode entry to the previous step's drafted rows, and
    the verify tracker to the previous new_seq_lens: a bonus token changed on the way
    into the next step is SG602, a seq_len changed there SG601, both by request id."""
    corpus = _corpus("mixed-prompt-lengths")

    def swap_bonus(event: str, fields: dict[str, Any]) -> None:
        if event == "forward" and fields["forward_mode"] == "DECODE" and \
                fields["seq_lens"][0] > 6:
            fields["bonus_tokens"][[0, 1]] = fields["bonus_tokens"][[1, 0]]

    # A StepTracker as `carried` (the spelling of earlier releases) checks the same.
    found = _replay(corpus, swap_bonus, view=SglangV2View(
        spec_steps=3, vocab_size=1000, carried=StepTracker(progress=False)))
    assert [v.code for v in found] == ["SG602"]
    assert found[0].reason.startswith("request 'r0': draft 0 is ")

    def stale_length(event: str, fields: dict[str, Any]) -> None:
        if event == "forward" and fields["forward_mode"] == "DECODE" and \
                fields["seq_lens"][0] > 6:
            fields["seq_lens_cpu"][2] -= 1

    found = _replay(corpus, stale_length, view=SglangV2View(
        spec_steps=3, vocab_size=1000, tracker=StepTracker()))
    assert [v.code for v in found] == ["SG601"]
    assert found[0].reason.startswith("request 'r2': starts at position ")


def test_the_trackers_relations_catch_a_swapped_bonus_token_by_default():
    """The step relations run at the default depth: the swapped bonus token is SG602 (the
    relay carries a draft the previous step did not propose for that request) there, as
    at full depth."""
    corpus = _corpus("mixed-prompt-lengths")

    def swap_bonus(event: str, fields: dict[str, Any]) -> None:
        if event == "forward" and fields["forward_mode"] == "DECODE":
            fields["bonus_tokens"][[0, 1]] = fields["bonus_tokens"][[1, 0]]

    found = _replay(corpus, swap_bonus, depth="essential")
    assert [(v.code, v.position) for v in found] == [("SG602", 0)]
    assert [(v.code, v.position) for v in _replay(corpus, swap_bonus)] == [("SG602", 0)]


def test_a_retracted_request_re_prefills_the_tokens_it_was_emitted():
    """The re-prefill feeds the prompt and every committed token; one changed token is
    SG608 at full depth (the tracker remembers what the verifier emitted)."""
    corpus = _corpus("retract-and-reprefill")
    (reprefill,) = [e for e in _events(corpus, "forward")
                    if e["forward_mode"] == "EXTEND" and e["rids"] == ["r0"]]
    assert reprefill["extend_lens"][0] > 5  # its prompt and the tokens it was emitted

    def corrupt(event: str, fields: dict[str, Any]) -> None:
        if event == "forward" and fields["forward_mode"] == "EXTEND" and \
                len(fields["rids"]) == 1:
            fields["input_ids"][-1] = (fields["input_ids"][-1] + 1) % 1000

    found = _replay(corpus, corrupt)
    assert [v.code for v in found] == ["SG608"]
    assert found[0].reason.startswith("request 'r0': ")


def test_the_target_verify_embeds_exactly_the_verify_rows_at_their_positions():
    """SGLang's own ForwardBatch.init_new (TARGET_VERIFY) takes the verify input's rows as
    its input_ids and positions, and the entry's seq_lens: what SG652-SG654 check on the
    EagleVerifyInput is what the target embeds."""
    for path in FILES:
        corpus = read_corpus(path)
        pairs = [(e.values(), n.values()) for e, n in pairwise(corpus.events)
                 if e.event == "verify_input" and n.event == "verify_forward"]
        assert pairs and len(pairs) == len(_events(corpus, "verified"))
        for verify_input, forward in pairs:
            assert forward["forward_mode"] == "TARGET_VERIFY"
            assert forward["input_ids"].tolist() == verify_input["draft_token"].tolist()
            assert forward["positions"].tolist() == verify_input["positions"].tolist()
            assert forward["seq_lens"].tolist() == verify_input["seq_lens"].tolist()


def test_the_relay_placeholder_rows_past_the_batch_are_never_read():
    """At run_batch entry the draft input still holds rows of finished requests; the view
    reads only what resolve_forward_inputs gathered, so a recorded entry is clean even
    with a longer stale tensor kept beside it."""
    corpus = _corpus("finish-at-prefill-and-in-verify")
    entry = next(e for e in _events(corpus, "forward") if e["forward_mode"] == "DECODE")
    batch = _batch(entry)
    batch.spec_info.hidden_states = np.zeros((len(entry["rids"]) + 2, 8))
    with contracts.checking(mode="strict", depth="full"):
        _view(corpus).schedule(batch)


def test_a_negative_overlap_placeholder_reaching_the_worker_is_sg651():
    """-future_index placeholders are legal in the scheduler's batch, never at the
    worker's entry: SG651 names the request."""
    corpus = _corpus("bs1")
    entry = next(e for e in _events(corpus, "forward") if e["forward_mode"] == "DECODE")
    entry["bonus_tokens"] = -entry["future_indices"]
    with contracts.checking(mode="strict", depth="essential"), \
            pytest.raises(contracts.ContractViolation) as raised:
        _view(corpus).schedule(_batch(entry))
    (violation,) = raised.value.violations
    assert violation.code == "SG651"
    assert violation.reason == f"request 'solo': bonus token is {int(entry['bonus_tokens'][0])}"


def test_metadata_depth_reads_no_values():
    """The bug recordings pass at metadata depth: every SGLang rule is a value rule."""
    for scenario in ("sg650-filter-truncates-relay-rows", "sg658-bonus-token-wrong-stride",
                     "sg651-pad-sentinel-in-prefill"):
        assert _replay(_corpus(scenario), depth="metadata") == []


def test_tensors_on_a_device_give_deferred_verdicts(monkeypatch):
    """The recorded tensors as tensors on a device: the value rules run there and the
    verdict read at the sync point is the host replay's."""
    from specguard.contracts._core import _values

    monkeypatch.setattr(_values, "HOST_DEVICE_TYPES", set())

    def on_device(event: str, fields: dict[str, Any]) -> None:
        for name, value in list(fields.items()):
            if isinstance(value, np.ndarray) and name != "seq_lens_cpu":
                fields[name] = torch.from_numpy(value)

    for scenario, codes in (("mixed-prompt-lengths", []),
                            ("sg658-bonus-token-wrong-stride", ["SG658"])):
        with contracts.checking(device_values="deferred"):
            assert _replay(_corpus(scenario), on_device, depth="essential") == []
            try:
                contracts.flush_deferred()
                found = []
            except contracts.DeferredViolation as error:
                found = [v.code for v in error.violations]
        assert found[:1] == codes


def test_checks_off_validate_nothing():
    """Mode off: the buggy runs replay without a violation."""
    corpus = _corpus("sg658-bonus-token-wrong-stride")
    view = _view(corpus)
    step = None
    with contracts.checking(mode="off"):
        for event in corpus.events:
            fields = event.values()
            if event.event == "forward":
                step = view.schedule(_batch(fields))
            elif event.event == "verified" and step is not None:
                view.verified(step, _result(fields))


_HOSTILE = [None, "text", 3.5, -7, 10**30, True, [], [[]], {"a": 1}, object(),
            np.zeros((2, 2)), np.zeros(0), np.array(["a", "b"]), np.full(3, -1, np.int32),
            np.full(3, 2**40, np.int64), np.full(3, np.nan), torch.zeros((3, 2))]


def _first(scenario: str, name: str, mode: str | None = None) -> dict[str, Any]:
    return dict(next(e for e in _events(_corpus(scenario), name)
                     if mode is None or e.get("forward_mode") == mode))


@given(field=st.sampled_from(["seq_lens", "seq_lens_cpu", "req_pool_indices",
                              "future_indices", "bonus_tokens", "topk_index"]),
       value=st.sampled_from(_HOSTILE), depth=st.sampled_from(["metadata", "full"]))
def test_hostile_entry_fields_are_accepted_or_violations(field, value, depth):
    """Any field of a recorded decode entry replaced by a hostile value is accepted or a
    ContractViolation, and so are the later hand-overs of the step: never a foreign
    exception."""
    fields = _first("mixed-prompt-lengths", "forward", "DECODE") | {field: value}
    view = _view(_corpus("mixed-prompt-lengths"))
    with contracts.checking(mode="strict", depth=depth, collect="all"):
        try:
            step = view.schedule(_batch(fields))
        except contracts.ContractViolation:
            return
        for call in (
                lambda: view.verify_input(step, SimpleNamespace(
                    **_first("mixed-prompt-lengths", "verify_input"))),
                lambda: view.verified(step, _result(_first("mixed-prompt-lengths", "verified"))),
                lambda: view.drafted(step, SimpleNamespace(
                    **_first("mixed-prompt-lengths", "drafted")))):
            with contextlib.suppress(contracts.ContractViolation):
                call()


@given(field=st.sampled_from(["draft_token", "positions", "retrieve_index",
                              "retrieve_next_token", "retrieve_next_sibling", "spec_steps",
                              "topk", "draft_token_num"]),
       value=st.sampled_from(_HOSTILE))
def test_hostile_verify_inputs_are_accepted_or_violations(field, value):
    view = _view(_corpus("mixed-prompt-lengths"))
    with contracts.checking(mode="strict", depth="full", collect="all"):
        step = view.schedule(_batch(_first("mixed-prompt-lengths", "forward", "DECODE")))
        with contextlib.suppress(contracts.ContractViolation):
            view.verify_input(step, SimpleNamespace(
                **(_first("mixed-prompt-lengths", "verify_input") | {field: value})))


@given(field=st.sampled_from(["next_token_ids", "accept_lens", "accept_index",
                              "new_seq_lens", "bonus_tokens"]),
       value=st.sampled_from(_HOSTILE))
def test_hostile_verify_results_are_accepted_or_violations(field, value):
    view = _view(_corpus("mixed-prompt-lengths"))
    with contracts.checking(mode="strict", depth="full", collect="all"):
        step = view.schedule(_batch(_first("mixed-prompt-lengths", "forward", "DECODE")))
        view.verify_input(step, SimpleNamespace(**_first("mixed-prompt-lengths",
                                                         "verify_input")))
        with contextlib.suppress(contracts.ContractViolation):
            view.verified(step, _result(_first("mixed-prompt-lengths", "verified")
                                        | {field: value}))
