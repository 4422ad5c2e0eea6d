"""The compiled kernels on arbitrary input: any shapes, dtypes, strides and scalars.

Whatever they are handed, they answer True, False or None and never crash the process:
an out-of-bounds read in C would not raise, it would corrupt or kill the engine. Every
array a kernel indexes by another's values (spans, sample indices, rows of a previous
step, the last block of a table) is drawn here to point anywhere.
"""

from __future__ import annotations

import contextlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_switch import require

from specguard.contracts._core import _compiled

_DTYPES = st.sampled_from([np.int64, np.int32, np.int16, np.uint8, np.uint32, bool,
                           np.float64, np.dtype(">i8")])
_VALUES = st.integers(-3, 12) | st.sampled_from([2**31 - 1, -(2**31), 2**40, -1])


@st.composite
def _array(draw: Any) -> Any:
    ndim = draw(st.sampled_from([1, 1, 1, 2, 0]))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=ndim, max_size=ndim)))
    values = draw(st.lists(_VALUES, min_size=int(np.prod(shape)),
                           max_size=int(np.prod(shape))))
    dtype = draw(_DTYPES)
    with np.errstate(over="ignore"):
        array = np.array(values, dtype=np.int64).astype(dtype).reshape(shape)
    if ndim >= 1 and draw(st.booleans()):
        array = np.repeat(array, 2, axis=0)[::2]  # a strided view of the same values
    return array


_SCALARS = st.integers(-3, 12) | st.sampled_from([None, 2**63 - 1, 2**70, 3.5, "4"])
_ARGUMENT = _array() | _SCALARS

# Each kernel's arity.
_KERNELS = {"unique_ids": 1, "scheduled_batch": 14, "model_input": 11, "drafter_input": 10,
            "verify_output": 5, "drafter_output": 5, "request_output": 8, "logits_rows": 6,
            "block_tables": 4, "step_transition": 15, "transition": 22, "verify_rows": 8,
            "draft_rows": 8, "id_rows": 3, "touch_ends": 5,
            "seen_seqs": 6, "pack_ints": 3, "plan_sound": 13, "no_short_proposals": 4}


@pytest.mark.parametrize("name", sorted(_KERNELS))
@settings(max_examples=150)
@given(data=st.data())
def test_a_kernel_answers_any_input_without_crashing(name: str, data: st.DataObject) -> None:
    require("compiled")
    kernels = _compiled.load_kernels()
    function = getattr(kernels, name)
    args = [data.draw(_ARGUMENT) for _ in range(_KERNELS[name])]
    assert function(*args) in (True, False, None)


def test_every_kernel_is_fuzzed() -> None:
    require("compiled")
    kernels = _compiled.load_kernels()
    exported = {name for name in dir(kernels) if callable(getattr(kernels, name))
                and not name.startswith("_")}
    assert exported == set(_KERNELS) | _SETUP


#: Kernels that answer no rule: they tell the module about its inputs' types.
_SETUP = {"use_torch"}


_CLEARED = ["ScheduledBatch", "DraftTokens", "ModelInput", "DrafterInput", "VerifyOutput",
            "DrafterOutput", "RequestOutput", "LogitsRows"]


@pytest.mark.parametrize("name", _CLEARED)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # numpy on a stray tensor
@settings(max_examples=100)
@given(data=st.data())
def test_a_valid_object_with_one_field_replaced_never_crashes_its_kernel(
        name: str, data: st.DataObject) -> None:
    """Deep in a kernel, past the checks of shapes: a valid object's field swapped for
    any array or scalar (a span table that points past the stream, a row index past the
    previous step's rows) is answered, or declined, like any other."""
    import dataclasses

    from kernel_switch import kernels_as
    from strategies.valid import valid_cases

    from specguard import contracts
    from specguard.contracts._core._clearance import clearance_for

    require("compiled")
    cls = getattr(contracts, name)
    case = data.draw(valid_cases(cls))
    with contracts.checking(mode="off"):
        obj = case.build()
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
        field = data.draw(st.sampled_from(sorted(fields)))
        fields[field] = data.draw(_ARGUMENT)
        broken = cls(**fields)
    found = clearance_for(name)
    assert found is not None
    # The numpy fallback may raise on such input (the rules then run): only the kernel's
    # answer is asked for here.
    with kernels_as("compiled") as counting, contextlib.suppress(Exception):
        found.check(broken)
    assert counting is not None
    assert all(verdict in (True, False, None) for _, verdict in counting.answers)


#: The kernels that only read their arrays: a CPU tensor in any place is read in place.
_READ_ONLY = ("unique_ids", "scheduled_batch", "model_input", "drafter_input",
              "verify_output", "drafter_output", "request_output", "logits_rows",
              "block_tables", "step_transition")


