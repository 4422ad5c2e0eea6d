"""vLLM's own traffic, recorded from its real scheduler and runner helpers, replayed
through ``VllmView``: valid traffic gives no violation at full depth, buggy traffic the
right rule naming the request and its batch position."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from vllm_traffic import scheduler_output

from specguard import contracts
from specguard.adapters import StepTracker, VllmView
from specguard.adapters.corpus import Corpus, corpus_files, read_corpus
from specguard.adapters.engines.vllm.release import MASKING_SINCE, parse_version

CORPUS = Path(__file__).parent / "corpus" / "vllm"
FILES = sorted(corpus_files(CORPUS))


@cache
def _corpus(name: str) -> Corpus:
    """One corpus file, ``<version>/<scenario>``."""
    return read_corpus(CORPUS / f"{name}.json")


def _view(corpus: Corpus, **options: Any) -> VllmView:
    settings: dict[str, Any] = dict(
        mtp_k=corpus.config["mtp_k"], vocab_size=corpus.config["vocab_size"],
        async_scheduling=corpus.config["async_scheduling"], tracker=StepTracker(),
        version=corpus.engine_version)
    return VllmView(**{**settings, **options})


def _feed(view: VllmView, step: Any, event: str, fields: dict[str, Any]) -> Any:
    """Hand one recorded event to the view; returns the step in flight."""
    if event == "schedule":
        return view.schedule(scheduler_output(fields), req_ids=fields["req_ids"])
    if event == "verified":
        view.verified(step, fields["sampled_token_ids"])
    elif event == "drafter_input":
        view.drafter_input(
            step, target_token_ids=fields["target_token_ids"],
            target_positions=fields["target_positions"],
            next_token_ids=fields["next_token_ids"],
            last_token_indices=fields["last_token_indices"],
            common_attn_metadata=SimpleNamespace(query_start_loc=fields["query_start_loc"]))
    elif event == "drafted":
        view.drafted(step, fields["draft_token_ids"])
    return step


def _replay(corpus: Corpus, *, depth: str = "full", **options: Any) -> list[contracts.Violation]:
    """Every violation the view reports on the corpus, strict and at ``depth`` (full by
    default), in order."""
    view = _view(corpus, **options)
    step = None
    found: list[contracts.Violation] = []
    with contracts.checking(mode="strict", depth=depth):
        for event in corpus.events:
            try:
                step = _feed(view, step, event.event, event.values())
            except contracts.ContractViolation as error:
                found += error.violations
    return found


def _events(corpus: Corpus, name: str) -> list[dict[str, Any]]:
    return [event.values() for event in corpus.events if event.event == name]


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORPUS)) for p in FILES])
def test_recorded_vllm_traffic_at_the_default_depth_reports_nothing_unexpected(path):
    """At the default depth valid traffic replays with no violation, and buggy traffic
    reports only rules its recording expects (the others run at full depth only)."""
    corpus = read_corpus(path)
    found = _replay(corpus, depth="essential")
    if corpus.valid:
        assert [v.format() for v in found] == []
    else:
        assert {v.code for v in found} <= {e.code for e in corpus.expect} | {
            "SG604", "SG301"}  # what the replay reports after an object it stopped


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORPUS)) for p in FILES])
def test_recorded_vllm_traffic_replays_as_expected(path):
    """Clean traffic: no violation at full depth. Buggy: the expected rule first, naming
    the request and its batch position."""
    corpus = read_corpus(path)
    found = _replay(corpus)
    if corpus.valid:
        assert [v.format() for v in found] == []
        return
    expected = corpus.expect[0]
    assert found, f"{path.name}: nothing reported, expected {expected.code}"
    first = found[0]
    assert (first.code, first.position) == (expected.code, expected.position)
    assert first.reason.startswith(f"request {expected.seq_id!r}: ")


def test_corpus_covers_every_scenario_of_the_issue_for_each_version():
    """Each version has its chunked, preemption, empty, prefix-hit, mixed, seed, P/D first
    decode and k=1..4 recordings, and async ones where async scheduling supports drafts
    (0.11.1 on), so a missing file fails here rather than shrinking the replay."""
    scenarios = {"chunked-prefill", "preempt-recompute", "empty-schedule", "prefix-cache-hit",
                 "mixed-batch", "mtp-k1", "mtp-k4", "discarded-chunk-next-token",
                 "pd-first-decode"}
    asynchronous = {"async-scheduling", "prefix-cache-hit-async", "async-budget-reentry",
                    "pd-first-decode-async", "pd-async-empty-steps"}
    for version in ("0.11.0", "0.11.1", "0.17.1", "0.21.0", "0.24.0", "0.29.0", "0.33.0"):
        recorded = {p.stem for p in (CORPUS / version).glob("*.json")}
        wanted = scenarios if version == "0.11.0" else scenarios | asynchronous
        assert wanted <= recorded, (version, wanted - recorded)
        widths = {read_corpus(CORPUS / version / f"{s}.json").config["mtp_k"]
                  for s in recorded}
        assert {1, 2, 3, 4} <= widths
    assert (CORPUS / "0.33.0" / "dynamic-k.json").exists()
    assert (CORPUS / "0.24.0" / "dynamic-k.json").exists()
    assert (CORPUS / "0.29.0" / "dynamic-k.json").exists()


def test_runner_reads_each_requests_drafts_from_the_tail_of_its_span():
    """vLLM's own _calc_spec_decode_metadata (recorded in every corpus step that verifies)
    reads exactly the scheduled drafts: the last len(drafts) tokens of each span."""
    checked = 0
    for path in FILES:
        corpus = read_corpus(path)
        schedules = {f["step"]: f for f in _events(corpus, "schedule")}
        for meta in _events(corpus, "spec_decode_metadata"):
            schedule = schedules[meta["step"]]
            listed = [schedule["scheduled_spec_decode_tokens"].get(r, [])
                      for r in schedule["req_ids"]]
            assert meta["num_draft_tokens"] == [len(d) for d in listed]
            read = meta["draft_token_ids"].tolist()
            flat = [d for drafts in listed for d in drafts]
            # -1 slots: the runner reads what async scheduling wrote over them
            assert [r for r, d in zip(read, flat, strict=True) if d != -1] == \
                [d for d in flat if d != -1]
            checked += 1
    assert checked > 50


def test_vllm_last_token_indices_none_samples_at_span_ends():
    """vLLM passes last_token_indices=None on steps without spec-decode metadata; propose()
    then samples at query_start_loc[1:] - 1, and so does the view (no SG001)."""
    corpus = _corpus("0.11.1/mixed-batch")
    fields = next(f for f in _events(corpus, "drafter_input") if f["last_token_indices"] is None)
    view = _view(corpus, tracker=None)
    with contracts.checking(mode="strict", depth="full"):
        step = view.schedule(scheduler_output(_events(corpus, "schedule")[fields["step"]]),
                             req_ids=_events(corpus, "schedule")[fields["step"]]["req_ids"])
        drafter = view.drafter_input(
            step, target_token_ids=fields["target_token_ids"],
            target_positions=fields["target_positions"],
            next_token_ids=fields["next_token_ids"], last_token_indices=None,
            common_attn_metadata=SimpleNamespace(query_start_loc=fields["query_start_loc"]))
    ends = fields["query_start_loc"][1:] - 1
    assert drafter.sample_indices.tolist() == ends.tolist()
    assert drafter.input_ids[ends].tolist() == fields["next_token_ids"].tolist()


def test_vllm_0_11_discarded_chunk_drafts_are_read_from_the_span_tail():
    """0.11.x schedules the drafts proposed for a discarded prefill chunk with the final
    chunk (num_scheduled > 1 + len(drafts)); the runner reads them from the span's tail, so
    SG621 and, one step later, SG601 stay quiet, while a span too short for its drafts is
    still SG621."""
    for version in ("0.11.0", "0.11.1"):
        corpus = _corpus(f"{version}/chunked-prefill")
        long = [f for f in _events(corpus, "schedule")
                if f["num_scheduled_tokens"].get("long", 0)
                > 1 + len(f["scheduled_spec_decode_tokens"].get("long", []))
                and f["scheduled_spec_decode_tokens"].get("long")]
        assert len(long) == 1
        meta = next(f for f in _events(corpus, "spec_decode_metadata")
                    if f["step"] == long[0]["step"])
        assert meta["draft_token_ids"].tolist()[-2:] == \
            long[0]["scheduled_spec_decode_tokens"]["long"]
        assert _replay(corpus) == []
    short = scheduler_output(long[0])
    short.num_scheduled_tokens = {**short.num_scheduled_tokens, "long": 2}
    short.total_num_scheduled_tokens = sum(short.num_scheduled_tokens.values())
    with contracts.checking(mode="strict", depth="full"), pytest.raises(
            contracts.ContractViolation, match=re.escape(
                "SG621 a request's drafts fit at the tail of its scheduled tokens "
                "[VllmSchedule.num_scheduled_tokens, scheduler → runner]: seq 1 at batch "
                "position 1: request 'long': scheduled 2 tokens with 2 drafts "
                "(expected >= 1 + 2 drafts = 3; actual 2)")):
        _view(corpus, tracker=None).schedule(short, req_ids=long[0]["req_ids"])


@pytest.mark.parametrize("scenario, code", [("prefix-cache-hit", "SG108"),
                                            ("prefix-cache-hit-async", "SG603")])
def test_vllm_0_33_full_prefix_hit_minus_one_draft_slots_are_legal(scenario, code):
    """0.33 pads a fully cached new request with [-1] * k draft slots, which its runner
    clamps before any embedding: clean as 0.33 traffic; read as a 0.11 runner (which
    would embed them) the same slots are SG108 in sync mode and SG603 under async."""
    corpus = _corpus(f"0.33.0/{scenario}")
    padded = [f for f in _events(corpus, "schedule")
              if f["scheduled_spec_decode_tokens"].get("full") == [-1, -1]]
    assert padded and "full" in {n["req_id"] for n in padded[0]["scheduled_new_reqs"]}
    assert _replay(corpus) == []
    as_0_11 = _replay(corpus, version="0.11.1")
    assert as_0_11[0].code == code
    assert as_0_11[0].reason.startswith("request 'full': ")


def test_vllm_minus_one_reaching_an_embedding_is_still_sg301():
    """The seed: 0.11.0 hands a discarded row's -1 to the MTP head (SG301 naming the
    request and its position); 0.11.1 gives it the next prompt token; a -1 written into
    0.33 traffic's next tokens is SG301 even though 0.33 masks draft slots."""
    assert _corpus("0.11.1/discarded-chunk-next-token").valid
    seed = _corpus("0.11.0/discarded-chunk-next-token")
    found = _replay(seed)
    assert str(found[0].format()).startswith(
        "SG301 no sentinel reaches an embedding [DrafterInput.input_ids, runner → drafter]: "
        "seq 1 at batch position 1, token 15: request 'chunked': input id is -1 (expected "
        "0 <= id < vocab_size=1000)")
    corpus = _corpus("0.33.0/mixed-batch")
    schedule, fields = _events(corpus, "schedule")[2], _events(corpus, "drafter_input")[2]
    assert len(schedule["req_ids"]) > 1
    next_ids = fields["next_token_ids"].copy()
    next_ids[1] = -1
    view = _view(corpus, tracker=None)
    with contracts.checking(mode="strict", depth="full"), pytest.raises(
            contracts.ContractViolation) as caught:
        step = view.schedule(scheduler_output(schedule), req_ids=schedule["req_ids"])
        _feed(view, step, "drafter_input", {**fields, "next_token_ids": next_ids})
    assert caught.value.codes == ("SG301",)
    assert caught.value.violations[0].position == 1
    assert caught.value.violations[0].reason.startswith(f"request {schedule['req_ids'][1]!r}")


