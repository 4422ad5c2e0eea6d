"""SGLang's views, by release: 0.5.23's overlap worker is
:class:`~specguard.adapters.engines.sglang.v2.view.SglangV2View`."""

from specguard.adapters.engines.sglang.v2.view import SglangStep as SglangStep
from specguard.adapters.engines.sglang.v2.view import SglangV2View as SglangV2View

__all__ = ["SglangStep", "SglangV2View"]