def _as_tensor(value: Any, draw: Any) -> Any:
    """``value``, or where torch can view it, sometimes a tensor over the same memory."""
    import torch

    if not isinstance(value, np.ndarray) or not draw(st.booleans()):
        return value
    try:
        return torch.from_numpy(value)
    except (TypeError, ValueError):  # a byte order or dtype torch does not take
        return value


@pytest.mark.parametrize("name", _READ_ONLY)
@settings(max_examples=150)
@given(data=st.data())
def test_a_kernel_answers_tensors_as_it_answers_their_numpy_views(
        name: str, data: st.DataObject) -> None:
    """Read in place, a tensor is the same values with the same strides: any mix of
    tensors and arrays gets the answer the arrays alone get."""
    pytest.importorskip("torch")
    require("compiled")
    kernels = _compiled.load_kernels()
    assert _compiled.reads_in_place(__import__("torch").Tensor)
    function = getattr(kernels, name)
    args = [data.draw(_ARGUMENT) for _ in range(_KERNELS[name])]
    mixed = [_as_tensor(arg, data.draw) for arg in args]
    assert function(*mixed) == function(*args)


_ENTRIES = (st.integers(-(2**63), 2**63 - 1) | st.integers(2**63, 2**70)
            | st.integers(-(2**70), -(2**63) - 1) | st.booleans()
            | st.integers(-5, 5).map(np.int64) | st.floats(allow_nan=False) | st.none()
            | st.text(max_size=2))


def _plain(value: Any) -> bool:
    return type(value) is int and -(2**63) <= value < 2**63


@settings(max_examples=300)
@given(values=st.lists(_ENTRIES, max_size=8), as_tuple=st.booleans())
def test_exact_ints_packs_plain_ints_and_nothing_else(values: list[Any], as_tuple: bool) -> None:
    """Every entry a plain int within int64: their int64 vector; anything else (a bool,
    a numpy integer, a float, an int past int64): None, for the caller to read."""
    require("compiled")
    given_values = tuple(values) if as_tuple else values
    packed = _compiled.exact_ints(given_values)
    if all(map(_plain, values)):
        assert packed is not None
        assert packed.dtype == np.int64 and packed.tolist() == values
    else:
        assert packed is None


@settings(max_examples=300)
@given(rows=st.lists(st.lists(_ENTRIES | st.integers(0, 9), max_size=4)
                     | st.tuples(st.integers(0, 9)), max_size=6),
       width=st.integers(1, 4))
def test_exact_ints_packs_rows_of_one_width_of_plain_ints(rows: list[Any], width: int) -> None:
    require("compiled")
    packed = _compiled.exact_ints(rows, width)
    clean = all(type(r) is list and len(r) == width and all(map(_plain, r)) for r in rows)
    if clean:
        assert packed is not None
        assert packed.reshape(len(rows), width).tolist() == rows
    else:
        assert packed is None


def test_pack_ints_declines_an_output_it_cannot_fill() -> None:
    require("compiled")
    kernels = _compiled.load_kernels()
    assert kernels is not None
    assert kernels.pack_ints([1, 2], 0, np.empty(2, dtype=np.int64)) is True
    assert kernels.pack_ints([1, 2], 0, np.empty(3, dtype=np.int64)) is None  # wrong size
    assert kernels.pack_ints([1, 2], 0, np.empty(2, dtype=np.int32)) is None  # not int64
    assert kernels.pack_ints([1, 2], 0, np.empty(4, dtype=np.int64)[::2]) is None  # strided
    read_only = np.empty(2, dtype=np.int64)
    read_only.flags.writeable = False
    assert kernels.pack_ints([1, 2], 0, read_only) is None
    assert kernels.pack_ints(iter([1, 2]), 0, np.empty(2, dtype=np.int64)) is None
    assert kernels.pack_ints([[1, 2]], -1, np.empty(2, dtype=np.int64)) is None


def test_exact_ints_is_none_without_the_kernels() -> None:
    from kernel_switch import kernels_as

    with kernels_as("numpy"):
        assert _compiled.exact_ints([1, 2, 3]) is None


_PLAN_ARRAY = _array() | st.sampled_from([None, [0, 1], 3])