def test_vllm_0_33_dynamic_k_rows_narrower_than_mtp_k_are_valid():
    """0.33 dynamic speculative decoding proposes K_t <= mtp_k drafts a step: rows of width
    K_t replay clean; rows of another width than the step's K_t are SG102."""
    corpus = _corpus("0.33.0/dynamic-k")
    widths = {f["draft_token_ids"].shape[1] for f in _events(corpus, "drafted")}
    assert widths == {1, 3} and corpus.config["mtp_k"] == 3
    assert _replay(corpus) == []
    schedule = next(f for f in _events(corpus, "schedule")
                    if f["num_spec_tokens_to_schedule"] == 1)
    view = _view(corpus, tracker=None)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation,
                                                          match=re.escape(
            "SG102 row width follows mtp_k [DrafterOutput.draft_token_ids, drafter → "
            "scheduler]: draft_token_ids is i64[2,3] but mtp_k=1")):
        step = view.schedule(scheduler_output(schedule), req_ids=schedule["req_ids"])
        view.drafted(step, np.zeros((2, 3), dtype=np.int64))


def test_vllm_0_11_async_reentry_with_placeholders_is_sg603():
    """vLLM #37629 in 0.11.1's own scheduler: a request left out of a step for the token
    budget re-enters with [-1, -1] that nothing overwrites. SG603 names it; 0.33.0 clamps
    the same slots and replays clean."""
    found = _replay(_corpus("0.11.1/async-budget-reentry"))
    assert found[0].format().startswith(
        "SG603 rows refilled from the previous step were in the previous forward "
        "[StepTransition.draft_token_ids, scheduler → runner]: seq 3 at batch position 0: "
        "request 'r2': row is filled from the previous step's drafts, but the seq was not "
        "in the previous forward")
    assert _corpus("0.33.0/async-budget-reentry").valid
    assert _replay(_corpus("0.33.0/async-budget-reentry")) == []


