"""vLLM's Model Runner V2 (``vllm/v1/worker/gpu/``): its boundary objects and rules
(:mod:`~specguard.adapters.engines.vllm.mrv2.layout`, SG623-SG631), its view
(:class:`~specguard.adapters.engines.vllm.mrv2.view.Mrv2View`) and the wrappers
:mod:`~specguard.adapters.engines.vllm.install` puts on its runner
(:mod:`~specguard.adapters.engines.vllm.mrv2.install`)."""
