"""Values that once escaped as foreign exceptions or slipped past a check.

Each test reproduces one report of a hostile review: a subclass sharing its parent's
compiled plan, integers too long to print, sparse tensors, ndarray subclasses whose
reductions lie, a numpy int8 ``mtp_k``, a misspelt depth, a 10 MB string.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import numpy as np
import pytest
from contract_builders import build, kwargs

from specguard import contracts

torch = pytest.importorskip("torch")

SB = contracts.ScheduledBatch
HUGE = 10**5000  # past Python's 4300-digit limit for int -> str


def _message(make: Any) -> str:
    with pytest.raises(contracts.ContractViolation) as caught:
        make()
    return str(caught.value)


@dataclasses.dataclass(frozen=True, kw_only=True, eq=False)
class _NotedBatch(SB):
    """An engine's own batch class: the contract's fields plus one of its own."""

    note: str = "engine-specific"


def test_a_subclass_does_not_leak_its_fields_into_the_parents_plan():
    """After a subclass is validated, torch batches of the parent still validate."""
    with contracts.checking(depth="full"):
        _NotedBatch(**kwargs(SB, "torch"))
        batch = build(SB, "torch")
    assert contracts.validate(batch, depth="full") == []
    assert _NotedBatch.__sg_plan__ is not SB.__sg_plan__


def test_a_subclass_is_checked_by_the_parents_rules():
    """A subclass instance with a broken field is caught by the parent's rule."""
    tokens = kwargs(SB)["token_ids"].copy()
    tokens[3] = -1
    with contracts.checking(depth="full"), pytest.raises(
        contracts.ContractViolation, match="SG112 scheduled token ids"
    ):
        _NotedBatch(**kwargs(SB, token_ids=tokens))


@pytest.mark.parametrize(("field", "value"), [
    ("mtp_k", HUGE), ("mtp_k", -HUGE), ("num_decode", HUGE), ("num_decode", -HUGE),
    ("num_tokens", HUGE), ("num_tokens", -HUGE), ("vocab_size", -HUGE)],
    ids=lambda v: v if isinstance(v, str) else "huge" if v > 0 else "-huge")
def test_integers_too_long_to_print_are_described_by_size(field, value):
    """A scalar with over 4300 digits is a violation whose message gives its bit length."""
    message = _message(lambda: build(SB, **{field: value}))
    assert "integer of 16610 bits" in message


def test_a_vocabulary_too_large_to_print_passes_every_rule():
    """vocab_size=10**5000 bounds nothing: the batch passes, at full depth, on both backends."""
    with contracts.checking(depth="full", collect="all"):
        build(SB, vocab_size=HUGE)
        build(SB, "torch", vocab_size=HUGE)


@pytest.mark.parametrize("argument", ["mtp_k", "placeholder", "key"])
def test_from_mapping_with_integers_too_long_to_print(argument):
    """from_mapping reports a 5000-digit mtp_k, placeholder or drafts key by its size."""
    options: dict[str, Any] = {"mtp_k": 2, "vocab_size": 10, "placeholder": 0}
    drafts: dict[Any, Any] = {}
    if argument == "key":
        drafts[HUGE] = [1]
    else:
        options[argument] = HUGE
    message = _message(lambda: contracts.DraftTokens.from_mapping([1], drafts, **options))
    assert "integer of 16610 bits" in message


def test_violation_with_a_huge_seq_id_formats():
    """A violation located at a seq id too long to print still formats."""
    violation = contracts.Violation(code="SG010", title="t", boundary="b", subject="S",
                                    reason="r", seq_id=HUGE, position=HUGE, token=-HUGE,
                                    bindings={"num_tokens": HUGE})
    assert violation.format() == (
        "SG010 t [S, b]: seq <integer of 16610 bits> at batch position <integer of 16610 "
        "bits>, token -<integer of 16610 bits>: r {num_tokens=<integer of 16610 bits>}")


def test_sparse_tensors_are_refused_by_type_at_metadata_depth():
    """A sparse tensor is SG001 at metadata depth, though it holds a -1."""
    tokens = kwargs(SB, "torch")["token_ids"].clone()
    tokens[3] = -1
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG001 field has the declared type [ScheduledBatch.token_ids, scheduler → runner]: "
        "expected a numpy array or torch tensor, got sparse_coo tensor"
    )):
        build(SB, "torch", token_ids=tokens.to_sparse())


@pytest.mark.parametrize("field", ["seq_ids", "block_tables", "num_drafts"])
def test_clean_sparse_tensors_are_sg001_at_full_depth_not_sg000(field):
    """A clean sparse tensor in any field (the first one included) is SG001, never SG000."""
    dense = kwargs(SB, "torch")[field]
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        build(SB, "torch", **{field: dense.to_sparse()})
    assert caught.value.codes == ("SG001",)


class _LyingReductions(np.ndarray):
    """An ndarray whose reductions all answer 0, whatever the values."""

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **options: Any) -> Any:
        if method == "reduce":
            return 0
        plain = [np.asarray(i) if isinstance(i, _LyingReductions) else i for i in inputs]
        return getattr(ufunc, method)(*plain, **options)