def test_vllm_0_29_clamps_the_reentry_placeholders_as_0_33_does():
    """From 0.25.0 the runner clamps -1 slots before the target embeds them and the
    rejection sampler rejects them: 0.29.0's re-entry placeholders are masked slots, not
    drafts, read as such from its version alone (no runner source to read on replay)."""
    corpus = _corpus("0.29.0/async-budget-reentry")
    assert corpus.valid
    assert _replay(corpus) == []
    assert not VllmView(mtp_k=2, vocab_size=1000, version="0.24.0").masks_placeholders
    assert VllmView(mtp_k=2, vocab_size=1000, version="0.25.0").masks_placeholders


def test_vllm_0_24_embeds_the_reentry_placeholders_as_0_11_does():
    """0.24.0 refills only requests of the previous batch and has no clamp: the same
    re-entry bug as 0.11.1, named by the same rule."""
    corpus = _corpus("0.24.0/async-budget-reentry")
    assert not corpus.valid
    found = _replay(corpus)
    assert found[0].code == "SG603"
    assert "request 'r2': row is filled from the previous step's drafts" in found[0].reason


#: The P/D recordings, and the requests in them whose prompt KV came from a remote prefill.
PD_RECORDINGS = ["0.11.0/pd-first-decode", "0.11.1/pd-first-decode",
                 "0.11.1/pd-first-decode-async", "0.17.1/pd-first-decode",
                 "0.17.1/pd-first-decode-async", "0.21.0/pd-first-decode",
                 "0.21.0/pd-first-decode-async", "0.24.0/pd-first-decode",
                 "0.24.0/pd-first-decode-async", "0.29.0/pd-first-decode",
                 "0.29.0/pd-first-decode-async", "0.33.0/pd-first-decode",
                 "0.33.0/pd-first-decode-async"]
