"""The Conformance page's tables, read from the committed corpus files.

One section per engine folder under ``tests/conformance/corpus/`` (any engine recorded in
the corpus format shows up, with no change here), one row per scenario, one column per
engine version, and in each cell what replaying that file through the engine's adapter
must report. The conformance tests replay every file and fail when the adapter reports
anything else, so the page says what CI checks.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from specguard.adapters import ENGINES
from specguard.adapters.corpus import Corpus, corpus_files, read_corpus

__all__ = ["CORPUS", "conformance_tables"]

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "conformance" / "corpus"
# Each corpus folder's title, as its engine registered it (a folder no engine claims is
# shown under its own name).
_ENGINES = {folder: title for engine in ENGINES.values()
            for folder, title in engine.corpus.items()}


def _result(corpus: Corpus) -> str:
    if corpus.valid:
        return "0 violations"
    parts = []
    for expected in corpus.expect:
        where = []
        if expected.seq_id is not None:
            where.append(f"seq {expected.seq_id}")
        if expected.position is not None:
            where.append(f"position {expected.position}")
        parts.append(f"**{expected.code}** {', '.join(where)}".strip())
    return "<br>".join(parts)


def _order(corpus: Corpus) -> tuple[str, str]:
    committed = corpus.config.get("committed")
    return (committed if isinstance(committed, str) else "", corpus.engine_version)


def conformance_tables(page: str, root: str | None = None) -> str:
    """Markdown: per engine, scenario × version → the expected replay result."""
    folder = Path(root) if root else CORPUS
    by_engine: dict[str, list[Corpus]] = defaultdict(list)
    for path in corpus_files(folder):
        corpus = read_corpus(path)
        by_engine[corpus.engine].append(corpus)
    if not by_engine:
        return "No corpus has been recorded yet.\n"
    blocks = []
    for engine in sorted(by_engine):
        files = sorted(by_engine[engine], key=_order)
        versions = list(dict.fromkeys(c.engine_version for c in files))
        scenarios = sorted({c.scenario for c in files})
        cells = {(c.scenario, c.engine_version): _result(c) for c in files}
        described = {c.scenario: c.description for c in files}  # the newest wins
        header = ["scenario"]
        for version in versions:
            first = next(c for c in files if c.engine_version == version)
            note = [str(first.config[key]) for key in ("committed", "layout")
                    if isinstance(first.config.get(key), str)]
            header.append(f"`{version}`" + (f" ({', '.join(note)})" if note else ""))
        lines = [f"## {_ENGINES.get(engine, engine)}", "",
                 f"{len(files)} recorded runs: {len(scenarios)} scenarios × "
                 f"{len(versions)} versions.", "",
                 "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        for scenario in scenarios:
            row = [f"`{scenario}`"]
            row += [cells.get((scenario, v), "not recorded") for v in versions]
            lines.append("| " + " | ".join(row) + " |")
        lines += ["", f"### {_ENGINES.get(engine, engine)} scenarios", "",
                  "| scenario | what the run does |", "|---|---|"]
        lines += [f"| `{scenario}` | {described[scenario].replace('|', '/')} |"
                  for scenario in scenarios]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n"
