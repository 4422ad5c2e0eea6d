"""Snapshot files as untrusted input and as files on a shared disk: escaped when printed,
refused when ambiguous, and written without following a link planted in the folder."""

from __future__ import annotations

import json
import os
import time

import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence

from specguard import contracts
from specguard.adapters import AtomView, SnapshotError, snapshots
from specguard.cli import main as specguard

K = 3
FAKE_CLEAN = "ScheduledBatch is clean: no rule is broken"


def _clean_fields() -> dict:
    batch = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE)(
        decode_batch([sequence(i, 40, drafts=K) for i in range(2)], dense=True))
    assert batch is not None
    return {f.name: getattr(batch, f.name) for f in contracts.fields_of(type(batch))}


def test_check_escapes_every_string_taken_from_the_file(tmp_path, capsys):
    """ANSI escapes and newlines in `written` or a recorded reason print escaped."""
    path = snapshots.write(tmp_path, "ScheduledBatch", _clean_fields())
    document = json.loads(path.read_text())
    document["written"] = "\x1b[2J\x1b[H"
    document["violations"] = [{
        "code": "SG101", "title": "t\x1b[31m", "boundary": "b", "subject": "ScheduledBatch",
        "reason": f"\r\x1b[2K\n{FAKE_CLEAN}\u202e", "bindings": {}}]
    path.write_text(json.dumps(document))
    assert specguard(["check", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "written \\x1b[2J\\x1b[H" in out
    assert f"\\r\\x1b[2K\\n{FAKE_CLEAN}\\u202e" in out
    assert out.splitlines().count(FAKE_CLEAN) == 1  # the real verdict, printed once


def test_writing_never_follows_a_link_planted_in_the_folder(tmp_path):
    """Links at the names a writer could predict leave their targets untouched."""
    folder, victim = tmp_path / "snapshots", tmp_path / "victim.txt"
    folder.mkdir()
    victim.write_text("precious")
    now = time.time()
    stamps = {time.strftime("%Y%m%d-%H%M%S", time.gmtime(now + d)) for d in range(3)}
    for stamp in stamps:
        for count in range(1, snapshots.MAX_PER_PROCESS + 2):
            for suffix in (".partial", ".json"):
                name = f"ScheduledBatch-{stamp}-{os.getpid()}-{count:04d}{suffix}"
                (folder / name).symlink_to(victim)
    path = snapshots.write(folder, "ScheduledBatch", _clean_fields())
    assert victim.read_text() == "precious"
    assert not path.is_symlink()
    assert snapshots.load(path).type == "ScheduledBatch"


def test_writing_uses_an_unpredictable_exclusive_name(tmp_path, monkeypatch):
    """The file is created with O_EXCL under a random name, then renamed into place."""
    import tempfile

    made: list[str] = []
    mkstemp = tempfile.mkstemp

    def recording(*args, **kwargs):
        handle, name = mkstemp(*args, **kwargs)
        made.append(name)
        return handle, name

    monkeypatch.setattr(tempfile, "mkstemp", recording)
    path = snapshots.write(tmp_path, "ScheduledBatch", _clean_fields())
    [partial] = made
    assert os.path.dirname(partial) == str(tmp_path)
    assert not os.path.exists(partial) and path.exists()


def test_duplicate_keys_are_refused_as_ambiguous(tmp_path, capsys):
    """A key written twice in one object: JSON readers disagree, so the file is refused."""
    path = snapshots.write(tmp_path, "ScheduledBatch", _clean_fields())
    text = path.read_text()
    twice = text.replace('"mtp_k": {"kind": "int", "value": 3}',
                         '"mtp_k": {"kind": "int", "value": 3}, '
                         '"mtp_k": {"kind": "int", "value": 1000}', 1)
    assert twice != text
    path.write_text(twice)
    with pytest.raises(SnapshotError, match="is ambiguous: the key 'mtp_k' appears twice"):
        snapshots.load(path)
    assert specguard(["check", str(path)]) == 2
    assert "ambiguous" in capsys.readouterr().err


def test_a_violation_naming_an_integer_past_int64_is_still_written(tmp_path):
    """A hostile seq id too long to print loses only that number, not the snapshot."""
    from specguard.adapters import _snapshot_format, _snapshot_write
    from specguard.contracts import Violation

    huge = 10**5000
    violation = Violation(code="SG010", title="seq ids are unique", boundary="b",
                          subject="ScheduledBatch", reason="seq <integer of 16610 bits>",
                          position=3, seq_id=huge, token=-huge, bindings={"num_seqs": 4,
                                                                         "mtp_k": huge})
    path = _snapshot_write.write(tmp_path, "ScheduledBatch", {"mtp_k": huge}, (violation,))
    document = _snapshot_format.read_model(path.read_bytes())  # the file's own schema
    assert document.object.fields["mtp_k"].kind == "opaque"
    [record] = document.violations
    assert (record.position, record.seq_id, record.token) == (3, None, None)
    assert dict(record.bindings) == {"num_seqs": 4}
    assert record.reason == "seq <integer of 16610 bits>"