REMOTE = ("remote", "remote-hit")


def _first_schedules(corpus: Corpus, req_id: str) -> list[dict[str, Any]]:
    return [f for f in _events(corpus, "schedule") if req_id in f["num_scheduled_tokens"]]


def _at_step(corpus: Corpus, name: str, step: int) -> dict[str, Any]:
    return next(f for f in _events(corpus, name) if f["step"] == step)


@pytest.mark.parametrize("name", PD_RECORDINGS)
def test_vllm_pd_first_decode_after_remote_kv_is_clean(name):
    """P/D decode side: a remote-prefilled request is scheduled only after a step reports
    its KV in finished_recving, then as a new request past all its prompt but the last
    token (no local prefill: up to 0.24 one token, from 0.25 possibly padded with
    [-1] * k slots that its rejection sampler reads as -1); the MTP
    head is fed from that one-token forward, its drafts come with the next step, and the
    traffic replays with no violation at full depth."""
    corpus = _corpus(name)
    k, version = corpus.config["mtp_k"], corpus.engine_version
    assert isinstance(k, int)
    received = {r: f["step"] for f in _events(corpus, "kv_connector_output")
                for r in f["finished_recving"]}
    assert set(received) == set(REMOTE)
    for req_id in REMOTE:
        first, second = _first_schedules(corpus, req_id)[:2]
        # the scheduler reads finished_recving in update_from_output of the reporting step,
        # which async scheduling runs after it has scheduled the next step
        lag = 2 if corpus.config["async_scheduling"] else 1
        assert first["step"] == received[req_id] + lag
        computed = {n["req_id"]: n["num_computed_tokens"] for n in first["scheduled_new_reqs"]}
        assert computed[req_id] > 0
        slots = first["scheduled_spec_decode_tokens"].get(req_id, [])
        # From 0.25 the scheduler pads a one-token new request to the batch's k drafts
        # (only beside decode-only requests in 0.29; always in the 0.33 recordings).
        pads = parse_version(version) >= MASKING_SINCE
        assert slots in ([], [-1] * k) if pads else slots == []
        if version == "0.33.0":
            assert slots == [-1] * k
        assert first["num_scheduled_tokens"][req_id] == 1 + len(slots)
        row = first["req_ids"].index(req_id)
        if slots:  # gathered before the clamp: its sampler reads -1 and rejects it
            meta = _at_step(corpus, "spec_decode_metadata", first["step"])
            at = sum(meta["num_draft_tokens"][:row])
            assert meta["draft_token_ids"][at:at + k].tolist() == slots
        fed = _at_step(corpus, "drafter_input", first["step"])
        start, end = fed["query_start_loc"][row], fed["query_start_loc"][row + 1]
        assert fed["target_positions"][start:end].tolist() == \
            list(range(computed[req_id], computed[req_id] + 1 + len(slots)))
        last = fed["last_token_indices"]
        sample_at = end - 1 if last is None else last[row]
        assert fed["target_positions"][sample_at] == computed[req_id]
        first_token = _at_step(corpus, "verified", first["step"])["sampled_token_ids"][row]
        # one token out: the first token, which the MTP head takes as its next token
        assert first_token.tolist() == \
            [fed["next_token_ids"][row]] + [-1] * (len(first_token) - 1)
        assert second["step"] == first["step"] + 1
        drafts = second["scheduled_spec_decode_tokens"][req_id]
        if corpus.config["async_scheduling"]:
            assert drafts == [-1] * k  # the runner fills them from the first step's proposal
        else:
            proposed = _at_step(corpus, "drafted", first["step"])["draft_token_ids"][row]
            assert drafts == proposed.tolist()[:len(drafts)] and drafts
    assert _replay(corpus) == []