@st.composite
def _plan_fields(draw: Any) -> dict[str, Any]:
    """A StepPlan's fields: mostly consistent shapes and kinds, each field sometimes
    replaced by any array, None, a list or a scalar."""
    n = draw(st.integers(0, 4))
    decode = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    num_decode = sum(decode)
    k = draw(st.sampled_from([1, 2, 3]))
    fields: dict[str, Any] = {
        "mtp_k": draw(st.sampled_from([k, k, 0, True, 2**70, 2.0])),
        "seq_ids": np.arange(n, dtype=np.int64), "is_decode": np.array(decode, dtype=bool),
        "starts": np.zeros(n, dtype=np.int32), "num_scheduled": np.ones(n, dtype=np.int64),
        "draft_token_ids": np.zeros((num_decode, k), dtype=np.int64),
        "num_drafts": np.full(num_decode, k, dtype=np.uint8),
        "draft_placeholder": None,
        "token_ids": draw(st.sampled_from([None, np.zeros(3, dtype=np.int64)])),
        "num_before_drafts": draw(st.sampled_from([None, np.ones(num_decode, dtype=np.int64)])),
        "drafts_handed_over": draw(st.sampled_from([None, np.zeros(num_decode, dtype=bool)])),
        "first_scheduled": draw(st.sampled_from([None, np.zeros(n, dtype=bool)])),
        "stable_ids": draw(st.sampled_from([True, False, 1, np.bool_(True)])),
    }
    names = ["seq_ids", "is_decode", "starts", "num_scheduled", "draft_token_ids",
             "num_drafts", "token_ids", "num_before_drafts", "drafts_handed_over",
             "first_scheduled"]
    for name in draw(st.lists(st.sampled_from(names), max_size=3, unique=True)):
        fields[name] = draw(_PLAN_ARRAY)
    return fields


@settings(max_examples=400)
@given(fields=_plan_fields())
def test_plan_sound_answers_as_the_numpy_check_does(fields: dict[str, Any]) -> None:
    """Where the kernel answers, it is the numpy check's answer; where it declines,
    ``is_sound`` is the numpy check itself."""
    from specguard.adapters import StepPlan

    require("compiled")
    plan = StepPlan(**fields)
    in_numpy = plan._sound_in_numpy()
    kernels = _compiled.load_kernels()
    assert kernels is not None
    answer = kernels.plan_sound(
        np.ndarray, plan.mtp_k, plan.stable_ids, plan.seq_ids, plan.is_decode, plan.starts,
        plan.num_scheduled, plan.draft_token_ids, plan.num_drafts, plan.token_ids,
        plan.num_before_drafts, plan.drafts_handed_over, plan.first_scheduled)
    assert answer in (True, False, None)
    if answer is not None:
        assert answer is in_numpy
    assert plan.is_sound() is in_numpy


def test_plan_sound_reads_a_sound_plan_and_its_breaks() -> None:
    """Pinned both ways: a decode plan is sound; a draft row of another width, a phase
    that is not bool, a tensor where an array belongs are not; a big-endian array is
    left to numpy."""
    from specguard.adapters import StepPlan

    require("compiled")
    kernels = _compiled.load_kernels()
    assert kernels is not None

    def answer(**changes: Any) -> bool | None:
        fields: dict[str, Any] = {
            "mtp_k": 2, "seq_ids": np.array([7, 9]), "is_decode": np.array([True, False]),
            "starts": np.array([4, 0]), "num_scheduled": np.array([3, 5]),
            "draft_token_ids": np.array([[1, 2]]), "num_drafts": np.array([2]),
        }
        fields.update(changes)
        plan = StepPlan(**fields)
        return kernels.plan_sound(
            np.ndarray, plan.mtp_k, plan.stable_ids, plan.seq_ids, plan.is_decode,
            plan.starts, plan.num_scheduled, plan.draft_token_ids, plan.num_drafts,
            plan.token_ids, plan.num_before_drafts, plan.drafts_handed_over,
            plan.first_scheduled)

    assert answer() is True
    assert answer(draft_token_ids=np.array([[1, 2, 3]])) is False
    assert answer(is_decode=np.array([1, 0])) is False
    assert answer(num_before_drafts=np.array([1, 1])) is False
    assert answer(mtp_k=True) is False
    assert answer(starts=[4, 0]) is False
    assert answer(starts=np.array([4, 0], dtype=">i8")) is None


@settings(max_examples=300)
@given(rows=st.lists(st.tuples(st.booleans(), st.integers(-2, 4), st.booleans()), max_size=6),
       k=st.integers(1, 3), strided=st.booleans())
def test_no_short_proposals_answers_as_numpy_does(rows: list[tuple[bool, int, bool]], k: int,
                                                  strided: bool) -> None:
    require("compiled")
    kernels = _compiled.load_kernels()
    assert kernels is not None
    drafted = np.array([r[0] for r in rows], dtype=bool)
    counts = np.array([r[1] for r in rows], dtype=np.int64)
    decode = np.array([r[2] for r in rows], dtype=bool)
    if strided:
        drafted, counts, decode = (np.repeat(a, 2)[::2] for a in (drafted, counts, decode))
    expected = not (drafted & (counts < k) & decode).any()
    assert kernels.no_short_proposals(drafted, counts, decode, k) is expected
    # Input of other kinds is left to numpy.
    assert kernels.no_short_proposals(counts, counts, decode, k) is None
    assert kernels.no_short_proposals(drafted, counts[:-1] if rows else counts[:0],
                                      decode, k) in (None, True)
