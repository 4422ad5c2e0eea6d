"""Hypothesis strategies for the boundary objects, all in one module.

Three families, each driven by the contract's own metadata rather than by lists kept here:

* **valid cases** over the whole space: empty batches, one seq, thousands; all-prefill,
  all-decode and mixed batches; seqs without drafts at the front, middle and tail;
  ``mtp_k`` 1..8; int32, int64 or both in one object; numpy or torch on the CPU; views with
  strides, slices of bigger buffers, Fortran-ordered and read-only arrays;
* **mutations** that break exactly one rule of :data:`specguard.contracts.REGISTRY` each;
* **hostile values**: the wrong types, dtypes, ranks, backends and devices for a field.

A :class:`Case` keeps canonical values (int64 and bool numpy arrays, Python ints) and how
to lay them out; :meth:`Case.kwargs` materialises fresh arrays on every call. Values come
from a seeded numpy generator, so an example with thousands of seqs costs Hypothesis a
handful of draws; the structure (sizes, phases, patterns, layouts) is drawn explicitly and
shrinks well.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import reject
from hypothesis import strategies as st
from specguard.contracts import (
    DIMENSIONS,
    REGISTRY,
    ArrayField,
    DrafterInput,
    DrafterOutput,
    DraftTokens,
    ModelInput,
    ScalarField,
    ScheduledBatch,
    VerifyOutput,
    fields_of,
)

from specguard import contracts

Draw = Callable[[st.SearchStrategy[Any]], Any]
Rng = np.random.Generator

BACKENDS = ("numpy", "torch")
ID_DTYPES = ("int32", "int64")
#: How an array is laid out in memory; every layout holds the same values.
STYLES = ("contiguous", "strided", "offset", "fortran", "columns", "readonly", "reversed",
          "broadcast")
#: Upper bound of the "thousands of seqs" size class.
MAX_SEQS = 2048
_INT32_MAX = 2**31 - 1
_JUNK = -7  # what surrounds a view in its bigger buffer: an invalid id for every rule


# --------------------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """A boundary object to build: canonical values, their layout, and late overrides."""

    cls: type[contracts.BoundaryObject]
    values: Mapping[str, Any]
    backend: str = "numpy"
    dtypes: Mapping[str, str] = field(default_factory=dict)
    styles: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)

    def with_values(self, **values: Any) -> Case:
        """The same case with some canonical values replaced."""
        return dataclasses.replace(self, values={**self.values, **values})

    def with_after(self, name: str, change: Callable[[Any], Any]) -> Case:
        """The same case whose field ``name`` is changed after materialisation."""
        return dataclasses.replace(self, after={**self.after, name: change})

    def kwargs(self) -> dict[str, Any]:
        """Fresh constructor arguments: arrays in the case's backend, dtypes and styles."""
        out = {}
        for name, value in self.values.items():
            made = materialize(value, self.backend, self.dtypes.get(name, "int64"),
                               self.styles.get(name, "contiguous"))
            out[name] = self.after[name](made) if name in self.after else made
        return out

    def build(self) -> Any:
        """Construct (and so validate, under the config in force) the object."""
        return self.cls(**self.kwargs())

    def __repr__(self) -> str:
        shapes = {k: contracts.describe(v) for k, v in self.kwargs().items()}
        return (f"Case({self.cls.__name__}, {self.backend}, styles={dict(self.styles)}, "
                f"after={sorted(self.after)}, {shapes})")


@dataclass(frozen=True)
class MappingCase:
    """Arguments of :meth:`DraftTokens.from_mapping`, the engines' usual form of drafts."""

    seq_ids: Any
    drafts: Any
    mtp_k: Any
    vocab_size: Any
    placeholder: Any = 0
    dtype: Any = np.int32

    def build(self) -> Any:
        """Call ``DraftTokens.from_mapping`` with these arguments."""
        return DraftTokens.from_mapping(
            self.seq_ids, self.drafts, mtp_k=self.mtp_k, vocab_size=self.vocab_size,
            placeholder=self.placeholder, dtype=self.dtype)


# ------------------------------------------------------------------ materialisation


def _fits_int32(a: np.ndarray) -> bool:
    return a.size == 0 or bool(a.min() >= -(2**31) and a.max() <= _INT32_MAX)


def materialize(value: Any, backend: str, dtype: str, style: str) -> Any:
    """A fresh array holding ``value`` in the given backend, id dtype and memory layout."""
    if not isinstance(value, np.ndarray):
        return value
    if value.dtype != np.bool_:
        wanted = dtype if dtype == "int64" or _fits_int32(value) else "int64"
        value = value.astype(wanted)
    if backend == "torch":
        return _torch_layout(torch.from_numpy(value.copy()), style)
    return _numpy_layout(value.copy(), style)


def _junk_buffer(shape: tuple[int, ...], dtype: Any, like: str) -> Any:
    if like == "torch":
        fill = True if dtype == torch.bool else _JUNK
        return torch.full(shape, fill, dtype=dtype)
    return np.full(shape, True if dtype == np.bool_ else _JUNK, dtype=dtype)


def _numpy_layout(a: np.ndarray, style: str) -> np.ndarray:
    if a.ndim == 0 or style == "contiguous":
        return a
    if style == "strided":
        buffer = _junk_buffer((2 * a.shape[0], *a.shape[1:]), a.dtype, "numpy")
        buffer[::2] = a
        return buffer[::2]
    if style == "offset":
        buffer = _junk_buffer((a.shape[0] + 5, *a.shape[1:]), a.dtype, "numpy")
        buffer[2 : 2 + a.shape[0]] = a
        return buffer[2 : 2 + a.shape[0]]
    if style == "fortran":
        return np.asfortranarray(a) if a.ndim == 2 else a
    if style == "columns" and a.ndim == 2:
        buffer = _junk_buffer((a.shape[0], a.shape[1] + 3), a.dtype, "numpy")
        buffer[:, 1 : 1 + a.shape[1]] = a
        return buffer[:, 1 : 1 + a.shape[1]]
    if style == "readonly":
        a.flags.writeable = False
        return a
    if style == "reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    if style == "broadcast" and a.size and (a == a.reshape(-1)[0]).all():
        return np.broadcast_to(a.reshape(-1)[:1].reshape((1,) * a.ndim), a.shape)
    return a


def _torch_layout(t: torch.Tensor, style: str) -> torch.Tensor:
    if t.ndim == 0 or style == "contiguous":
        return t
    if style == "strided":
        buffer = _junk_buffer((2 * t.shape[0], *t.shape[1:]), t.dtype, "torch")
        buffer[::2] = t
        return buffer[::2]
    if style == "offset":
        buffer = _junk_buffer((t.shape[0] + 5, *t.shape[1:]), t.dtype, "torch")
        buffer[2 : 2 + t.shape[0]] = t
        return buffer[2 : 2 + t.shape[0]]
    if style == "fortran" and t.ndim == 2:
        return t.t().contiguous().t()
    if style == "columns" and t.ndim == 2:
        buffer = _junk_buffer((t.shape[0], t.shape[1] + 3), t.dtype, "torch")
        buffer[:, 1 : 1 + t.shape[1]] = t
        return buffer[:, 1 : 1 + t.shape[1]]
    if style == "broadcast" and t.numel() and bool((t == t.reshape(-1)[0]).all()):
        return t.reshape(-1)[:1].reshape((1,) * t.ndim).expand(t.shape)
    return t


