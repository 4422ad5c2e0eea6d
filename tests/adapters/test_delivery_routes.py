"""The adapters' routes deliver through the contracts' one reporting path: the views'
own reports, ``build``, guards and rank checks reach the listeners with the mode, and the
snapshot writer is one of those listeners, in strict and warn mode alike."""

from __future__ import annotations

import logging
import re

import numpy as np
import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence
from vllm_engine import scheduler_output

from specguard import contracts
from specguard.adapters import (
    AtomView,
    RankStep,
    VllmView,
    _snapshot_write,
    check_ranks,
    guard,
    snapshots,
)
from specguard.adapters._build import build
from specguard.cli import main as specguard

K = 3
SG114 = ("SG114 drafts belong to decode seqs of the batch [vLLM SchedulerOutput."
         "scheduled_spec_decode_tokens, scheduler → runner]: request 'gone' has drafts but is "
         "not in the batch")


@pytest.fixture
def snapshot_dir(tmp_path, monkeypatch):
    """SPECGUARD_SNAPSHOT_DIR pointing at a fresh folder, the per-process cap unspent."""
    folder = tmp_path / "snapshots"
    monkeypatch.setenv(snapshots.ENV_DIR, str(folder))
    monkeypatch.setattr(_snapshot_write, "_written", 0)
    return folder


@pytest.fixture
def heard():
    """Every delivery made during the test."""
    deliveries: list[contracts.Delivery] = []
    with contracts.listening(deliveries.append):
        yield deliveries


def _stray_drafts():
    output = scheduler_output({"a": [5, 6, 7]}, {"new": 40})
    output.scheduled_spec_decode_tokens["gone"] = [1, 2, 3]
    return output


def _view_report() -> None:
    with contracts.checking(depth="metadata"):
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(_stray_drafts())


def _built() -> None:
    seqs = [sequence(i, 40, drafts=K) for i in range(7)] + [sequence(7, 40)]
    AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(decode_batch(seqs))


class _Runner:
    @guard(batch=contracts.ScheduledBatch)
    def forward(self, batch):
        return batch


def _guarded() -> None:
    batch = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(
        decode_batch([sequence(i, 40, drafts=K) for i in range(3)], dense=True))
    assert batch is not None
    object.__setattr__(batch, "num_drafts", batch.num_drafts[:2])
    _Runner().forward(batch)


def _ranks() -> None:
    steps = [RankStep(5, 3, 12, 12, False, 4, [0]), RankStep(5, 2, 12, 12, False, 4, [1])]
    check_ranks(np.stack([s.row(id_slots=2) for s in steps]))


ROUTES = {"view report": (_view_report, "SG114", "VllmSchedule"),
          "build": (_built, "SG101", "ScheduledBatch"),
          "guard": (_guarded, "SG101", "ScheduledBatch"),
          "check_ranks": (_ranks, "SG703", "RankAgreement")}


@pytest.mark.parametrize("mode", ["strict", "warn"])
@pytest.mark.parametrize("route", sorted(ROUTES))
def test_each_adapter_route_delivers_with_the_mode_and_keeps_a_snapshot(
        route, mode, heard, snapshot_dir):
    """The listeners hear the route's violation once, with the mode; the snapshot writer,
    one of them, keeps the object in either mode, and it is counted once."""
    run, code, kept = ROUTES[route]
    with contracts.checking(mode=mode):
        if mode == "strict":
            with pytest.raises(contracts.ContractViolation):
                run()
        else:
            run()
    assert [(d.mode.value, [v.code for v in d]) for d in heard] == [(mode, [code])]
    assert contracts.STATS.violations == 1
    [path] = snapshot_dir.glob("*.json")
    assert path.name.startswith(f"{kept}-")
    assert heard[0].kept_at == str(path)
    assert [v.code for v in snapshots.load(path).recorded] == [code]


