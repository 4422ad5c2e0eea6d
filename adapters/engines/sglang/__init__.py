"""SGLang: the overlap worker of 0.5.23 (``EAGLEWorkerV2``), its installer and the plugin
SGLang loads at start-up (:mod:`~specguard.adapters.engines.sglang.v2`). SGLang's range
is SG640-SG659; 0.5.23's layout rules are SG650-SG658."""

from specguard.adapters.engines._interface import Engine, register_engine
from specguard.adapters.engines.sglang.v2 import install
from specguard.adapters.engines.sglang.v2.view import SglangV2View as SglangV2View

ENGINE = register_engine(Engine(
    name="sglang", title="SGLang", codes=range(640, 660), views=(SglangV2View,),
    installer=install, corpus={"sglang": "SGLang"}, guide="SGLang"))

__all__ = ["ENGINE", "SglangV2View", "install"]
