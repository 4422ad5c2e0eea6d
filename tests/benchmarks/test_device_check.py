"""The accelerator check script: what can be shown without an accelerator."""

from __future__ import annotations

import pytest
import torch

from specguard import contracts
from specguard.adapters.examples import STORIES
from specguard.benchmarks import device_check


def test_every_boundary_class_is_rebuilt_as_tensors_that_validate() -> None:
    """objects_on gives one clean object per class, arrays as tensors, clean at full depth."""
    objects = device_check.objects_on("cpu")
    assert set(objects) == {cls.__name__ for cls in contracts.BOUNDARY_OBJECTS}
    with contracts.checking(depth="full", collect="all"):
        for obj in objects.values():
            arrays = [getattr(obj, spec.name) for spec in contracts.fields_of(type(obj))
                      if isinstance(spec, contracts.ArrayField)
                      and getattr(obj, spec.name) is not None]
            assert arrays and all(torch.is_tensor(array) for array in arrays)
            assert contracts.validate(obj) == []


def test_a_moved_object_keeps_its_defect() -> None:
    """Moving the vLLM -1 story to tensors keeps the violation SG301 names."""
    with contracts.checking(mode="off"):
        story = STORIES["vllm-26231"].build()
    moved = device_check.moved_to(story, "cpu")  # type: ignore[arg-type]
    with pytest.raises(contracts.ContractViolation) as caught:
        contracts.validate(moved)
    assert caught.value.codes == ("SG301",)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_without_cuda_the_check_says_so_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    """On a machine without CUDA the script exits 2 naming the missing device."""
    assert device_check.main(["--device", "cuda"]) == 2
    assert "'cuda' is not an available CUDA device" in capsys.readouterr().err