# ------------------------------------------------------------------- building blocks


def _counts(min_value: int = 0, max_value: int = MAX_SEQS) -> st.SearchStrategy[int]:
    """Batch sizes: empty, one, a few, a hundred or so, thousands (bounded)."""
    sizes = st.one_of(st.just(0), st.just(1), st.integers(2, 12), st.integers(2, 12),
                      st.integers(13, 200), st.integers(1000, MAX_SEQS))
    return sizes.map(lambda n: max(min(n, max_value), min_value))


def _vocab_sizes() -> st.SearchStrategy[int]:
    return st.one_of(st.sampled_from([1, 2, 7, 32000, 129280, _INT32_MAX]),
                     st.integers(1, 2**20))


def _rng(draw: Draw) -> Rng:
    return np.random.default_rng(draw(st.integers(0, 2**32 - 1)))


def _unique_ids(rng: Rng, n: int, high: int) -> np.ndarray:
    """``n`` distinct non-negative ids below ``high`` (at least ``n``), in random order."""
    high = max(high, n)
    if high > 4 * n + 64:
        ids = np.unique(rng.integers(0, high, 2 * n + 8))[:n]
        while ids.shape[0] < n:  # collisions are rare; top up deterministically
            ids = np.unique(np.concatenate([ids, np.arange(n) + ids.max(initial=0) + 1]))[:n]
        return rng.permutation(ids).astype(np.int64)
    return rng.permutation(high)[:n].astype(np.int64)


def _layout(draw: Draw, cls: type[contracts.BoundaryObject]) -> dict[str, Any]:
    """Backend, per-field id dtypes and per-field memory styles of one object."""
    names = [f.name for f in fields_of(cls) if isinstance(f, ArrayField)]
    mode = draw(st.sampled_from(("int32", "int64", "mixed")))
    dtypes = {n: draw(st.sampled_from(ID_DTYPES)) if mode == "mixed" else mode for n in names}
    uniform = draw(st.booleans())
    style = draw(st.sampled_from(STYLES))
    styles = {n: style if uniform else draw(st.sampled_from(STYLES)) for n in names}
    return {"backend": draw(st.sampled_from(BACKENDS)), "dtypes": dtypes, "styles": styles}


def _pattern_rows(draw: Draw, rng: Rng, rows: int) -> np.ndarray:
    """A boolean mask over ``rows``: none, all, or a run at the front, middle or tail."""
    where = draw(st.sampled_from(("none", "all", "front", "middle", "tail", "random")))
    mask = np.zeros(rows, dtype=bool)
    if rows == 0 or where == "none":
        return mask
    run = int(rng.integers(1, rows + 1))
    if where == "all":
        mask[:] = True
    elif where == "front":
        mask[:run] = True
    elif where == "tail":
        mask[rows - run :] = True
    elif where == "middle":
        start = rows // 2
        mask[start : start + max(1, min(run, rows - start - 1))] = True
    else:
        mask = rng.random(rows) < 0.4
    return mask


def _draft_rows(rng: Rng, counts: np.ndarray, mtp_k: int, vocab: int,
                fill: np.ndarray) -> np.ndarray:
    """Rows of ``mtp_k`` slots: ``counts[i]`` real drafts, then ``fill[i]``."""
    real = rng.integers(0, vocab, (counts.shape[0], mtp_k))
    columns = np.arange(mtp_k)[None, :]
    return np.where(columns < counts[:, None], real, fill[:, None]).astype(np.int64)


# ------------------------------------------------------------------ valid objects


def _phases(draw: Draw, rng: Rng, n: int, min_decode: int, min_prefill: int) -> np.ndarray:
    """``is_decode`` for ``n`` seqs: all prefill, all decode, mixed, or either phase first."""
    lo, hi = min_decode, n - min_prefill
    kind = draw(st.sampled_from(("prefill", "decode", "mixed", "decode_first", "prefill_first")))
    decode = lo if kind == "prefill" else hi if kind == "decode" else draw(st.integers(lo, hi))
    flags = np.zeros(n, dtype=bool)
    if kind == "mixed":
        flags[rng.permutation(n)[:decode]] = True
    elif kind == "prefill_first":
        flags[n - decode :] = True
    else:
        flags[:decode] = True
    return flags


@st.composite
def scheduled_batches(draw: Draw, min_seqs: int = 0, min_decode: int = 0,
                      min_prefill: int = 0) -> Case:
    """Valid ``ScheduledBatch`` cases over the whole space."""
    rng = _rng(draw)
    n = draw(_counts(max(min_seqs, min_decode + min_prefill)))
    mtp_k, vocab = draw(st.integers(1, 8)), draw(_vocab_sizes())
    is_decode = _phases(draw, rng, n, min_decode, min_prefill)
    d = int(is_decode.sum())
    chunk = draw(st.integers(1, 64 if n <= 200 else 8))
    scheduled = np.where(is_decode, mtp_k + 1, rng.integers(1, chunk + 1, n)).astype(np.int64)
    context = scheduled + rng.integers(0, draw(st.integers(0, 300)) + 1, n)
    block_size = draw(st.one_of(st.sampled_from([1, 2, 16, 64, 256]), st.integers(1, 1024)))
    tables = _block_tables(draw, rng, context, block_size)
    counts = np.where(_pattern_rows(draw, rng, d), 0, rng.integers(1, mtp_k + 1, d))
    placeholder, fill = _placeholder(draw, rng, d, vocab)
    slots = rng.integers(0, 4 * n + 1, n) if draw(st.booleans()) else None
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab, "block_size": block_size, "num_decode": d,
        "num_tokens": int(scheduled.sum()),
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, _INT32_MAX))),
        "is_decode": is_decode, "num_scheduled_tokens": scheduled, "context_lens": context,
        "block_tables": tables,
        "token_ids": rng.integers(0, vocab, int(scheduled.sum())),
        "draft_token_ids": _draft_rows(rng, counts, mtp_k, vocab, fill),
        "num_drafts": counts.astype(np.int64), "state_slots": slots,
        "draft_placeholder": placeholder,
        "draft_seq_ids": None,
    }
    if draw(st.booleans()):  # the producer says whose rows they are
        values["draft_seq_ids"] = values["seq_ids"][is_decode]
    return Case(ScheduledBatch, values, **_layout(draw, ScheduledBatch))


