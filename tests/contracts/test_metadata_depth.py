"""Metadata depth reads shapes, dtypes and devices only: never an element's value.

Tensors on torch's "meta" device have shapes and dtypes but no storage: reading any
value from one raises. Validating them proves which checks touch values.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from contract_builders import CLEAN, kwargs

from specguard import contracts

torch = pytest.importorskip("torch")


def _on_meta(cls: type[contracts.BoundaryObject], **changes: object) -> dict[str, Any]:
    fields = kwargs(cls, "torch", "int64", **changes)
    return {name: value.to("meta") if isinstance(value, torch.Tensor) else value
            for name, value in fields.items()}


def test_meta_tensor_values_cannot_be_read():
    """The premise: any value read from a meta tensor raises."""
    with pytest.raises(NotImplementedError):
        torch.zeros(3, device="meta").tolist()


@pytest.mark.parametrize("cls", contracts.BOUNDARY_OBJECTS, ids=lambda c: c.__name__)
def test_metadata_validation_of_meta_tensors_passes(cls):
    """Every boundary object built from meta tensors validates at metadata depth."""
    obj = cls(**_on_meta(cls))
    assert contracts.validate(obj) == []


def test_shape_violation_on_meta_tensors_reads_no_value():
    """A short draft array on meta is SG101 naming no seq, since naming one reads values."""
    short = np.zeros((2, 2), dtype=np.int64)
    with pytest.raises(contracts.ContractViolation, match=re.escape(
        "SG101 one draft row per decode seq, in batch order [ScheduledBatch.draft_token_ids, "
        "scheduler → runner]: draft_token_ids is i64[2,2]@meta but num_decode=3"
    )) as caught:
        contracts.ScheduledBatch(**_on_meta(contracts.ScheduledBatch, draft_token_ids=short))
    assert caught.value.violations[0].seq_id is None


def test_full_depth_on_meta_tensors_checks_nothing_it_cannot_read():
    """Value rules have no values to read on meta: they pass without raising or queueing."""
    bad = CLEAN[contracts.DrafterInput]["input_ids"].copy()
    bad[3] = -1
    with contracts.checking(depth="full", collect="all"):
        contracts.DrafterInput(**_on_meta(contracts.DrafterInput, input_ids=bad))
    assert contracts.pending_deferred() == 0


def test_metadata_depth_ignores_bad_values_on_the_host():
    """The same bad value on the host passes at metadata depth and fails at full depth."""
    fields = kwargs(contracts.DrafterInput, positions=np.array([1, 2, 3, -1, 5, 6]))
    with contracts.checking(depth="metadata"):
        contracts.DrafterInput(**fields)
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation):
        contracts.DrafterInput(**fields)
