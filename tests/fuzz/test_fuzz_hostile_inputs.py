"""Hostile and malformed input: nothing escapes as a foreign error, nothing passes silently."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from input_snapshots import same, snapshot
from strategies.cases import Case, MappingCase
from strategies.hostile import (
    HOSTILE_ARRAYS,
    HOSTILE_SCALARS,
    ODD_SCALARS,
    SKIP,
    hostile_variants,
)
from strategies.valid import mapping_cases, valid_cases

from specguard import contracts

CLASSES = contracts.BOUNDARY_OBJECTS
# Each example tries every hostile value of every field: fewer examples go as deep.
_EXAMPLES = max(10, settings().max_examples // 3)
_CONFIGS = ({"depth": "full", "collect": "all"}, {"depth": "metadata", "collect": "first"})


def _outcome(build: Any, **config: str) -> str:
    """``"violation"``, ``"passed"`` or the name of the foreign exception that escaped."""
    with contracts.checking(mode="strict", **config):
        try:
            build()
        except contracts.ContractViolation:
            return "violation"
        except Exception as error:
            return f"{type(error).__name__}: {error}"
    return "passed"


def _field_bounded_only_by_values(kind: str) -> bool:
    # An id that wraps in int32 is an in-range int64 value that only a value rule rejects.
    return kind == "ids that wrap in int32"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=_EXAMPLES)
@given(data=st.data())
def test_hostile_field_values_raise_a_contract_violation(cls: type, data: st.DataObject) -> None:
    """Every wrong type, dtype, rank, backend or device in any field is a ContractViolation."""
    case: Case = data.draw(valid_cases(cls))
    escapes = []
    for name, kind, bad in hostile_variants(case):
        for config in _CONFIGS:
            if config["depth"] == "metadata" and _field_bounded_only_by_values(kind):
                continue
            kwargs = {**case.kwargs(), name: bad}
            before = snapshot(kwargs)
            outcome = _outcome(lambda: cls(**kwargs), **config)  # noqa: B023
            if outcome != "violation" or not same(before, snapshot(kwargs)):
                escapes.append(f"{name} <- {kind} ({config}): {outcome}")
    assert not escapes, "\n".join(escapes)


def _masked(value: np.ndarray, bad: int) -> np.ma.MaskedArray:
    """``value`` with its first entry replaced by ``bad`` and that entry masked."""
    data = value.copy()
    data.reshape(-1)[0] = bad
    mask = np.zeros(data.shape, dtype=bool)
    mask.reshape(-1)[0] = True
    return np.ma.masked_array(data, mask=mask)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_masked_arrays_cannot_hide_values(cls: type, data: st.DataObject) -> None:
    """A numpy masked array whose mask hides an invalid id is still a violation."""
    case: Case = data.draw(valid_cases(cls, min_seqs=1, min_decode=1))
    kwargs = case.kwargs()
    for spec in contracts.fields_of(cls):
        value = kwargs[spec.name]
        if not isinstance(value, np.ndarray) or value.size == 0 or value.dtype == np.bool_:
            continue
        for bad in (-1, -(2**31)):
            outcome = _outcome(lambda: cls(**{**kwargs, spec.name: _masked(value, bad)}),  # noqa: B023
                               depth="full", collect="all")
            assert outcome == "violation", f"{spec.name} masked {bad}: {outcome}"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@given(data=st.data(), odd=st.sampled_from(ODD_SCALARS))
def test_odd_scalars_pass_or_violate_but_never_crash(
    cls: type, data: st.DataObject, odd: int
) -> None:
    """Huge or hugely negative ints in any scalar field never escape as foreign errors."""
    case: Case = data.draw(valid_cases(cls))
    scalars = [s.name for s in contracts.fields_of(cls) if isinstance(s, contracts.ScalarField)]
    for name in scalars:
        outcome = _outcome(lambda: case.with_values(**{name: odd}).build(),  # noqa: B023
                           depth="full", collect="all")
        assert outcome in ("violation", "passed"), f"{name}={odd}: {outcome}"


class _Records(logging.Handler):
    """Collects the records of the ``specguard`` logger while installed."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@settings(max_examples=_EXAMPLES)
@given(data=st.data())
def test_warn_mode_logs_hostile_input_and_never_raises(cls: type, data: st.DataObject) -> None:
    """In warn mode every hostile value is logged as a violation; nothing is raised."""
    case: Case = data.draw(valid_cases(cls))
    logger = logging.getLogger("specguard")
    records = _Records()
    logger.addHandler(records)
    try:
        for name, kind, bad in hostile_variants(case):
            if _field_bounded_only_by_values(kind):
                continue
            records.messages.clear()
            contracts.STATS.reset()  # a repeat of an earlier variant's violation is only counted
            with contracts.checking(mode="warn", depth="full", collect="all"):
                cls(**{**case.kwargs(), name: bad})
            assert any(m.startswith("specguard: SG") for m in records.messages), (name, kind)
    finally:
        logger.removeHandler(records)