def _block_tables(draw: Draw, rng: Rng, context: np.ndarray, block_size: int) -> np.ndarray:
    """Tables covering each context, padded with -1 after a random number of spare blocks."""
    needed = -(-context // block_size)
    width = int(needed.max(initial=0)) + draw(st.integers(0, 3))
    allocated = needed + rng.integers(0, width - needed + 1) if needed.size else needed
    columns = np.arange(width)[None, :]
    blocks = rng.integers(0, 10**6, (context.shape[0], width))
    return np.where(columns < allocated[:, None], blocks, -1).astype(np.int64)


def _placeholder(draw: Draw, rng: Rng, rows: int, vocab: int) -> tuple[int | None, np.ndarray]:
    """``(draft_placeholder, per-row fill)``: 0, a valid token per row, or a declared value."""
    kind = draw(st.sampled_from(("zero", "token", "declared")))
    if kind == "zero":
        return None, np.zeros(rows, dtype=np.int64)
    if kind == "token":
        return None, rng.integers(0, vocab, rows)
    declared = draw(st.sampled_from((-1, vocab, 0, vocab - 1, -(2**31))))
    return declared, np.full(rows, declared, dtype=np.int64)


@st.composite
def draft_tokens(draw: Draw, min_seqs: int = 0, max_seqs: int = MAX_SEQS, **_: int) -> Case:
    """Valid ``DraftTokens`` cases (the dense form)."""
    rng = _rng(draw)
    d, mtp_k = draw(_counts(min_seqs, max_seqs)), draw(st.integers(1, 8))
    vocab = draw(_vocab_sizes())
    counts = np.where(_pattern_rows(draw, rng, d), 0, rng.integers(1, mtp_k + 1, d))
    _, fill = _placeholder(draw, rng, d, vocab)
    fill = np.where((fill >= 0) & (fill < vocab), fill, 0)
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab,
        "seq_ids": _unique_ids(rng, d, draw(st.integers(d, _INT32_MAX))),
        "draft_token_ids": _draft_rows(rng, counts, mtp_k, vocab, fill),
        "num_drafts": counts.astype(np.int64),
    }
    return Case(DraftTokens, values, **_layout(draw, DraftTokens))


@st.composite
def verify_outputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``VerifyOutput`` cases: left-packed rows, then -1 padding."""
    rng = _rng(draw)
    d, mtp_k, vocab = draw(_counts(min_seqs)), draw(st.integers(1, 8)), draw(_vocab_sizes())
    kind = draw(st.sampled_from(("none", "all", "random")))
    accepted = {"none": np.zeros(d, dtype=np.int64), "all": np.full(d, mtp_k, dtype=np.int64)}
    num_accepted = accepted.get(kind, rng.integers(0, mtp_k + 1, d))
    tokens = rng.integers(0, vocab, (d, mtp_k + 1))
    tokens[np.arange(mtp_k + 1)[None, :] > num_accepted[:, None]] = contracts.PLACEHOLDER
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab,
        "seq_ids": _unique_ids(rng, d, draw(st.integers(d, _INT32_MAX))),
        "token_ids": tokens, "num_accepted": num_accepted.astype(np.int64),
    }
    return Case(VerifyOutput, values, **_layout(draw, VerifyOutput))


def _spans(draw: Draw, rng: Rng, n: int, shortest: int, min_seqs: int) -> np.ndarray:
    """Span offsets of ``n`` seqs; with ``min_seqs`` the stream is never empty."""
    longest = draw(st.integers(max(shortest, 1), 40 if n <= 200 else 4))
    lengths = rng.integers(shortest, longest + 1, n)
    if min_seqs and n:
        lengths[0] = max(int(lengths[0]), 1)
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def _positions(rng: Rng, starts: np.ndarray) -> np.ndarray:
    """Each token's position: its seq's context offset plus its index in the span."""
    lengths = np.diff(starts)
    offsets = rng.integers(0, 5000, lengths.shape[0])
    owner = np.repeat(np.arange(lengths.shape[0]), lengths)
    return (offsets[owner] + np.arange(int(starts[-1])) - starts[:-1][owner]).astype(np.int64)


@st.composite
def model_inputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``ModelInput`` cases; some spans may be empty."""
    rng = _rng(draw)
    n, vocab = draw(_counts(min_seqs)), draw(_vocab_sizes())
    starts = _spans(draw, rng, n, draw(st.sampled_from((0, 1))), min_seqs)
    total = int(starts[-1])
    num_slots = draw(st.integers(1, 10**6))
    values = {
        "vocab_size": vocab, "num_slots": num_slots, "num_tokens": total,
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, _INT32_MAX))),
        "input_ids": rng.integers(0, vocab, total), "positions": _positions(rng, starts),
        "slot_mapping": rng.integers(-1, num_slots, total), "query_start_loc": starts,
    }
    return Case(ModelInput, values, **_layout(draw, ModelInput))


