"""ATOM's recorded traffic, replayed through the ATOM adapter (tools/record_corpus/atom.py).

Each corpus file is one scenario driven through ATOM's real ``Scheduler`` at one commit:
valid traffic must replay with no violation at the default depth and at full depth, buggy
traffic with exactly the violations the recording's oracle found at full depth, naming
seq and batch position (and with none of anything else at the default depth).
"""

from __future__ import annotations

import itertools
import re
import types
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import AtomView, StepTracker, guard_scheduler
from specguard.adapters.corpus import Corpus, corpus_files, read_corpus

CORPUS = Path(__file__).parent / "corpus" / "atom"
FILES = list(corpus_files(CORPUS))
# Per-seq fields of ATOM's ScheduledBatch (lists and arrays in batch order).
_PER_SEQ = ("req_ids", "num_scheduled_tokens", "context_lens", "num_rejected", "num_bonus",
            "num_cached_tokens", "block_tables", "last_block_num_tokens")


def _corpus(version: str, scenario: str) -> Corpus:
    return read_corpus(CORPUS / version / f"{scenario}.json")


def _setting(corpus: Corpus, name: str) -> int:
    """An integer of the recorded engine config."""
    value = corpus.config[name]
    assert isinstance(value, int), (name, value)
    return value


def _view(corpus: Corpus, tracker: StepTracker | None = None,
          layout: str | None = None) -> AtomView:
    return AtomView(mtp_k=_setting(corpus, "mtp_k"), vocab_size=_setting(corpus, "vocab_size"),
                    block_size=_setting(corpus, "block_size"),
                    tracker=tracker if tracker is not None else StepTracker(),
                    layout=str(layout or corpus.config["layout"]))


def replay(corpus: Corpus, view: AtomView | None = None, *, start: int = 0,
           upto: int | None = None, depth: str = "full") -> list[tuple[str, Any, Any, str]]:
    """Feed events ``start:upto`` to the view at ``depth``; return (code, seq, position,
    message) of every violation, continuing after each as an engine in warn mode would."""
    view = view or _view(corpus)
    found: list[tuple[str, Any, Any, str]] = []
    batch: Any = None
    with contracts.checking(depth=depth):
        for event in corpus.events[start:upto]:
            fields = event.values()
            try:
                if event.event == "schedule":
                    batch = types.SimpleNamespace(**_seq_keyed(fields))
                    view((batch, {}))  # what Scheduler.schedule() returns
                elif event.event == "schedule_none":
                    assert view(None) is None
                elif event.event == "verified":
                    view.verified(batch, fields["sampled_tokens"], fields["num_bonus_tokens"])
                elif event.event == "drafted":
                    view.drafted(batch, fields["draft_token_ids"], fields.get("next_token_ids"))
            except contracts.ContractViolation as error:
                found += [(v.code, v.seq_id, v.position, v.format()) for v in error.violations]
    return found


def _seq_keyed(fields: dict[str, Any]) -> dict[str, Any]:
    """ATOM keys some dicts by seq id; JSON keys are strings: make them ints again."""
    return {name: {int(k): v for k, v in value.items()}
            if isinstance(value, dict) and value and all(k.isdigit() for k in value)
            else value for name, value in fields.items()}


def _schedules(corpus: Corpus) -> list[tuple[int, dict[str, Any]]]:
    return [(i, e.values()) for i, e in enumerate(corpus.events) if e.event == "schedule"]