# from_mapping: every argument hostile in turn, on top of a valid call. Each entry says
# whether only a value rule can see the problem (then metadata depth may let it pass).
_HOSTILE_MAPPING_ARGS: dict[str, list[Any]] = {
    "drafts": [None, [], "drafts", 3, {1, 2}, [(0, [1])], np.array([1, 2]),
               torch.tensor([1, 2])],
    "seq_ids": [None, "12", {1: 2}, {1, 2}, [[1], [2, 3]], [1.0, 2.0], [True, False],
                np.array(3), [2**70], np.array([2**63], dtype=np.uint64),
                torch.empty(2, dtype=torch.int64, device="meta"), [1, 1.5]],
    "mtp_k": [None, "2", 2.0, True, 0, -1, 2**70, 2**40, [2]],
    "vocab_size": [None, "10", 10.5, 0, -(2**70), True],
    "placeholder": [None, float("nan"), 2**70, True, [[1]], "0", object()],
    "dtype": [None, np.float32, "bogus", np.int8, np.uint32, torch.float16, bool, object],
}


def _hostile_calls(case: MappingCase) -> list[tuple[str, MappingCase, bool]]:
    """``(label, call, value_level)`` for every hostile variant of a valid call."""
    ids = list(np.asarray(case.seq_ids).tolist())
    anchor = ids[0]
    without = {key: value for key, value in case.drafts.items() if key != anchor}

    def call(**changes: Any) -> MappingCase:
        return MappingCase(**{**case.__dict__, **changes})

    calls = [(f"{arg}={bad!r}", call(**{arg: bad}, **({"drafts": {}} if arg == "seq_ids"
                                                       else {})), False)
             for arg, bads in _HOSTILE_MAPPING_ARGS.items() for bad in bads]
    structural = [[0.5], [float("nan")], ["1"], [[1, 2]], {1: 2}, [2**70], [True],
                  [0] * (int(case.mtp_k) + 1), np.array([2**64 - 1], dtype=np.uint64),
                  torch.empty(2, dtype=torch.int64, device="meta"), (x for x in [1]), object()]
    calls += [(f"drafts[{anchor}]={bad!r}", call(drafts={**without, anchor: bad}), False)
              for bad in structural]
    keys: list[Any] = [float(anchor), str(anchor), None, (anchor,), max(ids) + 1, 2**70, 1.5]
    keys += [bool(anchor)] if anchor in (0, 1) else []
    calls += [(f"key {key!r}", call(drafts={**without, key: [0]}), False) for key in keys]
    calls += [
        ("negative draft", call(drafts={**without, anchor: [-1]}), True),
        ("unused slot, placeholder -1", call(drafts=without, placeholder=-1), True),
        ("negative seq id", call(seq_ids=[*ids[1:], -1], drafts={}), True),
        ("duplicate seq id", call(seq_ids=[anchor, *ids], drafts={}), True),
    ]
    return calls


@settings(max_examples=_EXAMPLES)
@given(case=mapping_cases(min_seqs=1, max_seqs=64))
def test_hostile_mappings_raise_a_contract_violation(case: MappingCase) -> None:
    """from_mapping with any hostile argument raises a ContractViolation and changes nothing."""
    escapes = []
    for label, call, value_level in _hostile_calls(case):
        before = snapshot(call.__dict__)
        for config in _CONFIGS:
            outcome = _outcome(call.build, **config)
            may_pass = value_level and config["depth"] == "metadata"
            if outcome != "violation" and not (may_pass and outcome == "passed"):
                escapes.append(f"{label} ({config}): {outcome}")
        if not same(before, snapshot(call.__dict__)):
            escapes.append(f"{label}: the arguments were changed")
    assert not escapes, "\n".join(escapes)


# Three seqs (decode, prefill, decode), mtp_k=2: small enough to read, big enough for
# every hostile kind (no square matrices, no empty arrays).
_PLAIN_BATCH = {
    "mtp_k": 2, "vocab_size": 50, "block_size": 4, "num_decode": 2, "num_tokens": 10,
    "seq_ids": np.array([7, 3, 9]), "is_decode": np.array([True, False, True]),
    "num_scheduled_tokens": np.array([3, 4, 3]), "context_lens": np.array([5, 4, 4]),
    "block_tables": np.array([[0, 1, -1, -1], [2, -1, -1, -1], [3, -1, -1, -1]]),
    "token_ids": np.arange(10), "draft_token_ids": np.array([[1, 2], [0, 0]]),
    "num_drafts": np.array([2, 0]), "state_slots": None, "draft_placeholder": None,
}


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_hostile_value_kinds_all_apply_somewhere(backend: str) -> None:
    """Every hostile kind yields a value for some field, and the plain batch itself is valid."""
    case = Case(contracts.ScheduledBatch, _PLAIN_BATCH, backend=backend)
    with contracts.checking(mode="strict", depth="full", collect="all"):
        case.build()
    kinds = {kind for _, kind, _ in hostile_variants(case)}
    numpy_only = {"big-endian", "np.matrix"} if backend == "torch" else set()
    assert kinds == (set(HOSTILE_ARRAYS) | set(HOSTILE_SCALARS)) - numpy_only
    assert not any(value is SKIP for _, _, value in hostile_variants(case))
