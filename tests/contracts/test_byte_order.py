"""An integer array of the right width in the other byte order says so."""

from __future__ import annotations

import numpy as np
import pytest

from specguard import contracts
from specguard.contracts.examples import batch_fields


@pytest.mark.parametrize("field", ["seq_ids", "token_ids", "num_scheduled_tokens"])
def test_a_swapped_byte_order_is_named_as_the_problem(field):
    fields = batch_fields()
    native = fields[field].dtype
    fields[field] = fields[field].astype(native.newbyteorder("S"))
    swapped = fields[field].dtype.str
    with pytest.raises(contracts.ContractViolation) as raised:
        contracts.ScheduledBatch(**fields)
    (violation,) = raised.value.violations
    assert violation.code == "SG002"
    assert violation.reason.endswith(
        f": it is {native.name} in the other byte order ({swapped}); the checks and the "
        f"engines read native-endian arrays (use .astype('{native.name}'))")


def test_native_arrays_pass_and_a_wrong_width_is_not_called_a_byte_order():
    contracts.ScheduledBatch(**batch_fields())
    fields = batch_fields(seq_ids=np.arange(4, dtype=">i2"))
    with pytest.raises(contracts.ContractViolation) as raised:
        contracts.ScheduledBatch(**fields)
    assert "byte order" not in raised.value.violations[0].reason