def test_corpus_covers_every_recorded_atom_commit_and_stays_small():
    """Four ATOM commits, the same scenarios at each, well under 2 MB of data in all."""
    versions = sorted({path.parent.name for path in FILES})
    assert versions == ["042e8f1c0", "26ba9913d", "80b5b02be", "ffdf3bb5d"]
    scenarios = {v: sorted(p.stem for p in FILES if p.parent.name == v) for v in versions}
    assert len(set(map(tuple, scenarios.values()))) == 1
    assert {"chunked-prefill", "preempt-recompute", "empty-schedule", "prefix-cache-hit",
            "pd-first-decode", "new-and-deferred", "steady-decode-k1",
            "steady-decode-k4", "pd-first-decode-short-handover", "middle-chunks-skip-forward",
            "preempt-after-prefill", "block-size-4-k4"} <= set(scenarios[versions[0]])
    assert sum(path.stat().st_size for path in FILES) < 1_000_000


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recorded_atom_traffic_replays_to_what_it_expects(path):
    """Valid traffic: 0 violations at full depth; buggy: exactly the expected rule/seq/pos."""
    corpus = read_corpus(path)
    got = [(code, seq, position) for code, seq, position, _ in replay(corpus)]
    assert got == [(e.code, e.seq_id, e.position) for e in corpus.expect]


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_recorded_atom_traffic_at_the_default_depth_reports_nothing_unexpected(path):
    """At the default depth (``essential``) valid traffic replays with 0 violations, and
    buggy traffic reports only expected violations (value rules of full depth, such as
    SG110, SG601 and SG608, run there only)."""
    corpus = read_corpus(path)
    got = [(code, seq, position) for code, seq, position, _ in replay(corpus, depth="essential")]
    expected = [(e.code, e.seq_id, e.position) for e in corpus.expect]
    assert all(found in expected for found in got)
    if not expected:
        assert got == []


def test_atom_empty_host_draft_rows_before_any_drafts_is_clean():
    """Pre-#1771 rows are np.asarray([]) (1-D) on the first decode: zero rows, no SG003."""
    corpus = _corpus("80b5b02be", "first-decode-no-drafts")
    index, fields = next((i, f) for i, f in _schedules(corpus)
                         if f["total_seqs_num_decode"])
    rows = fields["scheduled_spec_decode_tokens"]
    assert rows.shape == (0,) and fields["total_seqs_num_decode"] == 2
    view = _view(corpus)
    assert replay(corpus, view, upto=index) == []
    with contracts.checking(depth="full"):
        batch = view(types.SimpleNamespace(**fields))
    # both seqs were in the previous forward (their prefill): the device feeds them
    assert batch is not None and batch.draft_token_ids.shape == (2, 3)
    assert batch.num_drafts.tolist() == [0, 0]


def test_atom_before_pr1771_compacted_rows_pass_while_new_seqs_read_their_own_row():
    """#1444 re-queues the partial at the tail: rows (2,3) for 3 decode seqs, all read right."""
    corpus = _corpus("26ba9913d", "partial-prefill-requeue")
    short = [f for _, f in _schedules(corpus) if f["total_seqs_num_decode"]
             and f["scheduled_spec_decode_tokens"].shape[:1] == (2,)
             and f["total_seqs_num_decode"] == 3]
    assert [f["req_ids"] for f in short] == [[0, 1, 2]]  # seq 2 fresh from prefill, last
    assert replay(corpus) == []


def test_atom_seed_compacted_rows_are_sg101_naming_the_seq_without_a_row():
    """80b5b02be re-queues the partial at the head: [2 | 0 1], rows (2,3): SG101 seq 2 at 0."""
    corpus = _corpus("80b5b02be", "partial-prefill-requeue")
    assert corpus.events[-1].event == "crash"
    assert corpus.events[-1].values()["error"] == "index 2 is out of bounds for axis 0 with size 2"
    (found,) = replay(corpus)
    assert found[:3] == ("SG101", 2, 0)
    assert found[3] == (
        "SG101 one draft row per decode seq, in batch order [ScheduledBatch.draft_token_ids, "
        "scheduler → runner]: seq 2 at batch position 0: decode seq has no drafts and no draft "
        "row: draft_token_ids is i32[2,3] but num_decode=3 (expected num_decode=3; actual 2) "
        "{mtp_k=3, num_decode=3, num_tokens=12, num_seqs=3, max_blocks=3}")


def _permuted(fields: dict[str, Any], order: list[int], q: int) -> types.SimpleNamespace:
    """The same decode batch with its seqs in another order (every per-seq field moved)."""
    moved = dict(fields)
    for name in _PER_SEQ:
        value = fields[name]
        moved[name] = value[order] if isinstance(value, np.ndarray) else [value[i] for i in order]
    spans = fields["scheduled_tokens"].reshape(-1, q)
    moved["scheduled_tokens"] = spans[order].reshape(-1)
    moved["scheduled_spec_decode_tokens"] = fields["scheduled_spec_decode_tokens"][order]
    return types.SimpleNamespace(**moved)


