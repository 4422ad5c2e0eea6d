"""SGLang 0.5.23's overlap worker (``EAGLEWorkerV2``, spec v2): its boundary objects and
rules (:mod:`~specguard.adapters.engines.sglang.v2.layout`, SG650-SG658), its view
(:class:`~specguard.adapters.engines.sglang.v2.view.SglangV2View`), the installer for a
live worker (:mod:`~specguard.adapters.engines.sglang.v2.install`) and the
``sglang.srt.plugins`` entry point (:mod:`~specguard.adapters.engines.sglang.v2.plugin`)."""
