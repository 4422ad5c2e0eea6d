"""Mutations that break exactly one rule of :data:`specguard.contracts.REGISTRY` each.

Structural mutations (types, dtypes, ranks, backends) and dimension mutations are
derived from the contracts' own field specs; value mutations are one function per rule.
A rule without a mutation must be listed as unreachable, with the reason.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from hypothesis import reject
from hypothesis import strategies as st

from specguard import contracts
from specguard.contracts import (
    DIMENSIONS,
    REGISTRY,
    ArrayField,
    ModelInput,
    ScalarField,
    ScheduledBatch,
    fields_of,
)
from strategies.cases import (
    INT32_MAX,
    Case,
    Draw,
    MappingCase,
    Rng,
    on_meta_device,
    other_backend,
    seeded_rng,
)
from strategies.valid import mapping_cases, valid_cases


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
             change: Callable[[Any], Any],
             classes: tuple[type[contracts.BoundaryObject], ...] | None = None) -> Mutation:
    def apply(case: Case, rng: Rng) -> Case:
        return case.with_after(_pick(rng, pick(case)), change)

    return Mutation(name, code, classes or contracts.BOUNDARY_OBJECTS, apply)


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


def _with_two_arrays() -> tuple[type[contracts.BoundaryObject], ...]:
    """The boundary classes with two arrays at least, which one backend can split."""
    return tuple(cls for cls in contracts.BOUNDARY_OBJECTS if len(_arrays(cls)) > 1)


def _structural_mutations() -> list[Mutation]:
    """SG001, SG002, SG003, SG005 and SG006 on any field of any boundary class."""
    return [
        _generic("array given as a list", "SG001", _required_arrays, lambda v: v.tolist()),
        _generic("required array is None", "SG001", _required_arrays, lambda v: None),
        Mutation("scalar of the wrong type", "SG001", contracts.BOUNDARY_OBJECTS, _wrong_scalar),
        _generic("array of a foreign dtype", "SG002", _required_arrays, _wrong_dtype),
        _generic("array of the wrong rank", "SG003", _required_arrays, _wrong_rank),
        _generic("array on the other backend", "SG005", _required_arrays, other_backend,
                 _with_two_arrays()),
        _generic("tensor on the meta device", "SG005", _required_arrays, on_meta_device,
                 _with_two_arrays()),
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
            spec = next(f for f in _arrays(site.cls) if f.name == site.field)
            boolean = spec.dtypes == frozenset({"bool"})
            value = np.zeros(length, dtype=bool if boolean else np.int64)
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
    return case.with_values(is_decode=flags, draft_seq_ids=None, drafts_handed_over=None)


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
    bad = [v for v in (-1, vocab, vocab + 17, -(2**31), INT32_MAX) if v != declared
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
    # Set from where the spans must end, not moved from where they do: another mutation
    # may have moved the end already. Short of the padding, since into it is SG309's.
    padding = case.values.get("num_padding") or 0
    real = int(case.values["num_tokens"]) - padding
    starts[-1] = real - 1 if padding else real + 1
    return case.with_values(query_start_loc=starts)


def _span_back(case: Case, rng: Rng) -> Case:
    (starts,) = _copy(case, "query_start_loc")
    i = int(rng.integers(1, starts.shape[0] - 1))
    starts[i] = starts[i - 1] - 1
    return case.with_values(query_start_loc=starts)


def _bad_slot(case: Case, rng: Rng) -> Case:
    (slots,) = _copy(case, "slot_mapping")
    real = slots.shape[0] - (case.values.get("num_padding") or 0)  # a padding row's is SG308's
    if real < 1:
        reject()
    slots[int(rng.integers(0, real))] = _pick(rng, [-2, case.values["num_slots"], -(2**31)])
    return case.with_values(slot_mapping=slots)


def _span_end_lens(case: Case) -> np.ndarray:
    """Each span's last position + 1: the seq_lens of a clean drafter pass."""
    starts, positions = _copy(case, "query_start_loc", "positions")
    return (positions[starts[1:] - 1] + 1).astype(np.int64)


def _seq_len_behind(case: Case, rng: Rng) -> Case:
    """One seq's seq_len not advanced with its positions (one short)."""
    seq_lens = _span_end_lens(case)
    seq_lens[int(rng.integers(0, seq_lens.shape[0]))] -= 1
    return case.with_values(seq_lens=seq_lens)


def _max_seq_len_short(case: Case, rng: Rng) -> Case:
    """max_seq_len taken before the increment: one below the longest seq_len."""
    seq_lens = _span_end_lens(case)
    return case.with_values(seq_lens=seq_lens, max_seq_len=int(seq_lens.max()) - 1)