def test_atom_deferred_new_layout_sg612_holds_only_before_pr1771():
    """[new | deferred] after a decode step: clean for #1771's runner, SG612 for the older."""
    corpus = _corpus("042e8f1c0", "new-and-deferred")
    q = _setting(corpus, "mtp_k") + 1
    schedules = _schedules(corpus)
    # a decode batch after a decode batch, sharing one seq with it: [deferred | new]
    index, fields = next((i, f) for (_, p), (i, f) in itertools.pairwise(schedules)
                         if f["total_seqs_num_decode"] and p["total_seqs_num_decode"]
                         and f["req_ids"][0] in p["req_ids"]
                         and f["req_ids"][-1] not in p["req_ids"])
    for layout, codes in (("pr1771", []), ("pre-1771", ["SG612"])):
        view = _view(corpus, layout=layout)
        assert replay(corpus, view, upto=index) == []
        with contracts.checking(depth="full", collect="all"):
            try:
                view(_permuted(fields, [len(fields["req_ids"]) - 1, 0], q))
                found = []
            except contracts.ContractViolation as error:
                found = list(error.codes)
        assert found == codes


def test_atom_guard_scheduler_accepts_batch_and_seqs_or_none():
    """ATOM's schedule() returns (batch, seqs) or None: the guard checks one, passes both."""
    corpus = _corpus("042e8f1c0", "empty-schedule")
    results: list[Any] = [None if e.event == "schedule_none"
                          else (types.SimpleNamespace(**e.values()), {})
                          for e in corpus.events if e.event in ("schedule", "schedule_none")]
    assert results[0] is None
    scheduler = types.SimpleNamespace(schedule=iter(results).__next__)
    guarded = guard_scheduler(scheduler, _view(corpus, StepTracker()))
    with contracts.checking(depth="full"):
        returned = [guarded.schedule() for _ in results]
    assert [r is o for r, o in zip(returned, results, strict=True)] == [True] * len(results)
    broken = types.SimpleNamespace(**corpus.events[1].values())
    broken.total_tokens_num += 1
    scheduler = types.SimpleNamespace(schedule=lambda: (broken, {}))
    with pytest.raises(contracts.ContractViolation, match=re.escape(
            "SG104 flat token stream has num_tokens entries [ScheduledBatch.token_ids, "
            "scheduler → runner]: token_ids is i32[8] but num_tokens=9")):
        guard_scheduler(scheduler, _view(corpus)).schedule()


def test_atom_preemption_then_recompute_as_prefill_is_a_legal_restart():
    """A preempted seq comes back as a prefill from position 0: no SG601, at every commit."""
    for version in ("80b5b02be", "26ba9913d", "042e8f1c0", "ffdf3bb5d"):
        corpus = _corpus(version, "preempt-recompute")
        preempted = {s for e in corpus.events if e.event == "preempted"
                     for s in e.values()["seq_ids"]}
        restarts = [f for _, f in _schedules(corpus) if f["total_seqs_num_prefill"]
                    and set(f["req_ids"]) & preempted and f["num_cached_tokens"] == [0]]
        assert preempted == {2} and len(restarts) == 2  # its first prefill, its recompute
        assert replay(corpus) == []


def test_atom_schedule_never_forwarded_leaves_no_stale_tracker_state():
    """A batch with no seqs is never forwarded: the next batch links to the real forward."""
    corpus = _corpus("80b5b02be", "empty-schedule")
    index = next(i for i, f in _schedules(corpus) if not f["forwarded"])
    tracker = StepTracker()
    view = _view(corpus, tracker)
    assert replay(corpus, view, upto=index) == []
    before = tracker.close()
    assert replay(corpus, view, start=index, upto=index + 1) == []
    assert tracker.close() is before and before is not None
    assert before.seq_ids.tolist() == [0]
    assert replay(corpus) == []


def test_atom_middle_chunks_are_not_the_previous_forward_from_pr1771():
    """From #1771 a batch of middle chunks skips postprocess: decode seqs stay deferred."""
    corpus = _corpus("042e8f1c0", "middle-chunks-between-decodes")
    tracker = StepTracker()
    view = _view(corpus, tracker)
    index = next(i for i, f in _schedules(corpus)
                 if f["total_seqs_num_prefill"] and not any(f["is_final_chunk"]))
    replay(corpus, view, upto=index + 1)
    assert tracker.close() is not None
    state = tracker.close()
    assert state is not None and state.seq_ids.tolist() == [0, 1]
    assert replay(corpus) == []


