"""The compiled clearances: built where a compiler is, switched off on request, and
declining (None) every input they do not read, so that numpy answers instead."""

from __future__ import annotations

import re
import shutil
import sysconfig
from typing import Any

import numpy as np
import pytest
from contract_builders import CLEAN, build, kwargs
from kernel_switch import kernels_as, require

from specguard import contracts
from specguard.contracts._core import _compiled
from specguard.contracts._core._clearance import clearance_for


def _compiler() -> str | None:
    command = (sysconfig.get_config_var("CC") or "").split()
    return shutil.which(command[0]) if command else None


def test_an_install_with_a_c_compiler_has_the_compiled_kernels() -> None:
    """The extension is optional for installs without a compiler; with one, a missing
    module is a broken build, not a reason to run every step on numpy."""
    if _compiler() is None:
        pytest.skip("no C compiler: the kernels are optional here")
    assert _compiled.load_kernels({}) is not None


@pytest.mark.parametrize("setting", ["1", "yes", " true "])
def test_specguard_pure_python_switches_the_kernels_off(setting: str) -> None:
    assert _compiled.load_kernels({"SPECGUARD_PURE_PYTHON": setting}) is None


@pytest.mark.parametrize("setting", ["", "0", " "])
def test_an_empty_or_zero_setting_leaves_them_on(setting: str) -> None:
    require("compiled")
    assert _compiled.load_kernels({"SPECGUARD_PURE_PYTHON": setting}) is not None


CLEARED = [cls for cls in CLEAN if clearance_for(cls.__name__)]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("cls", CLEARED, ids=lambda c: c.__name__)
def test_each_compiled_clearance_clears_a_clean_object_itself(cls: type, dtype: str) -> None:
    """Both id dtypes engines use are read by the kernel (no decline to numpy)."""
    obj = build(cls, dtype=dtype)
    found = clearance_for(cls.__name__)
    assert found is not None
    with kernels_as("compiled") as counting:
        assert found.check(obj) is True
    assert counting is not None and counting.answered() == 1 and counting.declined() == 0


# One break per cleared class, each one of its covered rules, with the message the rule
# gives once the compiled clearance has said no.
BREAKS: list[tuple[type, dict[str, Any], str]] = [
    (contracts.ScheduledBatch, {"token_ids": np.r_[-1, np.arange(1, 15)]},
     "SG112 scheduled token ids are valid vocabulary ids [ScheduledBatch.token_ids, "
     "scheduler → runner]: seq 40 at batch position 0, token 0: token id is -1 "
     "(expected 0 <= id < vocab_size=32)"),
    (contracts.ModelInput, {"input_ids": np.array([1, 2, 3, 4, 32, 6])},
     "SG301 no sentinel reaches an embedding [ModelInput.input_ids, runner → target "
     "model]: seq 8 at batch position 1, token 4: input id is 32 (expected 0 <= id < "
     "vocab_size=32)"),
    (contracts.DrafterInput, {"sample_indices": np.array([2, 5, 5])},
     "SG302 each seq samples from a token of its own span [DrafterInput.sample_indices, "
     "runner → drafter]: seq 8 at batch position 1: sample index 5 is outside the seq's "
     "span [3, 5)"),
    (contracts.VerifyOutput, {"num_accepted": np.array([2, 1, 3])},
     "SG201 accepted counts are within [0, mtp_k] [VerifyOutput.num_accepted, verifier → "
     "drafter]: seq 44 at batch position 2: accepted count is 3 (expected 0..mtp_k=2)"),
    (contracts.DrafterOutput, {"draft_token_ids": np.array([[1, 2], [3, -1], [5, 6]])},
     "SG108 draft token ids are valid vocabulary ids [DrafterOutput.draft_token_ids, "
     "drafter → scheduler]: seq 8 at batch position 1: draft 1 of row 1 is -1 (expected "
     "0 <= id < vocab_size=32)"),
    (contracts.RequestOutput, {"token_ids": np.array([[5, 2, 9], [7, 2, -1], [3, -1, -1]])},
     "SG402 nothing is emitted after an accepted stop token [RequestOutput.token_ids, "
     "verifier → request]: seq 40 at batch position 0: column 1 is stop id 2, and 1 more "
     "token follows it (expected nothing after column 1)"),
    (contracts.DraftTokens, {"num_drafts": np.array([2, 3, 0])},
     "SG109 real-draft counts are within [0, mtp_k] [DraftTokens.num_drafts, scheduler → "
     "runner]: seq 42 at batch position 1: row 1 claims 3 drafts (expected 0..mtp_k=2)"),
    (contracts.LogitsRows, {"row_counts": np.array([3, 0, 3])},
     "SG312 per-row data gives each request its 1 + K rows, inside the data "
     "[LogitsRows.row_counts, runner → target model]: seq 44 at batch position 2: the "
     "data holds 3 rows for it, the logits 2 (expected 1 + num_drafts)"),
]


