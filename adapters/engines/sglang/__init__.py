"""SGLang: the v1 EAGLE/MTP worker's hand-overs (release 0.5.10), read by duck typing,
and their installer.

* :class:`~specguard.adapters.engines.sglang.view.SglangView` reads the ``ScheduleBatch``
  before the forward, the ``EagleVerifyInput`` the draft chain becomes, the
  ``EagleVerifyOutput`` of the verify, and what the draft model embeds at draft prefill
  and draft extend;
* :mod:`~specguard.adapters.engines.sglang.install` wraps a live ``EAGLEWorker``;
* the layout rules: SG640-SG647 (:mod:`~specguard.adapters.engines.sglang.layout`);
  SGLang's range is SG640-SG659.
"""

from specguard.adapters.engines._interface import Engine, register_engine
from specguard.adapters.engines.sglang import install
from specguard.adapters.engines.sglang.view import SglangStep as SglangStep
from specguard.adapters.engines.sglang.view import SglangView as SglangView

ENGINE = register_engine(Engine(
    name="sglang", title="SGLang", codes=range(640, 660), views=(SglangView,),
    installer=install, corpus={"sglang": "SGLang"}, guide="SGLang"))

__all__ = ["ENGINE", "SglangStep", "SglangView", "install"]
