"""Valid boundary objects over the whole space pass every check and are never touched."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from input_snapshots import same, snapshot
from strategies.cases import Case
from strategies.valid import mapping_cases, valid_cases

from specguard import contracts
from specguard.contracts._core._metadata import metadata_findings

CLASSES = contracts.BOUNDARY_OBJECTS


def full_check() -> Any:
    """Strict, full depth, every violation collected."""
    return contracts.checking(mode="strict", depth="full", collect="all")


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_valid_objects_pass_every_rule(cls: type, data: st.DataObject) -> None:
    """A valid object of any size, phase mix, backend, dtype and layout passes at full depth."""
    case: Case = data.draw(valid_cases(cls))
    with full_check():
        obj = case.build()
        assert contracts.validate(obj) == []
    with contracts.checking(mode="strict", depth="metadata", collect="first"):
        assert contracts.validate(obj) == []


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_validation_never_mutates_a_valid_input(cls: type, data: st.DataObject) -> None:
    """Building and re-validating leave every array as it was: same values, layout, version."""
    case: Case = data.draw(valid_cases(cls))
    kwargs = case.kwargs()
    before = snapshot(kwargs)
    with full_check():
        obj = cls(**kwargs)
        contracts.validate(obj)
    assert same(before, snapshot(kwargs))
    for name, value in kwargs.items():
        assert getattr(obj, name) is value, f"{name} was converted instead of kept"


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
@given(data=st.data())
def test_fast_check_agrees_with_the_explained_check(cls: type, data: st.DataObject) -> None:
    """The compiled metadata predicate says "all good" exactly when the walk finds nothing."""
    case: Case = data.draw(valid_cases(cls))
    with contracts.checking(mode="off"):
        obj = case.build()
    plan = cls.__sg_plan__
    findings, _ = metadata_findings(obj, plan.fields, plan.subject, first_only=False)
    assert plan.fast_check(obj) is True
    assert plan.compiled_fast_check().__globals__["general_check"](obj) is True
    assert findings == []


@given(case=mapping_cases())
def test_valid_mappings_build_dense_rows(case: Any) -> None:
    """from_mapping turns any valid mapping into rows that pass, leaving the mapping as it was."""
    before = snapshot({"ids": case.seq_ids, "drafts": case.drafts, "fill": case.placeholder})
    with full_check():
        drafts = case.build()
        assert contracts.validate(drafts) == []
    assert same(before, snapshot({"ids": case.seq_ids, "drafts": case.drafts,
                                  "fill": case.placeholder}))
    ids = np.asarray(case.seq_ids).tolist()
    assert drafts.seq_ids.tolist() == ids
    for row, seq_id in enumerate(ids):
        given_drafts = case.drafts.get(seq_id)
        expected = [] if given_drafts is None else np.asarray(given_drafts).tolist()
        assert drafts.num_drafts[row] == len(expected)
        assert drafts.draft_token_ids[row, : len(expected)].tolist() == expected


@pytest.mark.parametrize("backend", ["numpy", "torch"])
def test_snapshots_notice_an_in_place_write(backend: str) -> None:
    """The non-mutation checks can fail: one element written in place changes the snapshot."""
    array = np.arange(6).reshape(2, 3)
    value = torch.from_numpy(array) if backend == "torch" else array
    before = snapshot({"ids": value, "n": 3})
    assert same(before, snapshot({"ids": value, "n": 3}))
    value[1, 2] = -1
    assert not same(before, snapshot({"ids": value, "n": 3}))