@st.composite
def drafter_inputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``DrafterInput`` cases: every seq samples from its own (non-empty) span."""
    rng = _rng(draw)
    n, vocab = draw(_counts(min_seqs)), draw(_vocab_sizes())
    starts = _spans(draw, rng, n, 1, min_seqs)
    total = int(starts[-1])
    picks = starts[:-1] + (rng.random(n) * np.diff(starts)).astype(np.int64)
    values = {
        "vocab_size": vocab, "num_tokens": total,
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, _INT32_MAX))),
        "input_ids": rng.integers(0, vocab, total), "positions": _positions(rng, starts),
        "query_start_loc": starts, "sample_indices": picks,
    }
    return Case(DrafterInput, values, **_layout(draw, DrafterInput))


@st.composite
def drafter_outputs(draw: Draw, min_seqs: int = 0, **_: int) -> Case:
    """Valid ``DrafterOutput`` cases."""
    rng = _rng(draw)
    n, mtp_k, vocab = draw(_counts(min_seqs)), draw(st.integers(1, 8)), draw(_vocab_sizes())
    values = {
        "mtp_k": mtp_k, "vocab_size": vocab,
        "seq_ids": _unique_ids(rng, n, draw(st.integers(n, _INT32_MAX))),
        "draft_token_ids": rng.integers(0, vocab, (n, mtp_k)),
    }
    return Case(DrafterOutput, values, **_layout(draw, DrafterOutput))


#: The valid-case strategy of every boundary class.
VALID: dict[type[contracts.BoundaryObject], Callable[..., st.SearchStrategy[Case]]] = {
    ScheduledBatch: scheduled_batches,
    DraftTokens: draft_tokens,
    ModelInput: model_inputs,
    VerifyOutput: verify_outputs,
    DrafterInput: drafter_inputs,
    DrafterOutput: drafter_outputs,
}


def valid_cases(cls: type[contracts.BoundaryObject] | None = None, *, min_seqs: int = 0,
                min_decode: int = 0, min_prefill: int = 0) -> st.SearchStrategy[Case]:
    """Valid cases of ``cls`` (or of any boundary class) with at least so many seqs.

    For objects without phases, ``min_decode`` counts as seqs.
    """
    classes = [cls] if cls is not None else list(contracts.BOUNDARY_OBJECTS)
    options = []
    for each in classes:
        if each is ScheduledBatch:
            options.append(scheduled_batches(min_seqs, min_decode, min_prefill))
        else:
            options.append(VALID[each](max(min_seqs, min_decode)))
    return st.one_of(options)


@st.composite
def mapping_cases(draw: Draw, min_seqs: int = 0, max_seqs: int = MAX_SEQS) -> MappingCase:
    """Valid ``from_mapping`` arguments: drafts as lists, tuples, arrays or tensors."""
    dense = draw(draft_tokens(min_seqs, max_seqs))
    values = dense.values
    rows, counts = values["draft_token_ids"], values["num_drafts"]
    form = draw(st.sampled_from(("list", "tuple", "numpy", "torch")))
    empty = draw(st.sampled_from(("missing", "empty", "none")))
    drafts: dict[int, Any] = {}
    for seq_id, row, count in zip(values["seq_ids"].tolist(), rows, counts.tolist(),
                                  strict=True):
        if count == 0 and empty != "empty":
            if empty == "none":
                drafts[seq_id] = None
            continue
        drafts[seq_id] = _draft_form(row[:count], form)
    per_seq = draw(st.booleans())
    placeholder: Any = rows[:, 0].copy() if per_seq else 0
    ids_form = draw(st.sampled_from(("list", "numpy")))
    ids = values["seq_ids"].tolist() if ids_form == "list" else values["seq_ids"].copy()
    return MappingCase(ids, drafts, values["mtp_k"], values["vocab_size"], placeholder,
                       draw(st.sampled_from((np.int32, np.int64))))


def _draft_form(row: np.ndarray, form: str) -> Any:
    if form == "list":
        return row.tolist()
    if form == "tuple":
        return tuple(row.tolist())
    if form == "torch":
        return torch.from_numpy(row.copy())
    return row.copy()


# ------------------------------------------------------------------------ mutations


@dataclass(frozen=True)
class Needs:
    """What a mutation needs of the valid object it breaks."""

    min_seqs: int = 0
    min_decode: int = 0
    min_prefill: int = 0


@dataclass(frozen=True)
class Mutation:
    """A change that breaks exactly one rule (``code``) of a valid object."""

    name: str
    code: str
    classes: tuple[type[contracts.BoundaryObject], ...]
    apply: Callable[[Case, Rng], Case]
    needs: Needs = Needs()

    def __repr__(self) -> str:
        return f"<mutation {self.name} → {self.code}>"


@dataclass(frozen=True)
class MappingMutation:
    """A change to ``from_mapping`` arguments that breaks exactly one rule."""

    name: str
    code: str
    apply: Callable[[MappingCase, Rng], MappingCase]
    min_seqs: int = 1

    def __repr__(self) -> str:
        return f"<mapping mutation {self.name} → {self.code}>"


def _classes(code: str) -> tuple[type[contracts.BoundaryObject], ...]:
    """The boundary classes a value rule applies to, read from the registry."""
    subjects = REGISTRY[code].applies_to
    return tuple(c for c in contracts.BOUNDARY_OBJECTS if c.__name__ in subjects)


def _arrays(cls: type[contracts.BoundaryObject]) -> list[ArrayField]:
    return [f for f in fields_of(cls) if isinstance(f, ArrayField)]


def _pick(rng: Rng, items: list[Any]) -> Any:
    return items[int(rng.integers(0, len(items)))]


def _copy(case: Case, *names: str) -> list[np.ndarray]:
    return [np.array(case.values[name]) for name in names]


def _other_backend(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))
    return value.numpy().copy()


def _meta(value: Any) -> Any:
    dtype = torch.bool if value.dtype in (np.bool_, torch.bool) else torch.int64
    return torch.empty(tuple(value.shape), dtype=dtype, device="meta")


def _wrong_dtype(value: Any) -> Any:
    is_bool = value.dtype in (np.bool_, torch.bool)
    if isinstance(value, np.ndarray):
        return value.astype(np.int32 if is_bool else np.float64)
    return value.to(torch.int32 if is_bool else torch.float64)


def _wrong_rank(value: Any) -> Any:
    return value.reshape(-1) if value.ndim == 2 else value[..., None]


def _required_arrays(case: Case) -> list[str]:
    return [f.name for f in _arrays(case.cls) if not f.optional]


def _generic(name: str, code: str, pick: Callable[[Case], list[str]],
             change: Callable[[Any], Any]) -> Mutation:
    def apply(case: Case, rng: Rng) -> Case:
        return case.with_after(_pick(rng, pick(case)), change)

    return Mutation(name, code, contracts.BOUNDARY_OBJECTS, apply)


def _wrong_scalar(case: Case, rng: Rng) -> Case:
    scalar = _pick(rng, [f for f in fields_of(case.cls) if isinstance(f, ScalarField)])
    current = case.values[scalar.name]
    options: list[Any] = [str(current), float(current or 0), [current], np.float64(1.0)]
    if not scalar.optional:
        options.append(None)
    return case.with_values(**{scalar.name: _pick(rng, options)})


def _below_minimum(case: Case, rng: Rng) -> Case:
    bounded = [f for f in fields_of(case.cls)
               if isinstance(f, ScalarField) and f.minimum is not None]
    scalar = _pick(rng, bounded)
    lower = _pick(rng, [scalar.minimum - 1, scalar.minimum - 1000, -(2**63)])
    return case.with_values(**{scalar.name: lower})


def _structural_mutations() -> list[Mutation]:
    """SG001, SG002, SG003, SG005 and SG006 on any field of any boundary class."""
    return [
        _generic("array given as a list", "SG001", _required_arrays, lambda v: v.tolist()),
        _generic("required array is None", "SG001", _required_arrays, lambda v: None),
        Mutation("scalar of the wrong type", "SG001", contracts.BOUNDARY_OBJECTS, _wrong_scalar),
        _generic("array of a foreign dtype", "SG002", _required_arrays, _wrong_dtype),
        _generic("array of the wrong rank", "SG003", _required_arrays, _wrong_rank),
        _generic("array on the other backend", "SG005", _required_arrays, _other_backend),
        _generic("tensor on the meta device", "SG005", _required_arrays, _meta),
        Mutation("scalar below its minimum", "SG006", contracts.BOUNDARY_OBJECTS,
                 _below_minimum),
    ]


# Dimension disagreements: every place where a field meets a dimension that a scalar or
# an earlier field has already bound, read from the compiled field specs.


@dataclass(frozen=True)
class Site:
    """One axis of one field whose length is fixed by an earlier binding."""

    cls: type[contracts.BoundaryObject]
    field: str
    axis: int
    dim: str
    optional: bool

    @property
    def code(self) -> str:
        """The rule that owns agreement on this dimension."""
        return (DIMENSIONS.get(self.dim) or contracts.Dim(self.dim, "")).rule


def dimension_sites() -> list[Site]:
    """Every (class, field, axis) whose named dimension is bound before the field is read."""
    sites = []
    for cls in contracts.BOUNDARY_OBJECTS:
        bound = {f.name for f in fields_of(cls) if isinstance(f, ScalarField) and f.binds}
        for spec in _arrays(cls):
            for j, axis in enumerate(spec.axes):
                if axis.name is None:
                    continue
                if axis.name in bound:
                    sites.append(Site(cls, spec.name, j, axis.name, spec.optional))
                elif not spec.optional:
                    bound.add(axis.name)
    return sites


def _resize(value: np.ndarray, axis: int) -> np.ndarray:
    """One entry fewer along ``axis``, or one more when the axis is empty."""
    if value.shape[axis]:
        return np.delete(value, -1, axis=axis)
    shape = list(value.shape)
    shape[axis] = 1
    return np.concatenate([value, np.zeros(shape, dtype=value.dtype)], axis=axis)


def _dimension_mutation(code: str, sites: list[Site]) -> Mutation:
    def apply(case: Case, rng: Rng) -> Case:
        site = _pick(rng, [s for s in sites if s.cls is case.cls])
        value = case.values[site.field]
        if value is None:  # an optional array: add one of the right length first
            size = case.values.get(site.dim)
            length = size if isinstance(size, int) else case.values["seq_ids"].shape[0]
            value = np.zeros(length, dtype=np.int64)
        return case.with_values(**{site.field: _resize(np.asarray(value), site.axis)})

    classes = tuple(dict.fromkeys(s.cls for s in sites))
    return Mutation(f"a field disagrees on {'/'.join(sorted({s.dim for s in sites}))}",
                    code, classes, apply)


def _dimension_mutations() -> list[Mutation]:
    by_code: dict[str, list[Site]] = {}
    for site in dimension_sites():
        by_code.setdefault(site.code, []).append(site)
    return [_dimension_mutation(code, sites) for code, sites in sorted(by_code.items())]


# Value rules, one or more mutations each.


def _with_ids(case: Case, ids: np.ndarray) -> Case:
    """New seq ids; draft row owners, where the case has them, follow the decode seqs."""
    if case.values.get("draft_seq_ids") is None:
        return case.with_values(seq_ids=ids)
    return case.with_values(seq_ids=ids, draft_seq_ids=ids[case.values["is_decode"]])


def _seq_id_duplicate(case: Case, rng: Rng) -> Case:
    (ids,) = _copy(case, "seq_ids")
    i, j = rng.permutation(ids.shape[0])[:2]
    ids[j] = ids[i]
    return _with_ids(case, ids)


def _seq_id_negative(case: Case, rng: Rng) -> Case:
    (ids,) = _copy(case, "seq_ids")
    ids[int(rng.integers(0, ids.shape[0]))] = _pick(rng, [-1, -2, -(2**31)])
    return _with_ids(case, ids)


def _decode_rows(case: Case) -> np.ndarray:
    return np.flatnonzero(case.values["is_decode"])


def _compacted_drafts(case: Case, rng: Rng) -> Case:
    """ATOM's compacted array: the rows of decode seqs without drafts are left out."""
    rows, counts = _copy(case, "draft_token_ids", "num_drafts")
    if not (counts == 0).any():
        counts[int(rng.integers(0, counts.shape[0]))] = 0
    keep = counts > 0
    return case.with_values(draft_token_ids=rows[keep], num_drafts=counts[keep])