def test_atom_recompute_refeeding_placeholders_is_sg608():
    """ATOM's preempt leaves the in-flight step's placeholders: the recompute feeds EOS (2)."""
    corpus = _corpus("ffdf3bb5d", "preempt-placeholder-history")
    (found,) = replay(corpus)
    assert found[:3] == ("SG608", 1, 0)
    assert re.fullmatch(
        r"SG608 a recomputed seq re-feeds only the tokens it was emitted "
        r"\[RecomputedTokens.token_positions, scheduler → runner\]: seq 1 at batch position "
        r"0: re-feeds token 2 at position 10, where the engine sampled \d+ \(expected \d+; "
        r"actual 2\) \{num_prefill=1\}", found[3])


def test_atom_chunked_recompute_ending_at_the_prompt_is_sg601():
    """A recompute cut at the prompt's end resumes decoding over unwritten KV: SG601."""
    for version in ("80b5b02be", "ffdf3bb5d"):
        (found,) = replay(_corpus(version, "preempt-chunked-recompute"))
        assert found[3] == (
            "SG601 a seq resumes where its previous step left off [StepTransition.starts, "
            "scheduler → runner]: seq 0 at batch position 0: starts at position 18, but its "
            "previous step (row 0) left it at 6 (expected 6; actual 18) "
            "{mtp_k=2, num_seqs=1, num_decode=1}")


def test_atom_middle_chunks_between_forwards_move_the_resume_point():
    """From #1771 a batch of middle chunks only is not the runner's previous forward, but
    it moved its seq on: the next chunk resumes where that batch left it, not where the
    previous forward did (no SG601 at full depth). A chunk that resumed 8 prompt tokens
    past where that batch left it is SG601 naming that point."""
    for version in ("042e8f1c0", "ffdf3bb5d"):
        corpus = _corpus(version, "middle-chunks-skip-forward")
        schedules = _schedules(corpus)
        skipped = [i for i, f in schedules
                   if f["total_seqs_num_prefill"] and not any(f["is_final_chunk"])]
        assert len(skipped) == 1
        assert [f["req_ids"] for _, f in schedules[:3]] == [[0, 1], [1], [1]]
        assert replay(corpus) == []
        index, last = schedules[2]
        tracker = StepTracker()
        view = _view(corpus, tracker)
        assert replay(corpus, view, upto=index) == []
        state = tracker.close()
        assert state is not None and state.seq_ids.tolist() == [0, 1]
        assert (last["context_lens"] - last["num_scheduled_tokens"]).tolist() == [128]
        tokens = last["scheduled_tokens"][8:]
        gap = types.SimpleNamespace(**{
            **last, "num_scheduled_tokens": last["num_scheduled_tokens"] - 8,
            "scheduled_tokens": tokens, "total_tokens_num": tokens.shape[0],
            "total_tokens_num_prefill": tokens.shape[0]})
        with pytest.raises(contracts.ContractViolation) as caught, \
                contracts.checking(depth="full"):
            view(gap)
        assert caught.value.violations[0].format() == (
            "SG601 a seq resumes where its previous step left off [StepTransition.starts, "
            "scheduler → runner]: seq 1 at batch position 0: starts at position 136, but its "
            "previous step (row 1) left it at 128 (expected 128; actual 136) "
            "{mtp_k=2, num_seqs=1, num_decode=0}")


def _first(corpus: Corpus, event: str, after: int = 0) -> tuple[int, dict[str, Any]]:
    return next((i, e.values()) for i, e in enumerate(corpus.events)
                if i >= after and e.event == event)


