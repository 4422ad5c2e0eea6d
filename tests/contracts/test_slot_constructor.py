"""Boundary objects are built by a generated constructor that sets each slot directly."""

from __future__ import annotations

import dataclasses
import inspect

import numpy as np
import pytest

from specguard import contracts
from specguard.contracts._core._contract import boundary_classes
from specguard.contracts._core._init import install_slot_init


@pytest.mark.parametrize("cls", list(boundary_classes().values()), ids=lambda c: c.__name__)
def test_every_boundary_class_has_the_slot_constructor_with_the_dataclass_signature(
        cls: type) -> None:
    source = inspect.getsource(cls.__init__)  # type: ignore[misc]
    assert "_set_0(self, " in source and "self.__post_init__()" in source
    parameters = inspect.signature(cls).parameters
    fields = dataclasses.fields(cls)
    assert list(parameters) == [f.name for f in fields]
    for spec in fields:
        assert parameters[spec.name].kind is inspect.Parameter.KEYWORD_ONLY
        expected = inspect.Parameter.empty if spec.default is dataclasses.MISSING \
            else spec.default
        assert parameters[spec.name].default is expected


def test_the_slot_constructor_sets_every_field_validates_and_stays_frozen() -> None:
    out = contracts.VerifyOutput(mtp_k=2, vocab_size=10, seq_ids=np.array([4]),
                                 token_ids=np.array([[1, 2, -1]]), num_accepted=np.array([1]))
    assert out.mtp_k == 2 and out.seq_ids.tolist() == [4] and out.num_accepted.tolist() == [1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.mtp_k = 3  # type: ignore[misc]
    with contracts.checking(mode="strict"), pytest.raises(
            contracts.ContractViolation, match="SG202"):
        contracts.VerifyOutput(mtp_k=2, vocab_size=10, seq_ids=np.array([4]),
                               token_ids=np.array([[1, -1, 2]]), num_accepted=np.array([1]))
    with pytest.raises(TypeError, match=r"VerifyOutput\.__init__\(\) missing 4 required"):
        contracts.VerifyOutput(mtp_k=1)  # type: ignore[call-arg]


def test_a_field_it_cannot_set_by_slot_keeps_the_dataclass_constructor() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class WithFactory:
        rows: list[int] = dataclasses.field(default_factory=list)

    original = WithFactory.__init__
    assert install_slot_init(WithFactory) is False
    assert WithFactory.__init__ is original and WithFactory().rows == []

    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Plain:
        a: int
        b: int = 5

    assert install_slot_init(Plain) is True
    made = Plain(a=1)
    assert (made.a, made.b) == (1, 5)