@pytest.mark.parametrize("depth", ["metadata", "full"])
def test_sg114_through_vllm_schedule_writes_a_snapshot(depth, snapshot_dir, capsys):
    """Drafts of a request outside the batch: from the keys (below full depth) or from
    the dense rows (full), the view's report keeps the output's counts."""
    with contracts.checking(depth=depth), pytest.raises(contracts.ContractViolation) as caught:
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(_stray_drafts())
    assert caught.value.codes == ("SG114",)
    [path] = snapshot_dir.glob("VllmSchedule-*.json")
    snapshot = snapshots.load(path)
    assert snapshot.fields["num_scheduled_tokens"].tolist() == [4, 40]
    assert snapshot.fields["num_listed_drafts"].tolist() == [3, 0]
    assert f"specguard check {path}" in str(caught.value)
    capsys.readouterr()
    assert specguard(["check", str(path)]) == 0  # the counts themselves are clean
    assert "  recorded: SG114 drafts belong to decode seqs of the batch" in (
        capsys.readouterr().out)


def test_the_next_line_names_the_snapshot_written_or_says_how_to_keep_one(
        tmp_path, monkeypatch):
    """With SPECGUARD_SNAPSHOT_DIR set the message says how to re-check the file just
    written; without it, how to get one."""
    monkeypatch.delenv(snapshots.ENV_DIR, raising=False)
    with pytest.raises(contracts.ContractViolation) as unkept:
        _view_report()
    monkeypatch.setenv(snapshots.ENV_DIR, str(tmp_path))
    monkeypatch.setattr(_snapshot_write, "_written", 0)
    with pytest.raises(contracts.ContractViolation) as kept:
        _view_report()
    [path] = tmp_path.glob("VllmSchedule-*.json")
    head = f"vLLM SchedulerOutput broke 1 rule:\n  {SG114}\n  next: specguard rules SG114; "
    assert str(unkept.value) == head + ("set SPECGUARD_SNAPSHOT_DIR to keep the object for "
                                        "specguard check")
    assert str(kept.value) == head + f"specguard check {path}"


def test_warn_mode_builds_the_object_once_and_returns_it(monkeypatch, heard, caplog):
    """Warn mode logs what the one construction delivered and hands that object back:
    no second construction with the checks off."""
    made = []
    init = contracts.VerifyOutput.__init__

    def counting(self, **fields):
        made.append(self)
        init(self, **fields)

    monkeypatch.setattr(contracts.VerifyOutput, "__init__", counting)
    caplog.set_level(logging.WARNING, logger="specguard")
    fields = {"mtp_k": 2, "vocab_size": 10, "seq_ids": np.arange(2),
              "token_ids": np.zeros((2, 2), dtype=np.int64), "num_accepted": np.zeros(3)}
    with contracts.checking(mode="warn"):
        out = build(contracts.VerifyOutput, fields, names=["r0", "r1"])
    assert made == [out]
    assert contracts.STATS.checks == 1 and contracts.STATS.violations == 1
    assert [d.mode.value for d in heard] == ["warn"]
    [record] = caplog.records
    assert record.getMessage() == f"specguard: {heard[0][0].format()}"


def test_names_are_applied_once_through_nested_contexts(heard):
    """A view's context inside which a build names its seqs: one prefix, one count."""
    output = scheduler_output({"a": [5, 6, 7], "b": [8, 9, 999_999]})
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        VllmView(mtp_k=K, vocab_size=VOCAB).schedule(output)
    [violation] = caught.value.violations
    assert re.match(r"request 'b': (?!request)", violation.reason)
    assert contracts.STATS.violations == 1
    assert heard[0].violations == caught.value.violations


def test_rechecking_a_snapshot_writes_none(snapshot_dir, capsys):
    """`specguard check` re-validates the object it read without writing another file."""
    with pytest.raises(contracts.ContractViolation):
        _built()
    [path] = snapshot_dir.glob("*.json")
    assert specguard(["check", str(path)]) == 1
    assert list(snapshot_dir.glob("*.json")) == [path]