def test_atom_pd_first_decode_reads_no_host_draft_row_before_any_forward():
    """A P/D consumer's first decode as the runner's first forward (``prev_batch is None``):
    prepare_input_ids feeds ``scheduled_tokens`` as they are and reads no host draft row, at
    every commit. A handover of 2 drafts for mtp_k=3 leaves a (1, 2) host array before
    #1771 and a zero-padded row from #1771: the view checks the drafts in the token stream,
    the ones fed, and passes at every depth; once a forward ran, a new seq's row is read
    and demanded again."""
    for version in ("80b5b02be", "26ba9913d", "042e8f1c0", "ffdf3bb5d"):
        corpus = _corpus(version, "pd-first-decode-short-handover")
        _, fields = _first(corpus, "schedule")
        rows = fields["scheduled_spec_decode_tokens"]
        assert fields["total_seqs_num_decode"] == 1 and fields["total_seqs_num_prefill"] == 0
        assert rows.shape == ((1, 2) if corpus.config["layout"] == "pre-1771" else (1, 3))
        for depth in ("metadata", "essential", "full"):
            assert replay(corpus, depth=depth) == [], (version, depth)
        view = _view(corpus)
        with contracts.checking(depth="full"):
            batch = view(types.SimpleNamespace(**fields))
        assert batch is not None
        assert batch.draft_token_ids.tolist() == [fields["scheduled_tokens"][1:].tolist()]
    # No handover at all: an empty host array, which no row is read from either.
    corpus = _corpus("80b5b02be", "pd-first-decode")
    _, fields = _first(corpus, "schedule")
    no_rows = np.asarray([], dtype=np.int32)  # ATOM's np.asarray(list({}.values()), int32)
    empty = types.SimpleNamespace(**{**fields, "scheduled_spec_decode_tokens": no_rows})
    with contracts.checking(depth="full"):
        assert _view(corpus)(empty) is not None
    # After a forward (a DP dummy batch here) the seq is new to the runner, which reads
    # its host row at its batch position: there is none.
    view = _view(corpus)
    view.skipped_forward()
    with pytest.raises(contracts.ContractViolation) as caught, contracts.checking(depth="full"):
        view(empty)
    assert caught.value.violations[0].format() == (
        "SG101 one draft row per decode seq, in batch order [ScheduledBatch.draft_token_ids, "
        "scheduler → runner]: seq 0 at batch position 0: decode seq without a draft row: "
        "draft_token_ids is i32[0,2] but num_decode=1 (expected num_decode=1; actual 0) "
        "{mtp_k=2, num_decode=1, num_tokens=3, num_seqs=1, max_blocks=2}")


def test_atom_recompute_right_after_prefill_refeeding_its_eos_is_sg608():
    """A seq preempted right after its prefill keeps one of the placeholders postprocess
    appended for that step, where its first token belongs: the recompute feeds EOS (2)
    there. The token sampled at prefill (the drafter's ``next_token_ids``) is history, so
    SG608 names it, at every commit."""
    for version in ("80b5b02be", "26ba9913d", "042e8f1c0", "ffdf3bb5d"):
        corpus = _corpus(version, "preempt-after-prefill")
        _, prefill = _first(corpus, "schedule")
        _, drafted = _first(corpus, "drafted")
        assert prefill["req_ids"] == [0, 1] and prefill["context_lens"].tolist() == [6, 6]
        first_token = int(drafted["next_token_ids"][1])
        found = replay(corpus)
        assert [f[:3] for f in found] == [("SG608", 1, 0), ("SG608", 1, 0)]
        assert [f[3] for f in found] == [
            "SG608 a recomputed seq re-feeds only the tokens it was emitted "
            "[RecomputedTokens.token_positions, scheduler → runner]: seq 1 at batch position "
            f"0: re-feeds token 2 at position 6, where the engine sampled {first_token} "
            f"(expected {first_token}; actual 2) {{num_prefill=1}}"] * 2


def test_atom_middle_chunk_samples_are_not_history():
    """A middle chunk samples a guess at a prompt position, which ATOM drops: it is not
    kept as history (from #1771 by ``is_final_chunk``, before by the seq's token count),
    so the next chunk, feeding the prompt's own token there, is no SG608."""
    for version in ("80b5b02be", "26ba9913d", "042e8f1c0", "ffdf3bb5d"):
        corpus = _corpus(version, "middle-chunks-skip-forward")
        (_, mixed), (_, after) = _schedules(corpus)[:2]
        _, drafted = _first(corpus, "drafted")
        assert mixed["context_lens"].tolist()[1] == 64 and after["req_ids"] == [1]
        assert int(drafted["next_token_ids"][1]) != int(after["scheduled_tokens"][0])
        assert replay(corpus) == []