def _padding_rows(case: Case) -> tuple[int, int]:
    """The first padding row and the padding slot of a padded case (rejects others)."""
    padding = case.values.get("num_padding")
    if not padding:
        reject()
    pad_id = case.values.get("padding_slot_id")
    return case.values["num_tokens"] - padding, -1 if pad_id is None else pad_id


def _live_padding_slot(case: Case, rng: Rng) -> Case:
    """A padding row keeps a real slot (a stale graph buffer)."""
    first, pad_id = _padding_rows(case)
    (slots,) = _copy(case, "slot_mapping")
    live = [s for s in range(-1, min(case.values["num_slots"], 4)) if s != pad_id]
    slots[int(rng.integers(first, slots.shape[0]))] = _pick(rng, live)
    return case.with_values(slot_mapping=slots)


def _span_into_padding(case: Case, rng: Rng) -> Case:
    """The last seq's span runs into the padding rows."""
    first, _ = _padding_rows(case)
    (starts,) = _copy(case, "query_start_loc")
    starts[-1] = first + int(rng.integers(1, case.values["num_padding"] + 1))
    return case.with_values(query_start_loc=starts)


def _real_row_padding_slot(case: Case, rng: Rng) -> Case:
    """A real token given the padding slot: it writes no KV."""
    if case.values.get("num_padding") is None:
        reject()
    padding = case.values["num_padding"]
    pad_id = case.values.get("padding_slot_id")
    (slots,) = _copy(case, "slot_mapping")
    real = slots.shape[0] - padding
    if real < 1:
        reject()
    slots[int(rng.integers(0, real))] = -1 if pad_id is None else pad_id
    return case.with_values(slot_mapping=slots)


def _proposed_past_k(case: Case, rng: Rng) -> Case:
    """A proposed count outside [0, mtp_k]."""
    ids, k = case.values["seq_ids"], case.values["mtp_k"]
    counts = np.full(np.asarray(ids).shape[0], k, dtype=np.int64)
    counts[int(rng.integers(0, counts.shape[0]))] = _pick(rng, [k + 1, -1, 2**40])
    return case.with_values(num_proposed=counts)
def _logits_rows_miscounted(case: Case, rng: Rng) -> Case:
    """Logits laid out with a row more or fewer than one per request plus its drafts."""
    change = _pick(rng, [-1, 1]) if case.values["num_logits"] else 1
    return case.with_values(num_logits=case.values["num_logits"] + change)


def _rows_miscounted(case: Case, rng: Rng) -> Case:
    """The producer counted one draft more or fewer for a covered request (vLLM #49694)."""
    (counts,) = _copy(case, "row_counts")
    covered = np.flatnonzero(np.asarray(case.values["row_starts"]) >= 0)
    if covered.size == 0:
        reject()
    row = int(_pick(rng, covered.tolist()))
    counts[row] += 1 if counts[row] == 1 or rng.random() < 0.5 else -1
    return case.with_values(row_counts=counts, num_rows=case.values["num_rows"] + 1)


def _output_count_past_row(case: Case, rng: Rng) -> Case:
    """A count outside the row, with room under the limit for it (SG403 stays quiet)."""
    emitted, limit = _copy(case, "num_emitted", "max_new_tokens")
    row = int(rng.integers(0, emitted.shape[0]))
    emitted[row] = _pick(rng, [case.values["token_ids"].shape[1] + 1, -1])
    limit[row] = int(case.values["num_generated"][row]) + max(int(emitted[row]), 0) + 1
    return case.with_values(num_emitted=emitted, max_new_tokens=limit)


def _token_after_stop(case: Case, rng: Rng) -> Case:
    """A row that emits its stop id, then the token after it (transformers #47912)."""
    tokens, emitted, stops = _copy(case, "token_ids", "num_emitted", "stop_token_ids")
    width = tokens.shape[1]
    rows = np.flatnonzero((stops >= 0).any(axis=1)) if stops.shape[1] else np.zeros(0, int)
    if width < 2 or rows.size == 0:
        reject()
    row = int(_pick(rng, rows.tolist()))
    stop = int(stops[row][stops[row] >= 0][0])
    at = int(rng.integers(0, width - 1))
    tokens[row] = -1
    tokens[row, :at + 2] = rng.integers(0, max(stop, 1), at + 2) % 2**20
    tokens[row, :at + 2][tokens[row, :at + 2] == stop] = 0
    tokens[row, at] = stop
    stopped = (tokens[row, :at + 2, None] == stops[row][None, :]) & (stops[row] >= 0)
    if stopped[:at].any():
        reject()
    emitted[row] = at + 2
    generated, limit, finished = _copy(case, "num_generated", "max_new_tokens", "finished")
    limit[row] = generated[row] + at + 2 + 1
    finished[row] = True
    return case.with_values(token_ids=tokens, num_emitted=emitted, max_new_tokens=limit,
                            finished=finished)


