"""Conformance corpora: boundary traffic recorded from a real engine, kept as data.

A corpus file holds one scenario of one engine version: the engine's configuration, the
events it produced in order (a scheduler's output, a sampler's result, a drafter's
proposal...), each with its fields in the engine's own names, and what replaying them
through an adapter must report::

    {"format": "specguard-corpus", "version": 1,
     "engine": "vllm", "engine_version": "0.11.0", "scenario": "chunked-prefill",
     "description": "...", "config": {"mtp_k": 3, "vocab_size": 1000},
     "events": [{"event": "schedule", "fields": {"num_scheduled_tokens": {"r0": 4},
                 "block_ids": {"kind": "array", "dtype": "int32", "shape": [2],
                               "data": [0, 1]}}}],
     "expect": []}

Field values are plain JSON (ints, bools, strings, null, lists, objects keyed by strings),
except that an integer or bool array is written as the snapshot format's array record
(``kind``/``dtype``/``shape``/``data``) and read back as a numpy array. ``expect`` empty
means the traffic is valid and must replay with no violation at full depth; otherwise it
lists the violations, by rule code and, where the rule names them, seq and position.

Corpora carry no engine code. Reading goes through strict pydantic models with size
limits, like snapshots: nothing in a file is executed or trusted.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from specguard.adapters import _snapshot_format as fmt
from specguard.contracts import SpecguardError

__all__ = [
    "Corpus",
    "CorpusError",
    "Event",
    "Expected",
    "corpus_files",
    "decode_tree",
    "encode_tree",
    "read_corpus",
    "write_corpus",
]

FORMAT: Literal["specguard-corpus"] = "specguard-corpus"
VERSION: Literal[1] = 1
#: Deepest nesting of a field value (engines hand over dicts of lists of ints).
MAX_DEPTH = 8

_STRICT = ConfigDict(extra="forbid", strict=True, frozen=True)
_Text = Annotated[StrictStr, Field(max_length=4000)]
_Label = Annotated[StrictStr, Field(max_length=100, pattern=r"^[A-Za-z0-9_.+-]+$")]


class Event(BaseModel):
    """One hand-over the engine made: its name and its fields as written."""

    model_config = _STRICT
    event: _Label
    fields: Annotated[dict[StrictStr, Any], Field(max_length=64)]

    def values(self) -> dict[str, Any]:
        """The fields decoded: array records become numpy arrays, the rest stays as is."""
        return {name: decode_tree(value) for name, value in self.fields.items()}


class Expected(BaseModel):
    """A violation that replaying the corpus must report."""

    model_config = _STRICT
    code: Annotated[StrictStr, Field(pattern=r"^SG\d{3}$")]
    seq_id: StrictInt | StrictStr | None = None
    position: StrictInt | None = None


class Corpus(BaseModel):
    """One recorded scenario of one engine version."""

    model_config = _STRICT
    format: Literal["specguard-corpus"] = FORMAT
    version: Literal[1] = VERSION
    engine: _Label
    engine_version: _Label
    scenario: _Label
    description: _Text
    config: Annotated[dict[StrictStr, StrictInt | bool | StrictStr | None],
                      Field(max_length=64)]
    events: Annotated[list[Event], Field(max_length=10_000)]
    expect: Annotated[list[Expected], Field(max_length=1000)] = []

    @property
    def valid(self) -> bool:
        """Whether the traffic is valid engine behaviour (no violation expected)."""
        return not self.expect


def encode_tree(value: Any, depth: int = 0) -> Any:
    """The JSON form of a field value: arrays become array records, the rest plain JSON."""
    if depth > MAX_DEPTH:
        raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, Mapping):
        return {str(key): encode_tree(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encode_tree(item, depth + 1) for item in value]
    record = fmt.encode(value, fmt.Budget())
    if record["kind"] != "array":
        raise TypeError(f"cannot record a value of type {type(value).__name__}")
    return record


def decode_tree(value: Any, depth: int = 0) -> Any:
    """The inverse of :func:`encode_tree`; a malformed array record is a ValueError."""
    if depth > MAX_DEPTH:
        raise ValueError(f"value nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, dict):
        if value.get("kind") == "array":
            return fmt.decode_array(fmt.ArrayValue.model_validate(value))
        return {key: decode_tree(item, depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_tree(item, depth + 1) for item in value]
    return value


class CorpusError(SpecguardError, ValueError):
    """A corpus file that is not JSON, not of this format, or holds a malformed value."""


CorpusError.__module__ = "specguard.adapters"


def read_corpus(path: str | Path) -> Corpus:
    """Parse and validate one corpus file; :class:`CorpusError` (a ``ValueError``) names
    the file and what is wrong with it when it is malformed."""
    raw = Path(path).read_bytes()
    if len(raw) > fmt.MAX_FILE_BYTES:
        raise CorpusError(f"{path}: larger than {fmt.MAX_FILE_BYTES} bytes")
    try:
        corpus = Corpus.model_validate_json(raw)
        for event in corpus.events:
            event.values()  # array records are checked now, not halfway through a replay
    except ValidationError as error:
        raise CorpusError(f"{path}: {_first_problem(error)}") from error
    except ValueError as error:  # an array record that disagrees with itself
        raise CorpusError(f"{path}: {error}") from error
    return corpus


def _first_problem(error: ValidationError) -> str:
    """pydantic's first complaint, where it is in the file and what it is, in one line
    (and how many more there are)."""
    problems = error.errors(include_url=False)
    first = problems[0]
    where = ".".join(str(part) for part in first["loc"]) or "the document"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def write_corpus(path: str | Path, corpus: Corpus) -> None:
    """Write a corpus as stable, diff-friendly JSON (sorted keys, one event a line)."""
    document = corpus.model_dump(mode="json")
    events = document.pop("events")
    lines = [json.dumps(event, sort_keys=True, separators=(",", ":")) for event in events]
    head = json.dumps(document, sort_keys=True, indent=1)[:-2]
    body = ",\n".join(lines)
    Path(path).write_text(f'{head},\n "events": [\n{body}\n]}}\n', encoding="utf-8")


def corpus_files(root: str | Path) -> Iterator[Path]:
    """Every corpus file under a folder (``<engine>/<version>/<scenario>.json``), sorted."""
    yield from sorted(Path(root).rglob("*.json"))