def _decode_width(case: Case, rng: Rng) -> Case:
    scheduled, tokens = _copy(case, "num_scheduled_tokens", "token_ids")
    scheduled[_pick(rng, list(_decode_rows(case)))] -= 1
    return case.with_values(num_scheduled_tokens=scheduled, num_tokens=case.values[
        "num_tokens"] - 1, token_ids=tokens[:-1])


def _token_total(case: Case, rng: Rng) -> Case:
    (tokens,) = _copy(case, "token_ids")
    extra = rng.integers(0, case.values["vocab_size"], 1)
    return case.with_values(num_tokens=case.values["num_tokens"] + 1,
                            token_ids=np.concatenate([tokens, extra]))


def _phase_count(case: Case, rng: Rng) -> Case:
    (flags,) = _copy(case, "is_decode")
    flags[_pick(rng, list(_decode_rows(case)))] = False
    # Owners of the rows would disagree too (SG115): this mutation is about the count.
    return case.with_values(is_decode=flags, draft_seq_ids=None)


def _empty_prefill(case: Case, rng: Rng) -> Case:
    scheduled, context, tokens = _copy(case, "num_scheduled_tokens", "context_lens", "token_ids")
    seq = _pick(rng, list(np.flatnonzero(~case.values["is_decode"])))
    dropped = int(scheduled[seq])
    scheduled[seq] = 0
    return case.with_values(num_scheduled_tokens=scheduled, num_tokens=int(scheduled.sum()),
                            token_ids=tokens[: tokens.shape[0] - dropped], context_lens=context)


def _bad_draft(case: Case, rng: Rng) -> Case:
    (rows,) = _copy(case, "draft_token_ids")
    vocab = case.values["vocab_size"]
    declared = case.values.get("draft_placeholder")
    bad = [v for v in (-1, vocab, vocab + 17, -(2**31), _INT32_MAX) if v != declared
           and not 0 <= v < vocab]
    rows.reshape(-1)[int(rng.integers(0, rows.size))] = _pick(rng, bad)
    return case.with_values(draft_token_ids=rows)


def _bad_draft_count(case: Case, rng: Rng) -> Case:
    (counts,) = _copy(case, "num_drafts")
    counts[int(rng.integers(0, counts.shape[0]))] = _pick(
        rng, [-1, case.values["mtp_k"] + 1, -(2**31)])
    return case.with_values(num_drafts=counts)


def _empty_table(case: Case, rng: Rng) -> Case:
    (tables,) = _copy(case, "block_tables")
    tables[int(rng.integers(0, tables.shape[0])), 0] = -1
    return case.with_values(block_tables=tables)


def _uncovered_context(case: Case, rng: Rng) -> Case:
    (context,) = _copy(case, "context_lens")
    capacity = case.values["block_tables"].shape[1] * case.values["block_size"]
    context[int(rng.integers(0, context.shape[0]))] = capacity + 1
    return case.with_values(context_lens=context)


def _short_context(case: Case, rng: Rng) -> Case:
    (context,) = _copy(case, "context_lens")
    seq = int(rng.integers(0, context.shape[0]))
    context[seq] = case.values["num_scheduled_tokens"][seq] - 1
    return case.with_values(context_lens=context)


def _out_of_vocab(name: str) -> Callable[[Case, Rng], Case]:
    def apply(case: Case, rng: Rng) -> Case:
        (ids,) = _copy(case, name)
        vocab = case.values["vocab_size"]
        ids[int(rng.integers(0, ids.shape[0]))] = _pick(rng, [-1, vocab, -(2**31), vocab + 5])
        return case.with_values(**{name: ids})

    return apply


def _negative_slot(case: Case, rng: Rng) -> Case:
    (ids,) = _copy(case, "seq_ids")
    slots = case.values["state_slots"]
    slots = np.zeros_like(ids) if slots is None else np.array(slots)
    slots[int(rng.integers(0, slots.shape[0]))] = _pick(rng, [-1, -(2**31)])
    return case.with_values(state_slots=slots)