@pytest.mark.parametrize(("cls", "changes", "message"), BREAKS,
                         ids=[cls.__name__ for cls, _, _ in BREAKS])
def test_a_compiled_no_lets_the_rule_name_the_violation(cls: type, changes: dict[str, Any],
                                                        message: str) -> None:
    found = clearance_for(cls.__name__)
    assert found is not None
    broken = kwargs(cls, **changes)
    with kernels_as("compiled") as counting:
        with contracts.checking(mode="off"):
            obj = cls(**broken)
        assert found.check(obj) is False
        with contracts.checking(mode="strict", depth="essential"), pytest.raises(
                contracts.ContractViolation, match=re.escape(message)):
            cls(**broken)
    assert counting is not None and counting.declined() == 0


def _kernels() -> Any:
    require("compiled")
    kernels = _compiled.load_kernels()
    assert kernels is not None
    return kernels


def test_strided_views_are_read_in_place() -> None:
    kernels = _kernels()
    ids = np.arange(20, dtype=np.int64)
    assert kernels.unique_ids(ids[::2]) is True
    rows = np.array([[1, 2], [3, 1], [1, 6]], dtype=np.int32)
    assert kernels.unique_ids(rows[:, 0]) is False  # 1, 3, 1: read down a column
    assert kernels.unique_ids(rows[:, 1]) is True  # 2, 1, 6


