"""Each class's metadata predicate is generated at its first check, once."""

from __future__ import annotations

import numpy as np
import pytest

from specguard import contracts
from specguard.contracts import Array, Index, boundary_object


def _fresh_class() -> type:
    @boundary_object(contracts.Boundary.ANY)
    class Lengths(contracts.BoundaryObject):
        """One array field and one scalar."""

        size: int
        lengths: Index[Array, "n"]

    return Lengths


def _is_stand_in(plan: object) -> bool:
    return bool(getattr(plan.fast_check, "__sg_stand_in__", False))  # type: ignore[attr-defined]


def test_defining_a_class_compiles_nothing():
    """Until something is checked, the plan holds a stand-in, not generated code."""
    assert _is_stand_in(_fresh_class().__sg_plan__)


def test_the_first_check_puts_the_generated_predicate_in_place():
    """The first validation compiles the predicate, which then answers every check."""
    cls = _fresh_class()
    stand_in = cls.__sg_plan__.fast_check
    cls(size=2, lengths=np.arange(2))
    compiled = cls.__sg_plan__.fast_check
    assert not _is_stand_in(cls.__sg_plan__)
    assert stand_in(cls(size=2, lengths=np.arange(2))) is True
    assert cls.__sg_plan__.fast_check is compiled  # a stale stand-in compiles nothing new


def test_the_compiled_predicate_catches_what_the_stand_in_would():
    """The predicate compiled at first use still sees a wrong dtype, and names its rule."""
    cls = _fresh_class()
    with pytest.raises(contracts.ContractViolation, match="SG002"):
        cls(size=2, lengths=np.zeros(2))
    assert not _is_stand_in(cls.__sg_plan__)
    with contracts.checking(mode="off"):
        floats = cls(size=2, lengths=np.zeros(2))
    assert cls.__sg_plan__.compiled_fast_check()(floats) is False


def _optional_first_class() -> type:
    @boundary_object(contracts.Boundary.ANY)
    class Marked(contracts.BoundaryObject):
        """An optional array that may bind ``n`` before the required one does."""

        marks: Index[Array, "n"] | None = None
        lengths: Index[Array, "n"] = None  # type: ignore[assignment]

    return Marked


@pytest.mark.parametrize(("marks", "lengths", "clean"), [
    pytest.param(np.arange(3), np.arange(3), True, id="both-agree"),
    pytest.param(None, np.arange(3), True, id="optional-absent"),
    pytest.param(np.arange(2), np.arange(3), False, id="optional-shorter"),
    pytest.param(np.arange(4), np.arange(3), False, id="optional-longer"),
])
def test_a_dimension_first_bound_by_an_optional_array_is_compared_after(marks, lengths, clean):
    """Both generated predicates bind ``n`` from the optional array when it is present
    and compare the required one to it, as the explaining walk does."""
    cls = _optional_first_class()
    with contracts.checking(mode="off"):
        obj = cls(marks=marks, lengths=lengths)
    fast = cls.__sg_plan__.compiled_fast_check()
    assert fast(obj) is clean
    assert fast.__globals__["general_check"](obj) is clean
    violations = contracts.validate(obj, config=contracts.Config(mode=contracts.Mode.WARN))
    assert [v.code for v in violations] == ([] if clean else ["SG004"])
