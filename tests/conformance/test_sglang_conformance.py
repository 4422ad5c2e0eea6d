"""SGLang's own traffic, recorded from its scheduler-side code and v1 EAGLE worker on CPU,
replayed through ``SglangView``: valid traffic gives no violation at the default depth
and at full depth, and each buggy recording exactly the rules it re-creates."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sglang_traffic import feed, view_of

from specguard import contracts
from specguard.adapters.corpus import Corpus, corpus_files, read_corpus

CORPUS = Path(__file__).parent / "corpus" / "sglang"
#: The releases of the v1 worker (``eagle_worker.py``; 0.5.12 is the last): each is
#: replayed with its own objects' field names, but 0.5.12's (whose ``verify(batch)`` the
#: installer refuses), replayed under 0.5.10's as data.
RELEASES = ("0.5.10.post1", "0.5.11", "0.5.12")
FILES = sorted(corpus_files(CORPUS / "0.5.10.post1"))
EVERY_RELEASE = [path for release in RELEASES for path in sorted(corpus_files(CORPUS / release))]


def _replay(corpus: Corpus, depth: str) -> list[contracts.Violation]:
    """Every violation the view reports on the corpus, strict and at ``depth``."""
    view = view_of(corpus)
    found: list[contracts.Violation] = []
    with contracts.checking(mode="strict", depth=depth):
        for event in corpus.events:
            try:
                feed(view, event.event, event.values(), corpus.engine_version)
            except contracts.ContractViolation as error:
                found += error.violations
    return found


def _events(corpus: Corpus, name: str) -> list[dict]:
    return [event.values() for event in corpus.events if event.event == name]


@pytest.mark.parametrize("depth", ["essential", "full"])
@pytest.mark.parametrize("path", EVERY_RELEASE,
                         ids=[f"{p.parent.name}/{p.stem}" for p in EVERY_RELEASE])
def test_recorded_sglang_traffic_replays_as_expected(path, depth):
    """Valid recordings: nothing at either depth. Buggy ones: exactly their rules, each
    caught at the default depth too; a violation located at a batch position names the
    request there."""
    corpus = read_corpus(path)
    found = _replay(corpus, depth)
    if corpus.valid:
        assert [v.format() for v in found] == []
        return
    assert {v.code for v in found} == {e.code for e in corpus.expect}
    req_ids = {r for e in _events(corpus, "schedule") for r in e["req_ids"]}
    located = [v for v in found if v.position is not None]
    assert all(v.reason.startswith("request '") and v.reason.split("'")[1] in req_ids
               for v in located)
    assert located or {v.code for v in found} == {"SG640"}  # a count names no row


@pytest.mark.parametrize("release", RELEASES[1:])
def test_every_v1_release_has_the_scenarios_of_0_5_10(release):
    """Each later release of the v1 worker is recorded in the same scenarios, under its
    own version."""
    files = sorted(corpus_files(CORPUS / release))
    assert {p.stem for p in files} == {p.stem for p in FILES}
    assert {read_corpus(p).engine_version for p in files} == {release}


def test_corpus_covers_the_scenarios_sglang_users_meet():
    """Mixed prompt lengths, a finish at prefill and one inside a verify, a merge into the
    running batch, a retract and re-prefill, batches of 1 and 9, and the buggy recordings
    named by their rules: a missing file fails here rather than shrinking the replay."""
    recorded = {p.stem for p in FILES}
    assert {"mixed-prompts", "finish-at-prefill-and-in-verify", "join-running-batch",
            "retract-reprefill", "batch-1", "batch-9"} <= recorded
    buggy = {p.stem.split("-")[0] for p in FILES if not read_corpus(p).valid}
    assert {"SG640", "SG647", "SG108"} <= buggy
    sizes = {len(e["req_ids"]) for p in FILES for e in _events(read_corpus(p), "drafted")}
    assert {1, 9} <= sizes


def test_the_recordings_hold_what_the_scenarios_say():
    """The traffic shows SGLang doing what each scenario is about: a request finished at
    prefill never drafts, one finished inside a verify leaves the next draft input, a
    merged batch grows, a retracted request comes back with new pool rows."""
    corpus = read_corpus(CORPUS / "0.5.10.post1" / "finish-at-prefill-and-in-verify.json")
    drafted = {r for e in _events(corpus, "drafted") for r in e["req_ids"]}
    assert "req-0" not in drafted and {"req-1", "req-2"} <= drafted
    finishing = next(e for e in _events(corpus, "verified") if any(e["finished"]))
    unfinished = [a for a, f in zip(finishing["accept_length_per_req_cpu"],
                                    finishing["finished"], strict=True) if not f]
    assert finishing["next_accept_length_cpu"] == unfinished
    joined = read_corpus(CORPUS / "0.5.10.post1" / "join-running-batch.json")
    sizes = [len(e["req_ids"]) for e in _events(joined, "drafted")]
    assert sizes[0] == 2 and max(sizes) == 4
    retract = read_corpus(CORPUS / "0.5.10.post1" / "retract-reprefill.json")
    prefills = [e for e in _events(retract, "schedule") if e["forward_mode"] == "EXTEND"]
    assert len(prefills) == 2 and prefills[1]["req_ids"] == ["req-2"]
    assert prefills[1]["prefix_lens"] == [0]  # re-prefilled whole: prompt and output so far
    pools = [dict(zip(e["req_ids"], e["req_pool_indices"].tolist(), strict=True))
             for e in _events(retract, "schedule") if e["forward_mode"] == "DECODE"]
    before = next(p for p in pools if "req-2" in p)["req-2"]
    after = [p["req-2"] for p in pools if "req-2" in p][-1]
    assert before != after


def test_verified_ids_change_dtype_between_prefill_and_verify():
    """Legal variation the view must take as it comes: verified_id is int64 after a
    prefill and int32 after a verify; draft-extend ids are int32; rows are bs*(steps+1)
    at verify and sum(accepted+1) at draft extend."""
    corpus = read_corpus(CORPUS / "0.5.10.post1" / "mixed-prompts.json")
    schedules = [e for e in _events(corpus, "schedule") if e["forward_mode"] == "DECODE"]
    assert schedules[0]["verified_id"].dtype == np.int64
    assert schedules[1]["verified_id"].dtype == np.int32
    extend = _events(corpus, "draft_extend")[0]
    verified = _events(corpus, "verified")[0]
    assert extend["input_ids"].dtype == np.int32
    assert extend["input_ids"].shape[0] == sum(a + 1 for a in
                                               verified["accept_length_per_req_cpu"])
    drafted = _events(corpus, "drafted")[0]
    assert drafted["draft_token"].shape[0] == len(drafted["req_ids"]) * (
        int(corpus.config["spec_steps"] or 0) + 1)


def _as_tensors(fields: dict) -> dict:
    """The event's arrays as CPU tensors, the form SGLang hands them over in."""
    torch = pytest.importorskip("torch")
    return {name: torch.from_numpy(value) if isinstance(value, np.ndarray) else value
            for name, value in fields.items()}


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_the_traffic_as_torch_tensors_replays_the_same(path):
    """SGLang's tensors, not numpy arrays: each object the view builds keeps one backend
    (its batch positions and expectations are made on the tensors' device), so the replay
    reports what the numpy replay reports, and no SG005."""
    corpus = read_corpus(path)
    view = view_of(corpus)
    found: list[contracts.Violation] = []
    with contracts.checking(mode="strict", depth="full"):
        for event in corpus.events:
            try:
                feed(view, event.event, _as_tensors(event.values()))
            except contracts.ContractViolation as error:
                found += error.violations
    assert {v.code for v in found} == {e.code for e in corpus.expect}