def _past_limit(case: Case, rng: Rng) -> Case:
    emitted, limit = _copy(case, "num_emitted", "max_new_tokens")
    given = np.asarray(case.values["num_generated"]) + emitted
    row = int(rng.integers(0, emitted.shape[0]))
    limit[row] = given[row] - int(rng.integers(1, 4))
    (finished,) = _copy(case, "finished")
    finished[row] = True
    return case.with_values(max_new_tokens=limit, finished=finished)


def _left_running(case: Case, rng: Rng) -> Case:
    """A request that reached its limit this step, not marked finished."""
    emitted, limit, finished = _copy(case, "num_emitted", "max_new_tokens", "finished")
    rows = np.flatnonzero(emitted > 0)
    if rows.size == 0:
        reject()
    row = int(_pick(rng, rows.tolist()))
    limit[row] = int(case.values["num_generated"][row]) + int(emitted[row])
    finished[row] = False
    return case.with_values(max_new_tokens=limit, finished=finished)


def _stale_own_entry(case: Case, rng: Rng) -> Case:
    """This rank's entry from another forward than the one it runs (vLLM #35294)."""
    own = case.values["own_tokens"]
    return case.with_values(own_tokens=own + 1 if own == 0 or rng.random() < 0.5 else own - 1)


def _negative_count(case: Case, rng: Rng) -> Case:
    (across,) = _copy(case, "tokens_across_ranks")
    others = [r for r in range(across.shape[0]) if r != case.values["dp_rank"]]
    if not others:
        reject()
    across[int(_pick(rng, others))] = _pick(rng, [-1, -(2**31)])
    return case.with_values(tokens_across_ranks=across)


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
        Mutation("seq_len not advanced with its draft step", "SG306", _classes("SG306"),
                 _seq_len_behind, one),
        Mutation("max_seq_len before the increment", "SG307", _classes("SG307"),
                 _max_seq_len_short, one),
        Mutation("padding row with a live slot", "SG308", _classes("SG308"),
                 _live_padding_slot),
        Mutation("span running into the padding", "SG309", _classes("SG309"),
                 _span_into_padding, one),
        Mutation("real row with the padding slot", "SG310", _classes("SG310"),
                 _real_row_padding_slot, one),
        Mutation("proposed count outside [0, mtp_k]", "SG116", _classes("SG116"),
                 _proposed_past_k, one),
        Mutation("logits rows miscounted", "SG311", _classes("SG311"),
                 _logits_rows_miscounted),
        Mutation("per-row data counted other drafts (vLLM #49694)", "SG312",
                 _classes("SG312"), _rows_miscounted, one),
        Mutation("emitted count outside the row", "SG401", _classes("SG401"),
                 _output_count_past_row, one),
        Mutation("token after an accepted stop (transformers #47912)", "SG402",
                 _classes("SG402"), _token_after_stop, one),
        Mutation("given past max_new_tokens (SGLang #33758)", "SG403", _classes("SG403"),
                 _past_limit, one),
        Mutation("at the limit but not finished", "SG404", _classes("SG404"),
                 _left_running, one),
        Mutation("this rank's entry is stale (vLLM #35294)", "SG708", _classes("SG708"),
                 _stale_own_entry),
        Mutation("a negative rank count", "SG709", _classes("SG709"), _negative_count),
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
    return valid, mutation.apply(valid, seeded_rng(draw))


@st.composite
def mapping_mutated(draw: Draw, mutation: MappingMutation) -> MappingCase:
    """A valid ``from_mapping`` call broken by ``mutation``."""
    return mutation.apply(draw(mapping_cases(mutation.min_seqs)), seeded_rng(draw))


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
    rng = seeded_rng(draw)
    # Value mutations read canonical values that a structural one may have replaced.
    early, late = sorted((first, second), key=lambda m: m.code in _STRUCTURAL)
    try:
        return first, second, late.apply(early.apply(valid, rng), rng)
    except (IndexError, KeyError, TypeError, ValueError):
        reject()  # the first change left nothing for the second to break (an emptied array)


_STRUCTURAL = frozenset({"SG001", "SG002", "SG003", "SG005", "SG006"})
