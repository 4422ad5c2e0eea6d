"""SGLang: the EAGLE/MTP workers' hand-overs, read by duck typing, their installers and
the plugin SGLang loads at start-up.

* :class:`~specguard.adapters.engines.sglang.view.SglangView` reads the v1 worker's
  (``EAGLEWorker``, 0.5.10): the ``ScheduleBatch`` before the forward, the
  ``EagleVerifyInput`` the draft chain becomes, the ``EagleVerifyOutput`` of the verify,
  and what the draft model embeds at draft prefill and draft extend;
* :class:`~specguard.adapters.engines.sglang.v2.view.SglangV2View` reads the overlap
  worker's (``EAGLEWorkerV2``, 0.5.23): the resolved batch at the worker's entry, the
  verify input, the padded verify output and the next draft input;
* :mod:`~specguard.adapters.engines.sglang.install` wraps a live ``EAGLEWorker``, and
  :mod:`~specguard.adapters.engines.sglang.v2.install` a live ``EAGLEWorkerV2``, which
  :mod:`~specguard.adapters.engines.sglang.v2.plugin` does from SGLang's plugin hook;
* the layout rules: SG640-SG647 (:mod:`~specguard.adapters.engines.sglang.layout`) and
  SG650-SG658 (:mod:`~specguard.adapters.engines.sglang.v2.layout`); SGLang's range is
  SG640-SG659.
"""

from specguard.adapters.engines._interface import Engine, register_engine
from specguard.adapters.engines.sglang import install
from specguard.adapters.engines.sglang.v2.view import SglangV2View as SglangV2View
from specguard.adapters.engines.sglang.view import SglangStep as SglangStep
from specguard.adapters.engines.sglang.view import SglangView as SglangView

ENGINE = register_engine(Engine(
    name="sglang", title="SGLang", codes=range(640, 660), views=(SglangView, SglangV2View),
    installer=install, corpus={"sglang": "SGLang"}, guide="SGLang"))

__all__ = ["ENGINE", "SglangStep", "SglangV2View", "SglangView", "install"]
