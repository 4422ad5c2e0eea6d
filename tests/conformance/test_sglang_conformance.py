"""SGLang's recorded traffic, one folder per release under ``corpus/sglang/``: each file
is a corpus of that engine and release. 0.5.23's overlap worker replays through
``SglangV2View`` in ``test_sglang_v2_conformance.py``."""

from __future__ import annotations

from pathlib import Path

import pytest

from specguard.adapters.corpus import corpus_files, read_corpus

CORPUS = Path(__file__).parent / "corpus" / "sglang"
FILES = sorted(corpus_files(CORPUS))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORPUS)) for p in FILES])
def test_every_sglang_recording_is_filed_under_its_release_and_scenario(path):
    corpus = read_corpus(path)
    assert (corpus.engine, corpus.engine_version, corpus.scenario) == (
        "sglang", path.parent.name, path.stem)


def test_every_recorded_release_has_its_replay():
    releases = {p.parent.name for p in FILES}
    replays = {"0.5.23": "test_sglang_v2_conformance.py"}
    assert releases <= set(replays)
    assert all((Path(__file__).parent / replays[r]).is_file() for r in releases)