def test_atom_block_size_4_with_mtp_k_4_leaves_the_table_one_block_short():
    """ATOM's BlockManager.may_append(seq, mtp_k + 1) adds blocks only while
    0 < len(seq) % block_size <= mtp_k + 1, for len(seq) counting the positions the step
    writes. With mtp_k + 1 >= block_size a step can move a whole block on and land on a
    boundary: no block is added. Block size 4, mtp_k 4: the first decode after a 7-token
    prefill has context 12 and a 2-block table: SG110, at the default depth as at full, at
    every commit (the table ends short, which the default depth's ends check sees)."""
    for version in ("80b5b02be", "26ba9913d", "042e8f1c0", "ffdf3bb5d"):
        corpus = _corpus(version, "block-size-4-k4")
        assert corpus.config["block_size"] == 4 and corpus.config["mtp_k"] == 4
        _, decode = next((i, f) for i, f in _schedules(corpus) if f["total_seqs_num_decode"])
        assert decode["context_lens"].tolist() == [10, 12]
        assert [len(t) for t in decode["block_tables"]] == [3, 2]
        (found,) = replay(corpus)
        assert found[3] == (
            "SG110 block tables are not empty and cover the context [ScheduledBatch."
            "block_tables, scheduler → runner]: seq 1 at batch position 1: block table is "
            "empty or ends before the context does {mtp_k=4, num_decode=2, num_tokens=10, "
            "num_seqs=2, max_blocks=3}")
        assert replay(corpus, depth="essential") == [found]


@pytest.mark.parametrize("version", ["80b5b02be", "042e8f1c0", "ffdf3bb5d"])
def test_a_minus_one_in_a_draft_row_the_runner_reads_is_caught_by_default(version):
    """The seed rule on ATOM's path: a draft row the runner reads from the host goes to
    the verify forward's embedding, so a -1 there is SG108 at the default depth, naming
    a decode seq and its batch position. The recording itself is clean at that depth,
    and a step whose rows the runner does not read raises nothing for them."""
    corpus = _corpus(version, "new-and-deferred")
    assert replay(corpus, depth="essential") == []
    caught = []
    for index, fields in _schedules(corpus):
        rows = np.asarray(fields.get("scheduled_spec_decode_tokens", []))
        decode = int(fields["total_seqs_num_decode"])
        if not decode or rows.ndim != 2 or rows.shape[0] == 0:
            continue
        view = _view(corpus)
        assert replay(corpus, view, upto=index, depth="essential") == []
        poisoned = rows.copy()
        poisoned[:, 0] = -1
        bad = types.SimpleNamespace(**{**fields, "scheduled_spec_decode_tokens": poisoned})
        with contracts.checking(depth="essential"):
            try:
                view((bad, {}))
            except contracts.ContractViolation as error:
                caught.extend(error.violations)
    assert caught, "no step of the recording has a host draft row the runner reads"
    first_decode = {int(f["total_seqs_num_prefill"]) for _, f in _schedules(corpus)}
    for violation in caught:
        assert violation.code == "SG108"
        assert violation.position is not None and violation.position >= min(first_decode)
        assert "is -1 (expected 0 <= id < vocab_size=" in violation.format()


@pytest.mark.parametrize("version", ["042e8f1c0", "ffdf3bb5d"])
def test_a_remote_seqs_handed_over_drafts_are_told_by_its_remote_kv(version):
    """A P/D consumer's remote seq joins a running decode with the drafts the prefill
    instance handed over: clean, because ATOM lists its remote KV blocks. Without that
    mark the same traffic is a seq first seen at decode with real drafts (SG661)."""
    corpus = _corpus(version, "pd-remote-joins-running")
    assert replay(corpus, depth="essential") == []
    for event in corpus.events:
        if event.event == "schedule":
            del event.fields["remote_kv_seq_blocks"]
    found = replay(corpus, depth="essential")  # the first is where it starts
    assert found[0][:3] == ("SG661", 1, 1)
    assert "first seen at this decode, it carries 2 real drafts" in found[0][3]