@pytest.mark.parametrize("n", [2, 48, 49, 1000, 70_000])
def test_unique_ids_on_every_size_both_ways(n: int) -> None:
    """Pairs up to 48 ids, an open-addressing table beyond: the same answers."""
    kernels = _kernels()
    ids = np.random.default_rng(n).permutation(3 * n)[:n].astype(np.int64)
    assert kernels.unique_ids(ids) is True
    repeated = ids.copy()
    repeated[-1] = repeated[0]
    assert kernels.unique_ids(repeated) is False
    negative = ids.copy()
    negative[n // 2] = -1
    assert kernels.unique_ids(negative) is False


@pytest.mark.parametrize("ids", [
    np.arange(4, dtype=">i8"),  # big-endian
    np.arange(4, dtype=np.uint64),  # past int64's range
    np.arange(4, dtype=np.float64),
    np.arange(4).reshape(2, 2),  # not one axis
    [0, 1, 2],  # no buffer
], ids=["big-endian", "uint64", "float", "2-d", "list"])
def test_what_the_kernels_do_not_read_they_decline(ids: Any) -> None:
    assert _kernels().unique_ids(ids) is None


def test_values_numpy_arithmetic_could_wrap_are_left_to_numpy() -> None:
    """Past 2**30 a +1 or a sum in int32 could wrap in the rules but not in the loop."""
    kernels = _kernels()
    fields = kwargs(contracts.LogitsRows)
    args = (fields["seq_ids"], fields["num_drafts"], fields["row_starts"],
            fields["row_counts"], fields["num_logits"], fields["num_rows"])
    assert kernels.logits_rows(*args) is True
    huge = fields["num_drafts"].copy()
    huge[0] = 2**31
    assert kernels.logits_rows(args[0], huge, *args[2:]) is None


def test_a_scalar_that_is_no_int_declines_and_a_wrong_call_is_a_type_error() -> None:
    kernels = _kernels()
    fields = kwargs(contracts.DrafterOutput)
    args = [fields["seq_ids"], fields["draft_token_ids"], 32, None, 2]
    assert kernels.drafter_output(*args) is True
    args[2] = 32.0
    assert kernels.drafter_output(*args) is None
    args[2] = 2**70
    assert kernels.drafter_output(*args) is None
    with pytest.raises(TypeError, match=re.escape("drafter_output() takes 5 arguments (2 given)")):
        kernels.drafter_output(fields["seq_ids"], 32)


def test_a_declined_object_is_answered_by_numpy_with_the_same_verdict() -> None:
    """A big-endian batch is no form the kernel reads: numpy clears it, and breaks it."""
    found = clearance_for("ScheduledBatch")
    assert found is not None
    fields: dict[str, Any] = {name: value.astype(value.dtype.newbyteorder(">"))
              if isinstance(value, np.ndarray) and value.dtype.kind == "i" else value
              for name, value in kwargs(contracts.ScheduledBatch).items()}
    with kernels_as("compiled") as counting, contracts.checking(mode="off"):
        clean = contracts.ScheduledBatch(**fields)
        assert found.check(clean) is True
        fields["num_drafts"] = fields["num_drafts"].copy()
        fields["num_drafts"][0] = 3  # past mtp_k: SG109
        assert found.check(contracts.ScheduledBatch(**fields)) is False
    assert counting is not None and counting.declined() == 2 and counting.answered() == 0


def _table_with(row: int, column: int) -> np.ndarray:
    tables = CLEAN[contracts.ScheduledBatch]["block_tables"].copy()
    tables[row, column] = -1
    return tables


_SG110 = ("SG110 block tables are not empty and cover the context [ScheduledBatch."
          "block_tables, scheduler → runner]: seq 42 at batch position 2: ")


@pytest.mark.parametrize("implementation", ["compiled", "numpy"])
def test_sg110_passes_a_clean_table_and_names_a_short_one_on_both_paths(
        implementation: str) -> None:
    """Seq 42 has 17 tokens of context in blocks of 4: blocks 0..4, its last at column 4."""
    with kernels_as(implementation) as counting:
        with contracts.checking(mode="strict", depth="full"):
            build(contracts.ScheduledBatch)
        with contracts.checking(mode="strict", depth="essential"), pytest.raises(
                contracts.ContractViolation, match=re.escape(
                    _SG110 + "block table is empty or ends before the context does")):
            build(contracts.ScheduledBatch, block_tables=_table_with(2, 4))
    assert counting is None or counting.answers[("block_tables", True)] >= 1


@pytest.mark.parametrize("implementation", ["compiled", "numpy"])
def test_sg110_reads_the_middle_blocks_at_full_depth_only(implementation: str) -> None:
    holed = _table_with(2, 2)
    with kernels_as(implementation):
        with contracts.checking(mode="strict", depth="essential"):
            build(contracts.ScheduledBatch, block_tables=holed)  # ends only: clean
        with contracts.checking(mode="strict", depth="full"), pytest.raises(
                contracts.ContractViolation, match=re.escape(
                    _SG110 + "block 2 is -1, padding inside the 5 blocks the context needs")):
            build(contracts.ScheduledBatch, block_tables=holed)


def test_the_compiled_block_check_declines_what_the_rule_must_explain() -> None:
    kernels = _kernels()
    tables = np.array([[0, 1], [2, -1]])
    assert kernels.block_tables(tables, np.array([5, 3]), 4, False) is True
    assert kernels.block_tables(tables, np.array([5, 5]), 4, False) is False  # ends at -1
    assert kernels.block_tables(tables, np.array([5, 0]), 4, False) is None  # no context
    assert kernels.block_tables(tables, np.array([5, 9]), 4, False) is None  # past the table
    assert kernels.block_tables(tables, np.array([5, 3]), 0, False) is None  # no block size


def test_past_1024_seqs_the_kernels_leave_the_object_to_numpy() -> None:
    """There numpy's vectorised passes beat the per-seq loops: the verdict is numpy's."""
    kernels = _kernels()
    fields = kwargs(contracts.DrafterOutput)
    limit = kernels.ROWS_LIMIT
    assert limit == 1024
    drafts = np.zeros((limit + 1, 2), dtype=np.int64)
    assert kernels.drafter_output(np.arange(limit), drafts[:limit], 32, None, 2) is True
    assert kernels.drafter_output(np.arange(limit + 1), drafts, 32, None, 2) is None
    assert kernels.drafter_output(fields["seq_ids"], fields["draft_token_ids"], 32, None,
                                  2) is True


# -- CPU torch tensors, read in place ---------------------------------------------------


@pytest.fixture
def no_twins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail any validation that makes numpy views of an object's tensors."""
    from specguard.contracts._core import _validate

    def refuse(obj: Any, anchor: str, names: tuple[str, ...]) -> Any:
        raise AssertionError(f"a numpy twin of {type(obj).__name__} was made")

    monkeypatch.setattr(_validate, "host_twin", refuse)


def _cleared_whole(cls: type) -> bool:
    """Whether the clearance covers every rule ``cls`` runs at the default depth."""
    found = clearance_for(cls.__name__)
    rules = cls.__sg_plan__.by_depth[contracts.Depth.ESSENTIAL]  # type: ignore[attr-defined]
    return found is not None and {r.code for r in rules} <= found.covers


# ScheduledBatch keeps SG110, whose own kernel reads numpy views of the block tables.
WHOLLY_CLEARED = [cls for cls in CLEARED if _cleared_whole(cls)]


def test_every_cleared_class_but_the_batch_is_cleared_whole_by_default() -> None:
    assert {cls.__name__ for cls in CLEARED} - {cls.__name__ for cls in WHOLLY_CLEARED} \
        == {"ScheduledBatch"}


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("cls", WHOLLY_CLEARED, ids=lambda c: c.__name__)
def test_a_clean_object_of_cpu_tensors_is_cleared_without_numpy_views(
        cls: type, dtype: str, no_twins: None) -> None:
    """The kernel reads the tensors themselves: no view of each is made first."""
    pytest.importorskip("torch")
    with kernels_as("compiled") as counting, contracts.checking(mode="strict",
                                                                 depth="essential"):
        obj = build(cls, backend="torch", dtype=dtype)
    assert contracts.validate(obj) == []
    assert counting is not None and counting.answered() >= 1 and counting.declined() == 0


@pytest.mark.parametrize("backend", ["numpy", "torch"])
@pytest.mark.parametrize("cls", WHOLLY_CLEARED, ids=lambda c: c.__name__)
def test_a_clean_object_is_cleared_at_once_after_the_first_validation(
        cls: type, backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """From the second validation of a class at a depth on, a clean object's compiled
    clearance answers straight after its metadata check: Plan.cleared is not reached."""
    from specguard.contracts._core._validate import Plan

    if backend == "torch":
        pytest.importorskip("torch")
    with kernels_as("compiled"), contracts.checking(mode="strict", depth="essential"):
        obj = build(cls, backend=backend)
        assert contracts.validate(obj) == []  # the first takes the full path, once

        def refuse(self: Plan, rules: Any, obj: Any) -> Any:
            raise AssertionError("Plan.cleared was reached")

        monkeypatch.setattr(Plan, "cleared", refuse)
        assert contracts.validate(obj) == []
        assert contracts.validate(build(cls, backend=backend)) == []


@pytest.mark.parametrize(("cls", "changes", "message"), BREAKS,
                         ids=[cls.__name__ for cls, _, _ in BREAKS])
def test_a_broken_object_after_clean_ones_gets_its_message(
        cls: type, changes: dict[str, Any], message: str) -> None:
    """The compiled no is no verdict: the rules explain, as on the first object."""
    with kernels_as("compiled"), contracts.checking(mode="strict", depth="essential"):
        for _ in range(2):
            assert contracts.validate(build(cls)) == []
        with pytest.raises(contracts.ContractViolation, match=re.escape(message)):
            cls(**kwargs(cls, **changes))


@pytest.mark.parametrize(("cls", "changes", "message"), BREAKS,
                         ids=[cls.__name__ for cls, _, _ in BREAKS])
def test_a_broken_object_of_cpu_tensors_gets_the_numpy_objects_message(
        cls: type, changes: dict[str, Any], message: str) -> None:
    """The kernel's no on tensors leaves the rules to explain, as on numpy arrays."""
    pytest.importorskip("torch")
    broken = kwargs(cls, backend="torch", **changes)
    with kernels_as("compiled"), contracts.checking(mode="strict", depth="essential"), \
            pytest.raises(contracts.ContractViolation, match=re.escape(message)):
        cls(**broken)


def _tensor_kernels() -> tuple[Any, Any]:
    torch = pytest.importorskip("torch")
    kernels = _kernels()
    assert _compiled.reads_in_place(torch.Tensor)
    return kernels, torch


def test_tensors_are_read_with_their_strides() -> None:
    kernels, torch = _tensor_kernels()
    ids = torch.arange(20)
    assert kernels.unique_ids(ids[::2]) is True
    rows = torch.tensor([[1, 2], [3, 1], [1, 6]], dtype=torch.int32)
    assert kernels.unique_ids(rows[:, 0]) is False  # 1, 3, 1: read down a column
    assert kernels.unique_ids(rows.T[1]) is True  # 2, 1, 6 of the transposed view
    drafts = torch.zeros((3, 4), dtype=torch.int64).T  # (4, 3), strides (1, 4)
    assert kernels.drafter_output(torch.arange(4), drafts, 10, None, 3) is True
    drafts[2, 1] = 10  # outside the vocabulary, seen through the transposed strides
    assert kernels.drafter_output(torch.arange(4), drafts, 10, None, 3) is False


def test_tensors_the_kernels_cannot_read_as_numpy_would_are_declined() -> None:
    """What numpy() refuses (a pending negation, a tensor with no memory), what lives
    elsewhere, what a subclass may answer as it likes, and what no loop reads."""
    kernels, torch = _tensor_kernels()

    class Subclass(torch.Tensor):
        pass

    drafts = torch.zeros((4, 3), dtype=torch.int64)
    assert kernels.drafter_output(torch.arange(4), drafts, 10, None, 3) is True
    unread = {
        "negative bit": torch._neg_view(drafts),
        "ZeroTensor": torch._efficientzerotensor((4, 3), dtype=torch.int64),
        "meta": drafts.to("meta"),
        "subclass": drafts.as_subclass(Subclass),
        "float": drafts.double(),
        "sparse": drafts.to_sparse(),
    }
    for name, tensor in unread.items():
        assert kernels.drafter_output(torch.arange(4), tensor, 10, None, 3) is None, name


def test_a_tensor_is_never_taken_for_a_writable_array() -> None:
    """The tracker's kernels write into its own numpy arrays; a tensor there is declined."""
    kernels, torch = _tensor_kernels()
    bits = np.zeros(64, dtype=bool)
    ids = np.arange(3, dtype=np.int64)
    decode = np.ones(3, dtype=bool)
    first = np.zeros(3, dtype=bool)
    assert kernels.seen_seqs(bits, 58, ids, decode, None, first) is not None
    assert kernels.seen_seqs(torch.from_numpy(bits), 58, ids, decode, None, first) is None