def _permuted_rows(case: Case, rng: Rng) -> Case:
    """Two decode seqs' rows swapped: the count is right, the owners are not."""
    ids, flags = case.values["seq_ids"], case.values["is_decode"]
    owners = np.array(ids)[np.asarray(flags)]
    first, second = rng.choice(owners.shape[0], 2, replace=False)
    owners[[first, second]] = owners[[second, first]]
    return case.with_values(draft_seq_ids=owners)


def _accepted_past_k(case: Case, rng: Rng) -> Case:
    """A full row claims one more accepted draft than there are slots."""
    tokens, accepted = _copy(case, "token_ids", "num_accepted")
    row, k = int(rng.integers(0, accepted.shape[0])), case.values["mtp_k"]
    tokens[row] = rng.integers(0, case.values["vocab_size"], k + 1)
    accepted[row] = k + 1
    return case.with_values(token_ids=tokens, num_accepted=accepted)


def _broken_verify_row(case: Case, rng: Rng) -> Case:
    tokens, accepted = _copy(case, "token_ids", "num_accepted")
    row = int(rng.integers(0, accepted.shape[0]))
    real = int(accepted[row]) + 1
    vocab = case.values["vocab_size"]
    if real < tokens.shape[1] and rng.random() < 0.5:  # a token after the correction
        tokens[row, int(rng.integers(real, tokens.shape[1]))] = rng.integers(0, vocab)
    else:  # a hole or an out-of-vocabulary id among the real tokens
        tokens[row, int(rng.integers(0, real))] = _pick(rng, [-1, vocab, -5])
    return case.with_values(token_ids=tokens)


def _sample_outside(case: Case, rng: Rng) -> Case:
    starts, picks = _copy(case, "query_start_loc", "sample_indices")
    seq = int(rng.integers(0, picks.shape[0]))
    picks[seq] = _pick(rng, [starts[seq + 1], starts[seq] - 1, -1, starts[-1] + 3])
    return case.with_values(sample_indices=picks)


def _negative_position(case: Case, rng: Rng) -> Case:
    (positions,) = _copy(case, "positions")
    positions[int(rng.integers(0, positions.shape[0]))] = _pick(rng, [-1, -(2**31)])
    return case.with_values(positions=positions)


def _span_end(case: Case, rng: Rng) -> Case:
    (starts,) = _copy(case, "query_start_loc")
    starts[-1] += 1
    return case.with_values(query_start_loc=starts)


def _span_back(case: Case, rng: Rng) -> Case:
    (starts,) = _copy(case, "query_start_loc")
    i = int(rng.integers(1, starts.shape[0] - 1))
    starts[i] = starts[i - 1] - 1
    return case.with_values(query_start_loc=starts)


def _bad_slot(case: Case, rng: Rng) -> Case:
    (slots,) = _copy(case, "slot_mapping")
    slots[int(rng.integers(0, slots.shape[0]))] = _pick(
        rng, [-2, case.values["num_slots"], -(2**31)])
    return case.with_values(slot_mapping=slots)


def _value_mutations() -> list[Mutation]:
    one, decode, tokens = Needs(min_seqs=1), Needs(min_decode=1), Needs(min_seqs=1)
    batch = (ScheduledBatch,)
    return [
        Mutation("duplicate seq id", "SG010", _classes("SG010"), _seq_id_duplicate,
                 Needs(min_seqs=2)),
        Mutation("negative seq id", "SG010", _classes("SG010"), _seq_id_negative, one),
        Mutation("compacted draft rows (ATOM #1444)", "SG101", batch, _compacted_drafts,
                 decode),
        Mutation("decode seq scheduled mtp_k tokens", "SG103", batch, _decode_width, decode),
        Mutation("num_tokens is not the sum", "SG106", batch, _token_total),
        Mutation("num_decode disagrees with is_decode", "SG107", batch, _phase_count, decode),
        Mutation("prefill seq scheduled no tokens", "SG107", batch, _empty_prefill,
                 Needs(min_prefill=1)),
        Mutation("draft id outside the vocabulary", "SG108", _classes("SG108"), _bad_draft,
                 decode),
        Mutation("draft count outside [0, mtp_k]", "SG109", _classes("SG109"),
                 _bad_draft_count, decode),
        Mutation("block table starts with padding", "SG110", batch, _empty_table, one),
        Mutation("context longer than the block table", "SG110", batch, _uncovered_context,
                 one),
        Mutation("context shorter than the scheduled tokens", "SG111", batch,
                 _short_context, one),
        Mutation("scheduled token outside the vocabulary", "SG112", batch,
                 _out_of_vocab("token_ids"), tokens),
        Mutation("negative state slot", "SG113", batch, _negative_slot, one),
        Mutation("draft rows permuted between seqs", "SG115", batch, _permuted_rows,
                 Needs(min_decode=2)),
        Mutation("accepted count past mtp_k", "SG201", _classes("SG201"), _accepted_past_k,
                 decode),
        Mutation("verify row out of layout", "SG202", _classes("SG202"), _broken_verify_row,
                 decode),
        Mutation("sentinel reaches the embedding (vLLM #26231)", "SG301", _classes("SG301"),
                 _out_of_vocab("input_ids"), Needs(min_seqs=1)),
        Mutation("sample index outside its span", "SG302", _classes("SG302"),
                 _sample_outside, one),
        Mutation("negative position", "SG303", _classes("SG303"), _negative_position, one),
        Mutation("spans do not end at num_tokens", "SG304", _classes("SG304"), _span_end),
        Mutation("span offsets go back", "SG304", (ModelInput,), _span_back,
                 Needs(min_seqs=2)),
        Mutation("slot outside the KV cache", "SG305", _classes("SG305"), _bad_slot, one),
    ]


#: Every one-rule mutation of a valid boundary object.
MUTATIONS: list[Mutation] = [*_structural_mutations(), *_dimension_mutations(),
                             *_value_mutations()]


def _mapping_stranger(case: MappingCase, rng: Rng) -> MappingCase:
    ids = list(np.asarray(case.seq_ids).tolist())
    stranger = max(ids, default=0) + 1 + int(rng.integers(0, 1000))
    return dataclasses.replace(case, drafts={**case.drafts, stranger: [0]})


def _mapping_too_many(case: MappingCase, rng: Rng) -> MappingCase:
    seq = _pick(rng, list(np.asarray(case.seq_ids).tolist()))
    extra = int(rng.integers(1, 4))
    return dataclasses.replace(case, drafts={**case.drafts, seq: [0] * (case.mtp_k + extra)})


def _mapping_float_drafts(case: MappingCase, rng: Rng) -> MappingCase:
    seq = _pick(rng, list(np.asarray(case.seq_ids).tolist()))
    bad = _pick(rng, [[0.5], [float("nan")], np.array([1.0]), ["1"], [[1, 2]], {1: 2}])
    return dataclasses.replace(case, drafts={**case.drafts, seq: bad})


def _mapping_not_a_mapping(case: MappingCase, rng: Rng) -> MappingCase:
    bad = _pick(rng, [list(case.drafts.items()), None, "drafts", 3, set(case.drafts)])
    return dataclasses.replace(case, drafts=bad)


