"""The conformance corpus format: recorded engine traffic written and read back as data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from specguard.adapters.corpus import (
    Corpus,
    Event,
    Expected,
    corpus_files,
    decode_tree,
    encode_tree,
    read_corpus,
    write_corpus,
)


def _corpus(**overrides):
    fields = {"num_scheduled_tokens": {"r0": 4, "r1": 1},
              "block_ids": np.array([[0, 1], [2, -1]], dtype=np.int32),
              "spec": [[5, 6], []], "name": "r0", "flag": True, "none": None}
    base = dict(engine="vllm", engine_version="0.11.0", scenario="mixed-batch",
                description="two requests", config={"mtp_k": 2, "async": False},
                events=[Event(event="schedule", fields=encode_tree(fields))])
    return Corpus(**{**base, **overrides})


def test_corpus_round_trips_arrays_dicts_and_scalars(tmp_path):
    """A written corpus reads back with the same events, arrays as numpy arrays."""
    path = tmp_path / "c.json"
    write_corpus(path, _corpus(expect=[Expected(code="SG101", seq_id="r1", position=1)]))
    back = read_corpus(path)
    values = back.events[0].values()
    assert values["block_ids"].dtype == np.int32
    assert values["block_ids"].tolist() == [[0, 1], [2, -1]]
    assert values["num_scheduled_tokens"] == {"r0": 4, "r1": 1}
    assert values["spec"] == [[5, 6], []]
    assert (values["name"], values["flag"], values["none"]) == ("r0", True, None)
    assert back.expect[0].seq_id == "r1" and not back.valid


def test_corpus_without_expectations_is_valid_traffic():
    """No expected violation means the traffic must replay clean."""
    assert _corpus().valid


def test_corpus_refuses_unknown_keys(tmp_path):
    """A misspelt top-level key is an error, not ignored."""
    path = tmp_path / "c.json"
    write_corpus(path, _corpus())
    document = json.loads(path.read_text())
    document["expekt"] = []
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match="expekt"):
        read_corpus(path)


@pytest.mark.parametrize(("text", "reason"), [
    ("{nope", "the document: Invalid JSON: key must be a string at line 1 column 2"),
    ("[]", "the document: Input should be an object"),
    ('{"format": "specguard-corpus"}', "engine: Field required (and 5 more)"),
], ids=["not json", "a list", "no version"])
def test_an_unreadable_corpus_file_is_a_corpus_error_naming_it(tmp_path, text, reason):
    """A file that is not a corpus says so in one line, with its path and the first
    problem (pydantic's full report is chained), as a specguard error."""
    from specguard.adapters import CorpusError
    from specguard.contracts import SpecguardError

    path = tmp_path / "c.json"
    path.write_text(text)
    with pytest.raises(CorpusError) as raised:
        read_corpus(path)
    assert str(raised.value) == f"{path}: {reason}"
    assert isinstance(raised.value, SpecguardError) and isinstance(raised.value, ValueError)


def test_corpus_refuses_an_array_record_whose_data_disagrees_with_its_shape(tmp_path):
    """A malformed array is reported when the file is read, not during a replay."""
    path = tmp_path / "c.json"
    write_corpus(path, _corpus())
    document = json.loads(path.read_text())
    document["events"][0]["fields"]["block_ids"]["shape"] = [3, 2]
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"shape \[3, 2\] needs 6 elements, data has 4"):
        read_corpus(path)


def test_encode_tree_refuses_values_it_cannot_record():
    """A float array or an object has no faithful record: refused, not described."""
    with pytest.raises(TypeError, match="cannot record a value of type ndarray"):
        encode_tree(np.zeros(2, dtype=np.float32))


def test_decode_tree_refuses_deep_nesting():
    """Nesting is bounded, so a hostile file cannot exhaust the stack."""
    deep: object = 1
    for _ in range(20):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper than 8 levels"):
        decode_tree(deep)


def test_corpus_files_lists_json_files_sorted(tmp_path):
    """Files are found under engine/version folders, in a stable order."""
    for name in ("vllm/0.11.0/b.json", "atom/x/a.json", "vllm/0.11.0/a.json"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        write_corpus(tmp_path / name, _corpus())
    found = [p.relative_to(tmp_path).as_posix() for p in corpus_files(tmp_path)]
    assert found == ["atom/x/a.json", "vllm/0.11.0/a.json", "vllm/0.11.0/b.json"]