def test_vllm_0_11_pd_first_decode_with_unproposed_draft_slots_is_sg108():
    """A 0.11 first decode after a remote KV load that carried [-1] * k draft slots nobody
    proposed would embed the -1s (0.11 has no clamp): SG108 names the request; the same
    schedule is legal as 0.33 traffic, whose runner clamps the slots."""
    corpus = _corpus("0.11.1/pd-first-decode")
    fields = _first_schedules(corpus, "remote")[0]
    padded = scheduler_output(fields)
    padded.scheduled_spec_decode_tokens = {**padded.scheduled_spec_decode_tokens,
                                           "remote": [-1, -1]}
    padded.num_scheduled_tokens = {**padded.num_scheduled_tokens, "remote": 3}
    padded.total_num_scheduled_tokens += 2
    with contracts.checking(mode="strict", depth="full"):
        as_0_33 = _view(corpus, tracker=None, version="0.33.0")
        as_0_33.schedule(padded, req_ids=fields["req_ids"])
        with pytest.raises(contracts.ContractViolation) as caught:
            _view(corpus, tracker=None).schedule(padded, req_ids=fields["req_ids"])
    assert caught.value.violations[0].format() == (
        "SG108 draft token ids are valid vocabulary ids [DraftTokens.draft_token_ids, "
        "scheduler → runner]: seq 1 at batch position 1: request 'remote': draft 0 of row 1 "
        "is -1 (expected 0 <= id < vocab_size=1000) {mtp_k=2, num_decode=2}")


def test_vllm_async_request_back_after_an_empty_step_is_refilled_from_the_last_forward():
    """A step that schedules nothing runs no forward and leaves vLLM's previous-step
    buffers alone: a request back after it with -1 placeholders is refilled from the last
    forward (no SG603), while one left out of a step that did run is still SG603."""
    corpus = _corpus("0.11.1/pd-async-empty-steps")
    schedules = _events(corpus, "schedule")
    back = next(f for f in schedules if f["step"] > 0 and f["req_ids"]
                and not schedules[f["step"] - 1]["req_ids"]
                and any(-1 in d for d in f["scheduled_spec_decode_tokens"].values()))
    last_forward = next(f for f in reversed(schedules[:back["step"]]) if f["req_ids"])
    assert set(back["req_ids"]) <= set(last_forward["req_ids"])
    assert _replay(corpus) == []
    # the same batch after a forward without the request that has placeholders
    refilled = next(r for r, d in back["scheduled_spec_decode_tokens"].items() if -1 in d)
    others = [r for r in last_forward["req_ids"] if r != refilled]
    without = {**schedules[back["step"] - 1], "req_ids": others,
               "num_scheduled_tokens": {r: 1 for r in others},
               "total_num_scheduled_tokens": len(others)}
    view, step = _view(corpus), None
    with contracts.checking(mode="strict", depth="full"):
        for event in corpus.events:
            if event.values()["step"] >= back["step"] - 1:
                break
            step = _feed(view, step, event.event, event.values())
        view.schedule(scheduler_output(without), req_ids=others)  # a forward without it
        with pytest.raises(contracts.ContractViolation) as caught:
            view.schedule(scheduler_output(back), req_ids=back["req_ids"])
    found = caught.value.violations[0]
    assert (found.code, found.position) == ("SG603", back["req_ids"].index(refilled))
    assert found.reason.startswith(f"request {refilled!r}: row is filled from the previous "
                                   "step's drafts, but the seq was not in the previous forward")