def _mapping_bad_placeholder(case: MappingCase, rng: Rng) -> MappingCase:
    """A placeholder outside the vocabulary, and a seq whose row needs one."""
    seq = _pick(rng, list(np.asarray(case.seq_ids).tolist()))
    drafts = {key: value for key, value in case.drafts.items() if key != seq}
    vocab = case.vocab_size
    bad = _pick(rng, [-1, vocab, vocab + 3])
    return dataclasses.replace(case, drafts=drafts, placeholder=bad)


#: One-rule mutations of ``from_mapping`` arguments.
MAPPING_MUTATIONS: list[MappingMutation] = [
    MappingMutation("drafts for a seq that is not decoding", "SG114", _mapping_stranger, 0),
    MappingMutation("more than mtp_k drafts", "SG102", _mapping_too_many),
    MappingMutation("drafts that are not integer ids", "SG002", _mapping_float_drafts),
    MappingMutation("drafts that are not a mapping", "SG001", _mapping_not_a_mapping, 0),
    MappingMutation("placeholder outside the vocabulary", "SG108", _mapping_bad_placeholder),
]

def contract_rules() -> dict[str, contracts.Rule]:
    """The registry's rules of the boundary objects: structural ones, and value rules that
    apply to a class of :data:`specguard.contracts.BOUNDARY_OBJECTS` (adapters register rules of
    their own objects in the same registry)."""
    names = {cls.__name__ for cls in contracts.BOUNDARY_OBJECTS}
    return {code: rule for code, rule in REGISTRY.items()
            if "*" in rule.applies_to or names & set(rule.applies_to)}


#: Rules no single change to a valid object can break, and why.
UNREACHABLE: dict[str, str] = {
    "SG000": "reported only when a check itself cannot evaluate; a valid object changed in "
             "one rule is caught by that rule, which is what the mutation tests assert",
}


def unreachable_dimension_rules() -> dict[str, str]:
    """Dimension rules no field pair can disagree on (their dims are bound only once)."""
    reachable = {site.code for site in dimension_sites()}
    owned = {dim.rule for dim in DIMENSIONS.values()}
    return {code: "its dimensions never appear in two places of one boundary object"
            for code in owned - reachable}


@st.composite
def mutated(draw: Draw, mutation: Mutation) -> tuple[Case, Case]:
    """``(valid, broken)``: a valid case of a class the mutation applies to, then broken."""
    cls = draw(st.sampled_from(mutation.classes))
    needs = mutation.needs
    valid = draw(valid_cases(cls, min_seqs=needs.min_seqs, min_decode=needs.min_decode,
                             min_prefill=needs.min_prefill))
    return valid, mutation.apply(valid, _rng(draw))


@st.composite
def mapping_mutated(draw: Draw, mutation: MappingMutation) -> MappingCase:
    """A valid ``from_mapping`` call broken by ``mutation``."""
    return mutation.apply(draw(mapping_cases(mutation.min_seqs)), _rng(draw))


# -------------------------------------------------------------------- hostile values

SKIP = object()  # a hostile kind that does not apply to this field


def _is_bool_field(spec: ArrayField) -> bool:
    return spec.dtypes == frozenset({"bool"})


def _same_backend(value: Any, array: np.ndarray) -> Any:
    return torch.from_numpy(array) if isinstance(value, torch.Tensor) else array


def _host(value: Any) -> np.ndarray:
    return value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)


def _cast(numpy_dtype: Any, torch_dtype: Any = None) -> Callable[[Any, ArrayField], Any]:
    def change(value: Any, spec: ArrayField) -> Any:
        if isinstance(value, torch.Tensor):
            return SKIP if torch_dtype is None else value.to(torch_dtype)
        with np.errstate(over="ignore", invalid="ignore"):  # float16 overflows on purpose
            return value.astype(numpy_dtype)

    return change


def _with_nan(value: Any, spec: ArrayField) -> Any:
    array = _host(value).astype(np.float64)
    if array.size:
        array.reshape(-1)[0] = np.nan
    return _same_backend(value, array)


def _ids_for_bool(value: Any, spec: ArrayField) -> Any:
    """For the bool field, an int array; for id fields, a bool array."""
    array = _host(value)
    other = array.astype(np.int64) if _is_bool_field(spec) else array.astype(bool)
    return _same_backend(value, other)


def _object_array(value: Any, spec: ArrayField) -> Any:
    return np.array(_host(value), dtype=object)


def _wrapping(value: Any, spec: ArrayField) -> Any:
    """An int64 value that reads as 5 once cast to int32, where it is out of range."""
    if _is_bool_field(spec) or spec.name in _UNBOUNDED or 0 in tuple(value.shape):
        return SKIP
    array = _host(value).astype(np.int64).copy()
    array.reshape(-1)[0] = 2**32 + 5
    return _same_backend(value, array)


# Seq ids, block ids, state slots and positions have no upper bound: 2**32 + 5 is valid.
_UNBOUNDED = frozenset({"seq_ids", "block_tables", "state_slots", "positions",
                        "draft_seq_ids"})


def _huge_zero_size(value: Any, spec: ArrayField) -> Any:
    shape = (0, 2**31) if len(spec.axes) == 1 else (0, 2**31, 3)
    if isinstance(value, torch.Tensor):
        return torch.empty(shape, dtype=value.dtype)
    return np.empty(shape, dtype=value.dtype)


def _zero_d(value: Any, spec: ArrayField) -> Any:
    array = np.array(0, dtype=np.bool_ if _is_bool_field(spec) else np.int32)
    return _same_backend(value, array)


def _transposed(value: Any, spec: ArrayField) -> Any:
    if value.ndim != 2 or value.shape[0] == value.shape[1]:
        return SKIP
    return value.T


def _matrix(value: Any, spec: ArrayField) -> Any:
    if isinstance(value, torch.Tensor) or len(spec.axes) == 2:
        return SKIP
    with warnings.catch_warnings():  # np.matrix is pending deprecation: that is the point
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        return np.asmatrix(_host(value))


def _big_endian(value: Any, spec: ArrayField) -> Any:
    if isinstance(value, torch.Tensor) or _is_bool_field(spec):
        return SKIP
    return _host(value).astype(_host(value).dtype.newbyteorder(">"))


def _ragged(value: Any, spec: ArrayField) -> Any:
    return [[1, 2], [3], []]


