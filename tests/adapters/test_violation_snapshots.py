"""Violation snapshots: written when a guard raises, re-validated by ``specguard check``."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence

from specguard import contracts
from specguard._cli import check as check_command
from specguard.adapters import AtomView, SnapshotError, StepState, StepTracker, snapshots
from specguard.cli import main as specguard

K = 3


@pytest.fixture
def snapshot_dir(tmp_path, monkeypatch):
    """SPECGUARD_SNAPSHOT_DIR pointing at a fresh folder."""
    folder = tmp_path / "snapshots"
    monkeypatch.setenv("SPECGUARD_SNAPSHOT_DIR", str(folder))
    return folder


def _seed_violation() -> None:
    seqs = [sequence(i, 40, drafts=K) for i in range(7)] + [sequence(7, 40)]
    AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(decode_batch(seqs))


def _check(path, *extra) -> int:
    return check_command.run(argparse.Namespace(file=str(path), json="--json" in extra))


def test_raised_violation_round_trips_through_a_snapshot(snapshot_dir, capsys):
    """The compacted ATOM batch is written on raise; `specguard check` reports SG101 again."""
    with pytest.raises(contracts.ContractViolation):
        _seed_violation()
    [path] = snapshot_dir.glob("ScheduledBatch-*.json")
    capsys.readouterr()
    assert specguard(["check", str(path)]) == 1
    out = capsys.readouterr().out
    assert "  recorded: SG101 one draft row per decode seq, in batch order [ScheduledBatch." \
           "draft_token_ids, scheduler → runner]: seq 7 at batch position 7: decode seq " \
           "without a draft row" in out
    assert re.search(r"^re-validated \(strict, depth full, collect all\):\nScheduledBatch broke "
                     r"1 rule:\n  SG101 .*seq 7 at batch position 7: decode seq without a draft "
                     r"row: draft_token_ids is i32\[7,3\] but num_decode=8", out, re.M)
    snapshot = snapshots.load(path)
    assert snapshot.fields["seq_ids"].tolist() == list(range(8))
    assert snapshot.fields["draft_token_ids"].dtype == np.int32


def test_transition_snapshot_keeps_the_previous_state(snapshot_dir, capsys):
    """A step relation's snapshot holds the previous step's state and re-raises SG601."""
    tracker = StepTracker()
    batch = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(
        decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True))
    assert batch is not None
    tracker.schedule(batch)
    tracker.verify_rows(batch.seq_ids, np.array([0, 0]))
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation):
        tracker.schedule(batch)
    [path] = snapshot_dir.glob("StepTransition-*.json")
    snapshot = snapshots.load(path)
    assert isinstance(snapshot.state, StepState) and snapshot.state.seq_ids.tolist() == [0, 1]
    assert [v.code for v in snapshots.recheck(snapshot)] == ["SG601"]
    assert _check(path) == 1
    assert "previous step: step 0, 2 seqs" in capsys.readouterr().out


def test_guard_revalidating_a_mutated_argument_writes_a_snapshot(snapshot_dir):
    """A runner guard that re-validates a mutated batch snapshots the object it was given."""
    from specguard.adapters import guard_runner

    class Runner:
        def forward(self, batch):
            return batch

    batch = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(
        decode_batch([sequence(i, 40, drafts=K) for i in range(3)], dense=True))
    assert batch is not None
    object.__setattr__(batch, "num_drafts", batch.num_drafts[:2])
    runner = guard_runner(Runner(), {"forward": {"batch": contracts.ScheduledBatch}})
    with pytest.raises(contracts.ContractViolation):
        runner.forward(batch)
    [path] = snapshot_dir.glob("ScheduledBatch-*.json")
    assert [v.code for v in snapshots.recheck(snapshots.load(path))] == ["SG101"]


def test_clean_object_checks_clean(tmp_path, capsys):
    """A snapshot of a clean object exits 0 and says so."""
    batch = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(
        decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True))
    assert batch is not None
    fields = {f.name: getattr(batch, f.name) for f in contracts.fields_of(type(batch))}
    path = snapshots.write(tmp_path, "ScheduledBatch", fields)
    assert _check(path, "--json") == 0
    assert json.loads(capsys.readouterr().out)["violations"] == []


def test_nothing_is_written_without_the_variable(tmp_path, monkeypatch):
    """With SPECGUARD_SNAPSHOT_DIR unset a raise writes no file."""
    monkeypatch.delenv("SPECGUARD_SNAPSHOT_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(contracts.ContractViolation):
        _seed_violation()
    assert list(tmp_path.rglob("*.json")) == []


def test_hostile_field_values_are_kept_as_descriptions(tmp_path):
    """A list or an object where an array belongs is written as data, and re-checks as SG001."""
    batch = decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True)
    fields = {"seq_ids": [1, 2], "block_tables": batch.block_tables, "token_ids": object()}
    snapshot = snapshots.load(snapshots.write(tmp_path, "DrafterInput", {
        "vocab_size": 10, "num_tokens": 2, "seq_ids": fields["seq_ids"],
        "input_ids": fields["token_ids"], "positions": np.arange(2),
        "query_start_loc": np.array([0, 2]), "sample_indices": np.array([1])}))
    assert snapshot.fields["seq_ids"] == [1, 2]
    assert repr(snapshot.fields["input_ids"]) == "<object>"
    assert {v.code for v in snapshots.recheck(snapshot)} == {"SG001"}


def _valid_document(tmp_path) -> dict:
    batch = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(
        decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True))
    assert batch is not None
    fields = {f.name: getattr(batch, f.name) for f in contracts.fields_of(type(batch))}
    return json.loads(snapshots.write(tmp_path, "ScheduledBatch", fields).read_text())


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


HOSTILE = {
    "not json": (lambda d: b"{not json", "is not valid"),
    "truncated": (lambda d: json.dumps(d).encode()[:-40], "is not valid"),
    "not utf-8": (lambda d: b"\xff\xfe\x00garbage", "is not valid"),
    "a list": (lambda d: b"[1, 2, 3]", "is not valid"),
    "nan id": (lambda d: json.dumps(d).replace('"data": [0, 1]', '"data": [NaN, 1]', 1)
               .encode(), "object.fields.seq_ids"),
    "float ids": (lambda d: json.dumps(d).replace('"data": [0, 1]', '"data": [0.5, 1]', 1)
                  .encode(), "object.fields.seq_ids"),
    "string ids": (lambda d: json.dumps(d).replace('"data": [0, 1]', '"data": ["0", "1"]', 1)
                   .encode(), "object.fields.seq_ids"),
    "huge int": (lambda d: json.dumps(d).replace('"data": [0, 1]', '"data": [' + "9" * 40
                                                 + ', 1]', 1).encode(), "object.fields.seq_ids"),
    "deep nesting": (lambda d: ('{"format": ' + _deep(100000) + "}").encode(), "is not valid"),
    "unknown object type": (lambda d: json.dumps(d).replace('"ScheduledBatch"', '"Exploit"', 1)
                            .encode(), "unknown object type 'Exploit'"),
    "unknown field": (lambda d: json.dumps(d).replace('"mtp_k":', '"__class__":', 1).encode(),
                      "unknown: ['__class__']"),
    "field name with a dot": (lambda d: json.dumps(d).replace('"mtp_k":', '"a.b":', 1).encode(),
                              "is not valid"),
    "renamed field": (lambda d: json.dumps(d).replace('"mtp_k":', '"mtp_kk":', 1).encode(),
                      "unknown: ['mtp_kk'], missing: ['mtp_k']"),
    "unknown kind": (lambda d: json.dumps(d).replace('"kind": "int"', '"kind": "pickle"', 1)
                     .encode(), "is not valid"),
    "wrong version": (lambda d: json.dumps(d).replace('"version": 1', '"version": 2', 1)
                      .encode(), "version"),
    "object dtype": (lambda d: json.dumps(d).replace('"dtype": "int64"', '"dtype": "object"', 1)
                     .encode(), "dtype"),
    "huge shape": (lambda d: json.dumps(d).replace('"shape": [2]', '"shape": [4000000000]', 1)
                   .encode(), "shape"),
    "shape and data disagree": (lambda d: json.dumps(d).replace('"shape": [2]', '"shape": [3]',
                                                                1).encode(), "needs 3 elements"),
    "out of dtype range": (lambda d: json.dumps(d).replace(
        '"dtype": "int32", "shape": [2], "data": [4, 4]',
        '"dtype": "int32", "shape": [2], "data": [4, 9999999999]', 1).encode(),
        "outside the range of int32"),
    "bools for ints": (lambda d: json.dumps(d).replace('"data": [0, 1]', '"data": [true, false]',
                                                       1).encode(), "do not match dtype"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_files_are_snapshot_errors(tmp_path, case, capsys):
    """Truncated, corrupt or hostile files are SnapshotError and exit 2, never a crash."""
    make, message = HOSTILE[case]
    path = tmp_path / "bad.json"
    path.write_bytes(make(_valid_document(tmp_path)))
    with pytest.raises(SnapshotError, match=re.escape(message)):
        snapshots.load(path)
    assert _check(path) == 2
    assert capsys.readouterr().err.startswith("specguard check: ")


def test_oversized_file_is_refused_before_parsing(tmp_path, monkeypatch):
    """A file over the size limit is refused without being parsed."""
    from specguard.adapters import _snapshot_format

    monkeypatch.setattr(_snapshot_format, "MAX_FILE_BYTES", 100)
    path = tmp_path / "big.json"
    path.write_text(" " * 200)
    with pytest.raises(SnapshotError, match="larger than 100 bytes"):
        snapshots.load(path)


@pytest.mark.parametrize(("kind", "message"), [
    ("missing", "cannot read snapshot {path}: No such file or directory"),
    ("directory", "snapshot {path} is not a regular file (a directory)"),
])
def test_unreadable_paths_exit_2(tmp_path, kind, message, capsys):
    """A missing file or a folder is a SnapshotError with exit status 2."""
    path = tmp_path / "absent.json" if kind == "missing" else tmp_path
    assert _check(path) == 2
    assert message.format(path=path) in capsys.readouterr().err


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_is_refused_at_once_not_read(tmp_path, capsys):
    """Nothing writes to the FIFO: reading it would block forever. It is refused, exit 2,
    in one line, before anything is read."""
    fifo = tmp_path / "snapshot.json"
    os.mkfifo(fifo)
    # In a process of its own: a reader that blocks is a failed test, not a hung run.
    done = subprocess.run([sys.executable, "-m", "specguard", "check", str(fifo)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (f"specguard check: snapshot {fifo} is not a regular file (a "
                           "FIFO): specguard check reads snapshot files only\n")


def test_a_device_is_refused(capsys):
    assert _check(Path(os.devnull)) == 2
    assert "is not a regular file (a character device)" in capsys.readouterr().err


def test_malformed_state_is_a_snapshot_error(tmp_path):
    """A state whose arrays disagree in length is refused as malformed."""
    tracker = StepTracker()
    batch = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(
        decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True))
    assert batch is not None
    tracker.schedule(batch)
    state = tracker.close()
    fields = {f.name: getattr(batch, f.name) for f in contracts.fields_of(type(batch))}
    path = snapshots.write(tmp_path, "ScheduledBatch", fields, state=state)
    document = json.loads(path.read_text())
    document["state"]["fields"]["starts"] = {"kind": "array", "dtype": "int64", "shape": [1],
                                             "data": [3]}
    path.write_text(json.dumps(document))
    with pytest.raises(SnapshotError, match="previous step's state is malformed"):
        snapshots.load(path)


def test_violation_records_hold_exactly_a_violations_fields():
    """The file's violation record is the Violation's fields, in its record order, each
    optional exactly where the Violation's is; a record reads back as the violation."""
    import dataclasses

    from specguard.adapters._snapshot_format import ViolationRecord
    from specguard.contracts._core._violation import RECORD_FIELDS

    assert tuple(ViolationRecord.model_fields) == RECORD_FIELDS
    fields = {f.name: f for f in dataclasses.fields(contracts.Violation)}
    for name, info in ViolationRecord.model_fields.items():
        has_default = fields[name].default is not dataclasses.MISSING \
            or fields[name].default_factory is not dataclasses.MISSING
        assert info.is_required() != has_default, name
    violation = contracts.Violation(code="SG010", title="t", boundary="b", subject="S",
                                    reason="r", field="f", position=1, seq_id=2, expected="e",
                                    actual="a", token=3, bindings={"n": 4})
    record = ViolationRecord.model_validate(violation.to_dict())
    assert contracts.Violation(**record.model_dump()) == violation