def _recorder() -> Any:
    """tools/record_corpus/sglang.py, loaded by path (its name would shadow SGLang's)."""
    path = Path(__file__).parents[2] / "tools" / "record_corpus" / "sglang.py"
    spec = importlib.util.spec_from_file_location("sglang_corpus_recorder", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def test_the_recorder_hands_0_5_23_to_its_own_recorder(tmp_path, monkeypatch, capsys):
    """--release 0.5.23 is recorded by tools/record_corpus/sglang_v2.py: without that file
    the recorder says so and fails; with it, its record(source_dir, corpus_dir) runs.
    Neither imports SGLang."""
    recorder = _recorder()
    monkeypatch.setattr(recorder, "ROOT", tmp_path)
    assert recorder.main(["SRC", "--release", "0.5.23"]) == 1
    assert "sglang_v2.py" in capsys.readouterr().err
    tools = tmp_path / "tools" / "record_corpus"
    tools.mkdir(parents=True)
    (tools / "sglang_v2.py").write_text(
        "import json, pathlib\n"
        "def record(source_dir, corpus_dir):\n"
        "    pathlib.Path(corpus_dir).mkdir(parents=True)\n"
        "    (pathlib.Path(corpus_dir) / 'called.json').write_text("
        "json.dumps([str(source_dir), str(corpus_dir)]))\n")
    out = tmp_path / "out"
    assert recorder.main(["SRC", "--release", "0.5.23", "--out", str(out)]) == 0
    assert json.loads((out / "called.json").read_text()) == ["SRC", str(out)]
    assert recorder.main(["SRC", "--release", "0.4.0"]) == 2