#: Values for an array field that no boundary object may accept (any backend).
HOSTILE_ARRAYS: dict[str, Callable[[Any, ArrayField], Any]] = {
    "list": lambda v, s: _host(v).tolist(),
    "tuple": lambda v, s: tuple(_host(v).tolist()),
    "ragged nested list": _ragged,
    "None": lambda v, s: SKIP if s.optional else None,
    "str": lambda v, s: "0 1 2",
    "bytes": lambda v, s: b"\x00\x01",
    "dict": lambda v, s: {0: 1},
    "set": lambda v, s: {0, 1},
    "int": lambda v, s: 3,
    "float": lambda v, s: float("nan"),
    "memoryview": lambda v, s: memoryview(np.ascontiguousarray(_host(v))),
    "float64 ids": _cast(np.float64, torch.float64),
    "float ids with NaN": _with_nan,
    "float16 ids": _cast(np.float16, torch.float16),
    "bfloat16 ids": _cast(np.float32, torch.bfloat16),
    "bool for int, int for bool": _ids_for_bool,
    "object array": _object_array,
    "uint8": _cast(np.uint8, torch.uint8),
    "int16": _cast(np.int16, torch.int16),
    "uint32": _cast(np.uint32, torch.uint32),
    "uint64": _cast(np.uint64, torch.uint64),
    "complex": _cast(np.complex64, torch.complex64),
    "big-endian": _big_endian,
    "0-d array": _zero_d,
    "huge dims, zero size": _huge_zero_size,
    "extra axis": lambda v, s: v[..., None],
    "transposed": _transposed,
    "np.matrix": _matrix,
    "other backend": lambda v, s: _other_backend(v),
    "meta device": lambda v, s: _meta(v),
    "ids that wrap in int32": _wrapping,
}

#: Values for a scalar field that no boundary object may accept.
HOSTILE_SCALARS: dict[str, Callable[[ScalarField], Any]] = {
    "None": lambda s: SKIP if s.optional else None,
    "str": lambda s: "3",
    "float": lambda s: 3.0,
    "NaN": lambda s: float("nan"),
    "bool": lambda s: True,
    "numpy float": lambda s: np.float32(3),
    "list": lambda s: [3],
    "0-d array": lambda s: np.array(3),
    "0-d tensor": lambda s: torch.tensor(3),
    "complex": lambda s: 3 + 0j,
    "below minimum": lambda s: SKIP if s.minimum is None else s.minimum - 1,
    "far below minimum": lambda s: SKIP if s.minimum is None else -(2**70),
}

#: Scalars that are strange but not wrong: validation may pass or raise, nothing else.
ODD_SCALARS: tuple[int, ...] = (2**31 - 1, 2**31, 2**32 + 1, 2**63 - 1, 2**63, 2**64, 2**70,
                                -(2**63), -(2**70))


def hostile_variants(case: Case) -> list[tuple[str, str, Any]]:
    """``(field, kind, value)`` for every hostile value of every field of ``case``.

    An absent optional array is replaced by a hostile form of a valid one.
    """
    valid = case.kwargs()
    variants = []
    for spec in fields_of(case.cls):
        if isinstance(spec, ScalarField):
            made = {kind: make(spec) for kind, make in HOSTILE_SCALARS.items()}
        else:
            base = valid.get(spec.name)
            if base is None:  # an absent optional array: a valid one of the right length
                size = case.values.get(spec.axes[0].name or "")
                length = size if isinstance(size, int) else case.values["seq_ids"].shape[0]
                base = materialize(np.zeros(length, dtype=np.int64), case.backend, "int64",
                                   "contiguous")
            made = {kind: make(base, spec) for kind, make in HOSTILE_ARRAYS.items()}
        variants.extend((spec.name, kind, bad) for kind, bad in made.items() if bad is not SKIP)
    return variants


# -------------------------------------------------------------------- engine workloads


@dataclass(frozen=True)
class Workload:
    """An engine configuration and the requests to run through it."""

    config: Any
    requests: tuple[Any, ...]

    def __repr__(self) -> str:
        c = self.config
        lengths = [r.prompt_len for r in self.requests]
        return (f"Workload(mtp_k={c.mtp_k}, block_size={c.block_size}, "
                f"num_blocks={c.num_blocks}, max_num_seqs={c.max_num_seqs}, "
                f"budget={c.max_num_batched_tokens}, vocab={c.model.vocab_size}, "
                f"seed={c.model.seed}, prompts={lengths}, "
                f"max_tokens={[r.max_tokens for r in self.requests]})")


#: How a workload leans on the engine: "none", "chunked" (prompts longer than the token
#: budget, so steps of prefill chunks only) or "tight" (few KV blocks: preemption).
PRESSURES = ("none", "chunked", "tight")


@st.composite
def engine_workloads(draw: Draw, pressure: str = "none") -> Workload:
    """Small random workloads for the reference engine, feasible by construction."""
    from specguard.runner.config import EngineConfig, ModelConfig
    from specguard.runner.kv_cache import blocks_for
    from specguard.runner.workload import Request

    rng = _rng(draw)
    mtp_k = draw(st.integers(1, 5))
    n = draw(st.integers(3 if pressure == "tight" else 1, 10))
    budget = draw(st.integers(mtp_k + 1, 24 if pressure == "chunked" else 256))
    shortest = budget + 1 if pressure == "chunked" else draw(st.integers(1, 32))
    longest = draw(st.integers(shortest, shortest + 64))
    prompts = rng.integers(shortest, longest + 1, n)
    outputs = rng.integers(8 if pressure == "tight" else 1, draw(st.integers(8, 24)) + 1, n)
    block_size = draw(st.sampled_from((1, 2, 4, 16)))
    # The largest request with two steps of drafts in flight must fit on its own.
    alone = blocks_for(int(longest + outputs.max() + 2 * (mtp_k + 1)), block_size) + 1
    ample = alone * (n + 1)
    num_blocks = draw(st.integers(alone, 2 * alone)) if pressure == "tight" else ample
    vocab = draw(st.sampled_from((61, 257, 2048)))
    model = ModelConfig(vocab_size=vocab, d_model=32, num_heads=2, num_layers=1, d_ff=64,
                        seed=draw(st.integers(0, 3)))
    config = EngineConfig(mtp_k=mtp_k, block_size=block_size, num_blocks=num_blocks,
                          max_num_seqs=draw(st.integers(1, 12)),
                          max_num_batched_tokens=budget, model=model)
    requests = tuple(Request(i, rng.integers(0, vocab, int(p)).astype(np.int64), int(m))
                     for i, (p, m) in enumerate(zip(prompts, outputs, strict=True)))
    return Workload(config, requests)


@st.composite
def doubly_mutated(draw: Draw) -> tuple[Mutation, Mutation, Case]:
    """Two mutations of different rules applied to one valid object of a class they share."""
    first = draw(st.sampled_from(MUTATIONS))
    cls = draw(st.sampled_from(first.classes))
    second = draw(st.sampled_from([m for m in MUTATIONS
                                   if cls in m.classes and m.code != first.code]))
    needs = [first.needs, second.needs]
    valid = draw(valid_cases(cls, min_seqs=max(n.min_seqs for n in needs),
                             min_decode=max(n.min_decode for n in needs),
                             min_prefill=max(n.min_prefill for n in needs)))
    rng = _rng(draw)
    # Value mutations read canonical values that a structural one may have replaced.
    early, late = sorted((first, second), key=lambda m: m.code in _STRUCTURAL)
    try:
        return first, second, late.apply(early.apply(valid, rng), rng)
    except (IndexError, KeyError, TypeError, ValueError):
        reject()  # the first change left nothing for the second to break (an emptied array)


_STRUCTURAL = frozenset({"SG001", "SG002", "SG003", "SG005", "SG006"})
