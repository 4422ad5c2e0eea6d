"""Hostile snapshot files, generated: duplicate keys anywhere are refused as ambiguous,
and escape sequences anywhere a file holds text never reach the terminal raw."""

from __future__ import annotations

import contextlib
import io
import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from specguard.adapters import SnapshotError, snapshots
from specguard.cli import main as specguard

_CLEAN = {"mtp_k": 2, "vocab_size": 8, "seq_ids": np.arange(2),
          "draft_token_ids": np.zeros((2, 2), dtype=np.int64)}


def _document() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as folder:
        return json.loads(snapshots.write(Path(folder), "DrafterOutput", _CLEAN).read_text())


DOCUMENT = _document()


def _objects(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The path of every JSON object in ``value`` that has at least one key."""
    found = [path] if isinstance(value, dict) and value else []
    children = value.items() if isinstance(value, dict) else (
        enumerate(value) if isinstance(value, list) else ())
    for key, child in children:
        found += _objects(child, (*path, key))
    return found


OBJECTS = _objects(DOCUMENT)


def _dump(value: Any, twice: tuple[Any, ...] | None, key: str, path: tuple[Any, ...] = ()) -> str:
    """JSON text of ``value`` with ``key`` written twice in the object at ``twice``."""
    if isinstance(value, dict):
        pairs = [f"{json.dumps(k)}: {_dump(v, twice, key, (*path, k))}" for k, v in value.items()]
        if path == twice:
            pairs.append(f"{json.dumps(key)}: {json.dumps(value[key])}")
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_dump(v, twice, key, (*path, i)) for i, v in enumerate(value)) + "]"
    return json.dumps(value)


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def duplicated(draw: st.DrawFn) -> tuple[str, str]:
    """A valid snapshot's text with one key of one object, anywhere, written twice."""
    path = draw(st.sampled_from(OBJECTS))
    key = draw(st.sampled_from(sorted(_at(DOCUMENT, path))))
    return _dump(DOCUMENT, path, key), key


# Terminal controls, line breaks, bidi overrides and ordinary text, mixed.
ESCAPES = st.lists(st.one_of(
    st.sampled_from(["\x1b[2J", "\x1b[H", "\x1b]0;title\x07", "\r", "\n", "\x08", "\u202e",
                     "\u2028", "\x00", "\x9b31m"]),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=8),
), min_size=1, max_size=8).map("".join)


@given(duplicated())
def test_a_key_written_twice_anywhere_is_refused(case):
    """Whichever object repeats a key, the file is a SnapshotError saying it is ambiguous."""
    text, key = case
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "twice.json"
        path.write_text(text, encoding="utf-8")
        try:
            snapshots.load(path)
        except SnapshotError as error:
            assert f"is ambiguous: the key {key!r} appears twice" in str(error)
        else:
            raise AssertionError("a file with a repeated key was accepted")


@given(written=ESCAPES, reason=ESCAPES, title=ESCAPES, expected=ESCAPES)
def test_escape_sequences_in_a_file_never_reach_the_terminal(written, reason, title, expected):
    """Every string check prints from a file comes out printable; lines are check's own."""
    document = json.loads(json.dumps(DOCUMENT))
    document["written"] = written[:64]
    document["violations"] = [{"code": "SG105", "title": title, "boundary": "b",
                               "subject": "DrafterOutput", "reason": reason,
                               "expected": expected, "bindings": {}}]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "escapes.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = specguard(["check", str(path)])
    assert status == 0
    lines = out.getvalue().splitlines()
    assert all(line.isprintable() for line in lines)
    assert len(lines) == 5  # snapshot, type and time, recorded, re-validated, verdict
    assert lines[-1] == "DrafterOutput is clean: no rule is broken"
