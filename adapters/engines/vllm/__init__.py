"""vLLM: the V1 runner's hand-overs and Model Runner V2's, read by duck typing; their
installer and the plugin vLLM loads at start-up.

* :class:`~specguard.adapters.engines.vllm.view.VllmView` reads the V1
  ``GPUModelRunner``'s hand-overs (``SchedulerOutput``, the rejection sampler's rows, what
  the drafter embeds, its proposals);
* :class:`~specguard.adapters.engines.vllm.mrv2.view.Mrv2View` reads Model Runner V2's
  (``vllm/v1/worker/gpu/``);
* :mod:`~specguard.adapters.engines.vllm.install` wraps a live runner of either kind,
  and :mod:`~specguard.adapters.engines.vllm.plugin` does it from vLLM's plugin hook;
* the layout rules: SG621-SG622 (:mod:`~specguard.adapters.engines.vllm.layout`) and
  SG623-SG631 (:mod:`~specguard.adapters.engines.vllm.mrv2.layout`); vLLM's range is
  SG620-SG639.
"""

from specguard.adapters.engines._interface import Engine, register_engine
from specguard.adapters.engines.vllm import install
from specguard.adapters.engines.vllm.mrv2.view import Mrv2View as Mrv2View
from specguard.adapters.engines.vllm.view import VllmStep as VllmStep
from specguard.adapters.engines.vllm.view import VllmView as VllmView

ENGINE = register_engine(Engine(
    name="vllm", title="vLLM", codes=range(620, 640), views=(VllmView, Mrv2View),
    installer=install, corpus={"vllm": "vLLM", "vllm-mrv2": "vLLM Model Runner V2"},
    guide="vLLM"))

__all__ = ["ENGINE", "Mrv2View", "VllmStep", "VllmView", "install"]
