"""An engine object whose own attributes raise is refused by every installer, untouched.

Installers read the engine before they wrap anything; a property or a ``__getattr__``
that raises something other than AttributeError must come out as specguard's
``UnsupportedEngine`` naming the engine and what it raised, not as the object's error.
"""

from __future__ import annotations

from typing import Any

import pytest

from specguard.adapters import UnsupportedEngine
from specguard.adapters.engines.atom import install as atom_install
from specguard.adapters.engines.sglang import install as sglang_install
from specguard.adapters.engines.sglang.v2 import install as sglang_v2_install
from specguard.adapters.engines.vllm import install as vllm_install


class Hostile:
    """Every attribute read raises (a lazily initialised runner whose backend is gone)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"backend gone, no {name}")


INSTALLERS = [
    (atom_install.install, {}, "ATOM ModelRunner"),
    (sglang_install.install, {}, "SGLang EAGLEWorker"),
    (sglang_v2_install.install, {}, "SGLang EAGLEWorkerV2"),
    (vllm_install.install, {"version": "0.33.0"}, "vLLM GPUModelRunner"),
]


@pytest.mark.parametrize("install, options, engine", INSTALLERS,
                         ids=[engine for *_, engine in INSTALLERS])
def test_an_engine_whose_attributes_raise_is_refused_naming_it(install, options, engine):
    hostile = Hostile()
    with pytest.raises(UnsupportedEngine) as refused:
        install(hostile, **options)
    message = str(refused.value)
    assert message.startswith(f"cannot install on this {engine} (Hostile): reading it "
                              "raised RuntimeError: backend gone, no ")
    assert isinstance(refused.value.__cause__, RuntimeError)
    assert vars(hostile) == {}  # nothing was wrapped


def test_an_engine_that_reads_cleanly_is_not_refused_by_the_mapping():
    """The mapping leaves specguard's own refusals as they were (here: no methods)."""
    with pytest.raises(UnsupportedEngine) as refused:
        atom_install.install(object())
    assert "reading it raised" not in str(refused.value)
    assert "it has no method forward()" in str(refused.value)