def test_an_ndarray_subclass_cannot_hide_a_bad_value():
    """A subclass whose reductions lie is read through a plain view: its -1 is found."""
    tokens = kwargs(SB)["token_ids"].copy()
    tokens[3] = -1
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation, match=(
        re.escape("token 3: token id is -1")
    )):
        build(SB, token_ids=tokens.view(_LyingReductions))


def test_a_clean_ndarray_subclass_passes():
    """A subclass holding valid values passes full depth."""
    tokens = kwargs(SB)["token_ids"].view(_LyingReductions)
    with contracts.checking(depth="full", collect="all"):
        build(SB, token_ids=tokens)


def test_numpy_int8_mtp_k_does_not_wrap_in_messages():
    """mtp_k=np.int8(127): the expected width reads 128, not -128."""
    n = 3
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation,
                                                           match=re.escape("mtp_k+1=128")):
        build(SB, mtp_k=np.int8(127), num_decode=n, num_tokens=3 * 128 + 6,
              seq_ids=np.arange(n), is_decode=np.ones(n, dtype=bool),
              num_scheduled_tokens=np.array([128, 128, 132]),
              context_lens=np.full(n, 200), block_tables=np.arange(3 * 60).reshape(n, 60),
              token_ids=np.zeros(3 * 128 + 6, dtype=np.int64),
              draft_token_ids=np.zeros((n, 127), dtype=np.int64),
              num_drafts=np.zeros(n, dtype=np.int64))


@pytest.mark.parametrize("depth", ["FULL", " Full ", contracts.Depth.FULL])
def test_validate_accepts_depth_as_configure_does(depth):
    """validate(depth=...) takes any case, like configure(depth=...)."""
    batch = build(SB)
    batch.token_ids[0] = -1
    with contracts.checking(mode="warn"):
        assert [v.code for v in contracts.validate(batch, depth=depth)] == ["SG112"]


def test_validate_with_an_unknown_depth_is_a_config_error():
    """An unknown depth is a ConfigError naming the allowed values, like configure's."""
    batch = build(SB)
    with pytest.raises(contracts.ConfigError, match=re.escape(
        "depth must be one of 'metadata', 'essential', 'full'; got 'deep'"
    )):
        contracts.validate(batch, depth="deep")


@pytest.mark.parametrize("depth", [["full"], 3, None.__class__])
def test_validate_with_a_depth_of_the_wrong_type_is_a_config_error(depth):
    """A list, an int or a type as the depth is a ConfigError, never a TypeError."""
    with pytest.raises(contracts.ConfigError, match="depth must be one of"):
        contracts.validate(build(SB), depth=depth)


def test_a_ten_megabyte_string_is_described_briefly():
    """A 10 MB string as token_ids gives a message of a few hundred characters."""
    message = _message(lambda: build(SB, token_ids="x" * 10_000_000))
    assert len(message) < 1000
    assert "(10000000 characters)" in message


def test_a_long_config_value_is_quoted_briefly():
    """A 1 MB mode string is cut in the ConfigError."""
    with pytest.raises(contracts.ConfigError) as caught:
        contracts.configure(mode="x" * 1_000_000)
    assert len(str(caught.value)) < 300


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_a_vocabulary_past_int32_does_not_hide_a_negative_int32_id(backend):
    """int32 ids with vocab_size=2**40: a -1 is still outside [0, vocab_size)."""
    tokens = np.zeros(15, dtype=np.int64)
    tokens[0] = -1
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation, match=(
        re.escape("token 0: token id is -1")
    )):
        build(SB, backend, "int32", vocab_size=2**40, token_ids=tokens)


def test_numpy_int8_mtp_k_binds_its_width_without_overflow():
    """A clean VerifyOutput with mtp_k=np.int8(127) passes the fast check without a warning."""
    import warnings

    rows = np.zeros((2, 128), dtype=np.int64)
    rows[:, 1:] = -1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = contracts.VerifyOutput(  # a numpy int where an int is declared: the point here
            mtp_k=np.int8(127),  # pyright: ignore[reportArgumentType]
            vocab_size=10, seq_ids=np.arange(2), token_ids=rows,
            num_accepted=np.zeros(2, dtype=np.int64))
    assert contracts.VerifyOutput.__sg_plan__.fast_check(out)


@pytest.mark.parametrize("obj", [3, None, "batch", contracts.ScheduledBatch],
                         ids=["int", "None", "str", "the class itself"])
def test_validate_of_something_that_is_no_boundary_object_is_sg001(obj):
    """validate() handed anything but a boundary object names what it got, as SG001 by
    mode, instead of an AttributeError from inside specguard."""
    with pytest.raises(contracts.ContractViolation) as raised:
        contracts.validate(obj)
    (violation,) = raised.value.violations
    assert (violation.code, violation.field, violation.subject) == ("SG001", "obj",
                                                                    "validate()")
    assert violation.reason == ("validate() checks boundary objects (classes made by "
                                f"@boundary_object), got {contracts.describe(obj)}")
    with contracts.checking(mode="warn"):
        assert [v.code for v in contracts.validate(obj)] == ["SG001"]
    with contracts.checking(mode="off"):
        assert contracts.validate(obj) == []
