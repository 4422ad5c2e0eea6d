"""Record vLLM's own boundary traffic into the conformance corpus, from vLLM's source.

Runs vLLM's real ``Scheduler`` / ``AsyncScheduler`` (with its KV-cache manager and prefix
cache) on CPU, drives it with a model runner that does what ``GPUModelRunner`` and the
padded EAGLE/MTP drafter do at the boundary, and writes what crossed, step by step, to
``tests/conformance/corpus/vllm/<version>/<scenario>.json``. The corpus is data: no vLLM
code is copied into it, and CI only replays it (``tests/conformance``).

What is vLLM's own code, imported from the source tree you point at:

* ``Scheduler``, ``AsyncScheduler``, ``SchedulerOutput``, ``Request``, the KV-cache
  manager and block hashing, ``update_from_output`` and ``update_draft_token_ids``;
* for the P/D scenarios, the scheduler's KV-connector path (``KVConnectorFactory``,
  ``WAITING_FOR_REMOTE_KVS``, ``_update_waiting_for_remote_kv``, ``KVConnectorOutput``)
  around a connector built on vLLM's ``KVConnectorBase_V1``;
* ``GPUModelRunner._calc_spec_decode_metadata`` (called on a stand-in runner): which
  logits are sampled and where the drafts are read;
* ``CachedRequestState.get_token_id`` (the drafter's backup token),
  ``EagleProposer.prepare_next_token_ids_padded`` and ``prepare_inputs_padded`` (on a
  stand-in proposer). From 0.17.1 on these launch triton kernels: the script runs them in
  triton's interpreter on CPU (``TRITON_INTERPRET=1``, and ``CUDA_VISIBLE_DEVICES=""`` so
  that vLLM does not disable triton for want of a GPU driver).

What is simulated: the batch order (``InputBatch``: holes filled, then condensed), the
token buffer (drafts written after a request's tokens, async placeholders overwritten from
the previous step's drafts for requests in the previous batch, the clamp of ``-1`` before
embedding where the source tree's own ``_preprocess`` has it: 0.29.0 and 0.33.0 do, 0.17.1
and 0.24.0 have none), a toy target model and draft model (``target_next``/``draft_next``),
and the greedy rejection sampler's output layout (``-1`` padded, left-packed), and the
decode side's KV connector (``RemotePrefillConnector`` below: NixlConnector's scheduler
decisions for ``do_remote_prefill``, with each load received one step after it starts). The
configuration is a stand-in ``VllmConfig`` around vLLM's own sub-configs, because
``ModelConfig`` wants a Hugging Face model.

Getting vLLM's source without installing it (``pip download vllm==X --no-binary :all:``
fails on a CPU machine while building the sdist's metadata)::

    # 1. read the sdist's URL from pip (this run fails after printing it)
    VLLM_TARGET_DEVICE=empty pip download vllm==0.11.1 --no-deps --no-binary :all: \\
        --no-build-isolation -d SDIST -v 2>&1 | grep -o 'https://[^ ]*\\.tar\\.gz'
    # 2. fetch that one file, and unpack it (never pip install it)
    curl -L -o SDIST/vllm-0.11.1.tar.gz URL      # or: pip download URL --no-deps \\
                                                 #       --no-build-isolation -d SDIST
    tar xzf SDIST/vllm-0.11.1.tar.gz -C SRC      # gives SRC/vllm-0.11.1/vllm/...

An environment to run it in: a virtual environment with a CPU torch (the one of
``constraints/ci.txt``), specguard (``pip install -e .``), and the pure-Python packages
vLLM's scheduler imports: ``packaging regex pydantic cachetools psutil pyzmq msgspec
cloudpickle blake3 cbor2 pybase64 setproctitle safetensors requests huggingface_hub
transformers tokenizers aiohttp openai pillow openai_harmony sentencepiece protobuf tqdm
pyyaml prometheus_client py-cpuinfo uvloop fastapi partial-json-parser lark gguf diskcache
llguidance xgrammar numba einops``. Then, from the repository root::

    python tools/record_corpus/vllm.py SRC/vllm-0.11.1              # every scenario
    python tools/record_corpus/vllm.py SRC/vllm-0.33.0 --scenario dynamic-k --out DIR

Recorded with vLLM 0.11.0, 0.11.1, 0.17.1, 0.21.0, 0.24.0, 0.29.0 and 0.33.0; which scenarios a
release gets is read from its source tree (``Scenario.needs``). Each event is one
hand-over, with vLLM's own field names: ``schedule`` (the ``SchedulerOutput`` and the
runner's batch order), ``spec_decode_metadata`` (what ``_calc_spec_decode_metadata``
read), ``verified`` (the rejection sampler's rows), ``drafter_input`` (the arguments of
``propose``), ``drafted`` (the proposals) and ``kv_connector_output`` (the loads a step reports in
``finished_recving``). The scenarios (``SCENARIOS``): mixed-batch, chunked-prefill,
preempt-recompute, empty-schedule, async-scheduling, prefix-cache-hit(-async), mtp-k1,
mtp-k4, dynamic-k, discarded-chunk-next-token, async-budget-reentry,
pd-first-decode(-async) and pd-async-empty-steps. A scenario's ``expect`` lists the
violation that replaying its traffic must report first, when the traffic carries a vLLM
bug.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib
import inspect
import logging
import os
import re
import sys
import textwrap
import types
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

# This file is named vllm.py: keep its folder off the import path so that `import vllm`
# finds the source tree, not this script.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
os.environ.setdefault("VLLM_USE_V2_MODEL_RUNNER", "0")
# vLLM 0.33's spec-decode helpers are triton kernels: run them in triton's interpreter.
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 1000
"""Vocabulary of the toy models (ids in [0, VOCAB))."""


# -- vLLM from a source tree, and its scheduler on CPU ------------------------------------


def boot(src: str) -> Any:
    """Put ``src`` first on sys.path and import vllm from it; returns the vllm module."""
    src = os.path.abspath(src)
    if not os.path.isdir(os.path.join(src, "vllm")):
        raise SystemExit(f"{src} holds no vllm/ package: unpack the sdist there first")
    sys.path.insert(0, src)
    import vllm

    if not os.path.abspath(vllm.__file__).startswith(src):
        raise SystemExit(f"vllm was imported from {vllm.__file__}, not from {src}")
    logging.getLogger("vllm").setLevel(logging.ERROR)
    # No pinned host memory without an accelerator: vLLM's host-to-device helpers
    # stage through pinned buffers when this flag is set.
    for name in ("vllm.utils.torch_utils", "vllm.v1.worker.gpu_model_runner"):
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        if hasattr(module, "PIN_MEMORY"):
            module.PIN_MEMORY = False
    return vllm


def version_tuple(vllm: Any) -> tuple[int, ...]:
    """``vllm.__version__`` as numbers: (0, 11, 1)."""
    parts = vllm.__version__.split("+")[0].split(".")
    return tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in parts[:3])


class StandInConfig:
    """A ``VllmConfig`` stand-in: the real sub-configs, and VllmConfig's own properties
    evaluated on this object (ModelConfig wants a Hugging Face model to build)."""

    def __init__(self, real_cls: type, **parts: Any) -> None:
        object.__setattr__(self, "_real_cls", real_cls)
        for name, value in parts.items():
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._real_cls, name, None)
        if isinstance(attr, property):
            return attr.fget(self)  # type: ignore[misc]
        if name.endswith("_config"):
            return None
        raise AttributeError(name)


def bare(cls: type, **attrs: Any) -> Any:
    """An instance of a real config class with the given attributes, without __init__."""
    obj = cls.__new__(cls)
    for name, value in attrs.items():
        object.__setattr__(obj, name, value)
    return obj


# -- the decode side of prefill/decode disaggregation -----------------------------------

REMOTE_PREFILL = "SpecguardRemotePrefill"
"""The name the recording's KV connector is registered under in vLLM's factory."""


def register_remote_prefill_connector() -> None:
    """Define ``RemotePrefillConnector`` on vLLM's own ``KVConnectorBase_V1`` and register
    it with vLLM's ``KVConnectorFactory`` (the script's module is its module path).

    It plays the scheduler side of a P/D consumer as NixlConnector does: a request whose
    ``kv_transfer_params`` say ``do_remote_prefill`` has its whole prompt computed remotely
    (``get_num_new_matched_tokens`` returns ``(prompt - local hit, True)``, so the request
    waits in ``WAITING_FOR_REMOTE_KVS`` while the KV loads), and the loads it asks for ride
    on ``SchedulerOutput.kv_connector_metadata`` to the worker (``SimRunner``), which reports
    each one in ``finished_recving`` of a later step's ``kv_connector_output``.
    """
    from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory
    from vllm.distributed.kv_transfer.kv_connector.v1.base import (
        KVConnectorBase_V1,
        KVConnectorMetadata,
    )

    if "RemotePrefillConnector" in globals():  # registered by an earlier scenario
        return
    takes_cache_config = "kv_cache_config" in inspect.signature(
        KVConnectorBase_V1.__init__).parameters

    class RemoteLoads(KVConnectorMetadata):  # type: ignore[misc]
        """The scheduler → worker message: the requests whose KV to load now."""

        def __init__(self, req_ids: list[str]) -> None:
            self.req_ids = req_ids

    class RemotePrefillConnector(KVConnectorBase_V1):  # type: ignore[misc]
        """A P/D consumer that loads the prompt KV of ``do_remote_prefill`` requests."""

        def __init__(self, vllm_config: Any, role: Any, kv_cache_config: Any = None) -> None:
            if takes_cache_config:
                super().__init__(vllm_config, role, kv_cache_config)
            else:
                super().__init__(vllm_config, role)
            self._to_load: list[str] = []

        # scheduler side
        def get_num_new_matched_tokens(self, request: Any, num_computed_tokens: int,
                                       ) -> tuple[int, bool]:
            params = request.kv_transfer_params or {}
            remote = len(request.prompt_token_ids) - num_computed_tokens
            if params.get("do_remote_prefill") and remote > 0:
                return remote, True
            return 0, False

        def update_state_after_alloc(self, request: Any, blocks: Any,
                                     num_external_tokens: int) -> None:
            params = request.kv_transfer_params or {}
            if params.get("do_remote_prefill") and num_external_tokens > 0:
                self._to_load.append(request.request_id)
            # the prompt is remote once: a later admission (preemption) recomputes locally
            params["do_remote_prefill"] = False

        def build_connector_meta(self, scheduler_output: Any) -> Any:
            loads, self._to_load = self._to_load, []
            return RemoteLoads(loads)

        # worker side: the recording's runner plays it
        def start_load_kv(self, forward_context: Any, **kwargs: Any) -> None:
            pass

        def wait_for_layer_load(self, layer_name: str) -> None:
            pass

        def save_kv_layer(self, layer_name: str, kv_layer: Any, attn_metadata: Any,
                          **kwargs: Any) -> None:
            pass

        def wait_for_save(self) -> None:
            pass

    RemotePrefillConnector.__qualname__ = RemotePrefillConnector.__name__
    globals()["RemotePrefillConnector"] = RemotePrefillConnector
    KVConnectorFactory.register_connector(REMOTE_PREFILL, __name__, "RemotePrefillConnector")


def kv_consumer_config(scheduler_config: Any) -> Any:
    """A ``KVTransferConfig`` for the decode side, with ``RemotePrefillConnector``. Like
    ``VllmConfig.__post_init__`` for a connector without hybrid-KV-cache support, it turns
    the hybrid KV cache manager off."""
    from vllm.config import KVTransferConfig

    register_remote_prefill_connector()
    scheduler_config.disable_hybrid_kv_cache_manager = True
    return KVTransferConfig(kv_connector=REMOTE_PREFILL, kv_role="kv_consumer")


def make_scheduler(vllm: Any, *, mtp_k: int, method: str = "mtp", async_scheduling: bool,
                   max_num_batched_tokens: int, max_num_seqs: int = 8,
                   max_model_len: int = 512, block_size: int = 4, num_blocks: int = 64,
                   enable_prefix_caching: bool = True,
                   dynamic_k: list[tuple[int, int, int]] | None = None,
                   kv_consumer: bool = False) -> Any:
    """vLLM's Scheduler (or AsyncScheduler) for an MTP drafter of ``mtp_k`` tokens, with a
    KV cache of ``num_blocks`` blocks of ``block_size`` tokens; ``dynamic_k`` is 0.33's
    ``num_speculative_tokens_per_batch_size``; ``kv_consumer`` makes it the decode side of
    P/D disaggregation (``RemotePrefillConnector``)."""
    from vllm.config import (
        CacheConfig,
        ParallelConfig,
        SchedulerConfig,
        SpeculativeConfig,
        VllmConfig,
    )
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler
    from vllm.v1.core.sched.scheduler import Scheduler
    from vllm.v1.kv_cache_interface import FullAttentionSpec, KVCacheConfig, KVCacheGroupSpec
    from vllm.v1.structured_output import StructuredOutputManager

    v = version_tuple(vllm)
    sched_kwargs: dict[str, Any] = dict(
        max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
        enable_chunked_prefill=True, async_scheduling=async_scheduling)
    if v < (0, 11, 1):
        sched_kwargs["max_model_len"] = max_model_len
    if v >= (0, 12, 0):
        sched_kwargs["max_model_len"] = max_model_len
        sched_kwargs["is_encoder_decoder"] = False
    scheduler_config = SchedulerConfig(**sched_kwargs)
    cache_config = CacheConfig(block_size=block_size, enable_prefix_caching=enable_prefix_caching)
    cache_config.num_gpu_blocks = num_blocks
    parallel_config = ParallelConfig()
    model_config = types.SimpleNamespace(
        max_model_len=max_model_len, is_encoder_decoder=False, uses_mrope=False,
        runner_type="generate", is_diffusion=False, supports_multimodal_inputs=False,
        multimodal_config=None, return_sampling_mask=False, hf_config=None,
        is_multimodal_model=False, enable_return_routed_experts=False,
        skip_tokenizer_init=True, architecture="DeepseekV3ForCausalLM",
        is_hybrid=False, uses_xdrope_dim=0, uses_xdrope=False,
        get_vocab_size=lambda: VOCAB)
    spec_attrs: dict[str, Any] = dict(
        num_speculative_tokens=mtp_k, method=method, disable_padded_drafter_batch=False,
        num_speculative_tokens_per_batch_size=dynamic_k, disable_eagle_block_drop=False,
        disable_lookahead_block_hashes=False, draft_model_config=None,
        parallel_drafting=False, speculative_token_tree=None,
        num_prefill_lookahead_tokens=None)
    speculative_config = bare(SpeculativeConfig, **spec_attrs)
    parts: dict[str, Any] = dict(
        scheduler_config=scheduler_config, cache_config=cache_config,
        parallel_config=parallel_config, model_config=model_config,
        speculative_config=speculative_config)
    if kv_consumer:
        parts["kv_transfer_config"] = kv_consumer_config(scheduler_config)
    # Every other sub-config at VllmConfig's own default (the device config would probe
    # for an accelerator).
    for field in dataclasses.fields(VllmConfig):
        if field.name in parts or not field.name.endswith("_config"):
            continue
        factory = field.default_factory
        if factory is dataclasses.MISSING:
            factory = getattr(field.default, "default_factory", None)
        if factory is not None and factory is not dataclasses.MISSING:
            try:
                parts[field.name] = factory()
            except Exception as error:  # a sub-config this version cannot build on CPU
                print(f"note: default {field.name} failed: {error}", file=sys.stderr)
    vllm_config = StandInConfig(VllmConfig, **parts)
    spec = FullAttentionSpec(block_size=block_size, num_kv_heads=1, head_size=1,
                             dtype=torch.float32) if v >= (0, 11, 1) else \
        FullAttentionSpec(block_size, 1, 1, torch.float32, False)
    kv_cache_config = KVCacheConfig(num_blocks=num_blocks, kv_cache_tensors=[],
                                    kv_cache_groups=[KVCacheGroupSpec(["layer"], spec)])
    cls = AsyncScheduler if async_scheduling else Scheduler
    kwargs: dict[str, Any] = dict(vllm_config=vllm_config, kv_cache_config=kv_cache_config,
                                  log_stats=False,
                                  structured_output_manager=StructuredOutputManager(vllm_config))
    if v >= (0, 11, 1):
        kwargs["block_size"] = block_size
    if v >= (0, 12, 0):
        try:
            from vllm.v1.kv_cache_interface import register_all_kvcache_specs  # type: ignore
            register_all_kvcache_specs(vllm_config)
        except ImportError:
            pass
    scheduler = cls(**kwargs)
    if hasattr(scheduler, "use_v2_model_runner"):
        scheduler.use_v2_model_runner = False
    return scheduler


# -- the model runner ------------------------------------------------------------------


def target_next(token: int, position: int) -> int:
    """The toy target model: the token after ``token`` at ``position``."""
    return (token * 7 + position * 13 + 5) % VOCAB


def draft_next(token: int, position: int) -> int:
    """The toy draft model: the target's choice, wrong at every 5th position."""
    guess = target_next(token, position)
    return (guess + 1) % VOCAB if position % 5 == 0 else guess


class Buffer:
    """vLLM's CpuGpuBuffer: ``.np``, ``.cpu``, ``.gpu`` views of one CPU tensor."""

    def __init__(self, n: int, dtype: torch.dtype) -> None:
        self.cpu = torch.zeros(n, dtype=dtype)
        self.gpu = self.cpu
        self.np = self.cpu.numpy()

    def copy_to_gpu(self, n: int | None = None) -> torch.Tensor:
        return self.gpu


@dataclasses.dataclass
class ReqState:
    """What the runner keeps per request (CachedRequestState's token fields)."""

    req_id: str
    prompt_token_ids: list[int]
    output_token_ids: list[int]
    num_computed_tokens: int

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    def context(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids


class SimRunner:
    """Executes SchedulerOutputs like vLLM's GPUModelRunner (padded EAGLE/MTP drafter)."""

    def __init__(self, vllm: Any, version: tuple[int, int, int], *, mtp_k: int,
                 async_scheduling: bool, record: Any) -> None:
        self.vllm = vllm
        self.version = version
        self.mtp_k = mtp_k
        self.async_scheduling = async_scheduling
        self.record = record
        self.requests: dict[str, ReqState] = {}
        self.slots: list[str | None] = []
        self.prev_req_ids: list[str] = []
        self.prev_drafts: torch.Tensor | None = None
        self.prev_discarded: set[str] = set()
        self.kv_loading: list[str] = []
        from vllm.v1.worker.gpu_input_batch import CachedRequestState
        from vllm.v1.worker.gpu_model_runner import GPUModelRunner

        self._get_token_id = CachedRequestState.get_token_id
        self._runner_cls = GPUModelRunner
        self.clamps_placeholders = clamps_placeholders(GPUModelRunner)
        try:
            from vllm.v1.attention.backend import CommonAttentionMetadata  # 0.33
        except ImportError:
            from vllm.v1.attention.backends.utils import CommonAttentionMetadata
        self._cam_cls = CommonAttentionMetadata
        from vllm.v1.spec_decode.eagle import EagleProposer

        self._proposer_cls = EagleProposer

    # -- batch order: InputBatch.add_request / remove_request / condense -----------------
    def _remove(self, req_id: str) -> None:
        if req_id in self.slots:
            self.slots[self.slots.index(req_id)] = None

    def _add(self, req_id: str) -> None:
        if req_id in self.slots:
            return
        if None in self.slots:
            self.slots[self.slots.index(None)] = req_id
        else:
            self.slots.append(req_id)

    def _condense(self) -> None:
        while None in self.slots:
            hole = self.slots.index(None)
            last = len(self.slots) - 1
            while last > hole and self.slots[last] is None:
                self.slots.pop()
                last -= 1
            if last <= hole:
                del self.slots[hole:]
                break
            self.slots[hole] = self.slots.pop()

    def update_states(self, so: Any) -> list[str]:
        """GPUModelRunner._update_states: the batch order the runner uses this step."""
        for req_id in so.finished_req_ids:
            self.requests.pop(req_id, None)
            self._remove(req_id)
        scheduled = set(so.num_scheduled_tokens)
        for req_id in [r for r in self.slots if r is not None and r not in scheduled]:
            self._remove(req_id)
        for new in so.scheduled_new_reqs:
            self.requests[new.req_id] = ReqState(
                new.req_id, list(new.prompt_token_ids), [], new.num_computed_tokens)
            self._add(new.req_id)
        cached = so.scheduled_cached_reqs
        for i, req_id in enumerate(cached.req_ids):
            state = self.requests[req_id]
            computed = cached.num_computed_tokens[i]
            resumed = _resumed(cached, i, req_id)
            if resumed or not self.async_scheduling:
                state.num_computed_tokens = computed
            self._add(req_id)
        self._condense()
        return [r for r in self.slots if r is not None]

    # -- one step -------------------------------------------------------------------------
    def execute(self, so: Any) -> tuple[Any, Any]:
        """Run one SchedulerOutput; returns (ModelRunnerOutput, DraftTokenIds or None)."""
        from vllm.v1.outputs import DraftTokenIds

        order = self.update_states(so)
        self.record("schedule", _schedule_fields(so, order))
        received = self._kv_loads(so)
        if so.total_num_scheduled_tokens == 0:
            # GPUModelRunner.kv_connector_no_forward: no forward, the connector's output
            return self._with_kv(_runner_output(self.vllm, self.version, [], []), received), None
        spec = so.scheduled_spec_decode_tokens
        counts = np.array([so.num_scheduled_tokens[r] for r in order], dtype=np.int32)
        tokens: list[int] = []
        positions: list[int] = []
        for row, req_id in enumerate(order):
            state = self.requests[req_id]
            drafts = list(spec.get(req_id, ()))
            if self.async_scheduling and drafts and req_id in self.prev_req_ids \
                    and req_id not in self.prev_discarded and self.prev_drafts is not None:
                prev = self.prev_req_ids.index(req_id)
                filled = self.prev_drafts[prev].tolist()
                drafts = [filled[j] if d == -1 and j < len(filled) else d
                          for j, d in enumerate(drafts)]
            start = state.num_computed_tokens
            n = int(counts[row])
            real = n - len(drafts)
            context = state.context()
            assert start + real <= len(context), (req_id, start, real, len(context))
            tokens += context[start:start + real] + drafts
            positions += list(range(start, start + n))
        input_ids = torch.tensor(tokens, dtype=torch.int32)
        positions_t = torch.tensor(positions, dtype=torch.int64)
        cu = np.cumsum(counts)
        query_start_loc = torch.zeros(len(order) + 1, dtype=torch.int32)
        query_start_loc[1:] = torch.from_numpy(cu.astype(np.int32))
        num_drafts = np.array([len(spec.get(r, ())) for r in order], dtype=np.int32)
        metadata = None
        if spec:
            # _prepare_inputs gathers the drafts before _preprocess clamps the buffer: a
            # placeholder nobody filled reaches the rejection sampler as -1 (rejected)
            metadata = self._spec_metadata(num_drafts, cu.astype(np.int32), input_ids)
            logits_indices = metadata.logits_indices
            self.record("spec_decode_metadata", {
                "draft_token_ids": metadata.draft_token_ids.clone(),
                "num_draft_tokens": [int(x) for x in metadata.num_draft_tokens],
                "logits_indices": logits_indices.clone()})
        else:
            logits_indices = query_start_loc[1:].long() - 1
        if self.clamps_placeholders:
            # GPUModelRunner._preprocess (0.33): placeholders are clamped before the
            # target embeds the ids; the drafter reads the same clamped buffer.
            input_ids = input_ids.clamp(min=0)
        predictions = [target_next(int(input_ids[i]), int(positions_t[i]))
                       for i in logits_indices.tolist()]
        sampled = _rejection_rows(predictions, num_drafts, metadata)
        self.record("verified", {"sampled_token_ids": sampled.clone()})
        seq_lens = np.array([self.requests[r].num_computed_tokens for r in order]) + counts
        num_tokens = np.array([self.requests[r].num_tokens for r in order])
        discard = seq_lens < num_tokens
        drafts_out = self._propose(order, so, sampled, discard, metadata, input_ids,
                                   positions_t, query_start_loc, seq_lens, counts)
        valid_rows: list[list[int]] = []
        for row, req_id in enumerate(order):
            state = self.requests[req_id]
            n = int(counts[row])
            if discard[row]:
                state.num_computed_tokens += n
                valid_rows.append([])
                continue
            valid = [int(t) for t in sampled[row].tolist() if t != -1]
            rejected = int(num_drafts[row]) + 1 - len(valid) if num_drafts[row] else 0
            state.num_computed_tokens += n - rejected
            state.output_token_ids += valid
            valid_rows.append(valid)
        self.prev_req_ids = list(order)
        self.prev_discarded = {r for r, d in zip(order, discard, strict=True) if d}
        self.prev_drafts = drafts_out
        output = self._with_kv(_runner_output(self.vllm, self.version, order, valid_rows),
                               received)
        draft_ids = None
        if drafts_out is not None:
            draft_ids = DraftTokenIds(list(order), drafts_out.tolist())
        return output, draft_ids

    def _kv_loads(self, so: Any) -> set[str]:
        """The worker side of ``RemotePrefillConnector``: a load that a step's
        ``kv_connector_metadata`` asked for is received by the next step."""
        received = set(self.kv_loading)
        self.kv_loading = list(getattr(so.kv_connector_metadata, "req_ids", ())) \
            if hasattr(so, "kv_connector_metadata") else []
        return received

    def _with_kv(self, output: Any, received: set[str]) -> Any:
        """The step's ModelRunnerOutput with the loads it reports in ``finished_recving``."""
        if received:
            from vllm.v1.outputs import KVConnectorOutput

            output.kv_connector_output = KVConnectorOutput(finished_recving=set(received))
            self.record("kv_connector_output", {"finished_recving": sorted(received)})
        return output

    def _spec_metadata(self, num_drafts: np.ndarray, cu: np.ndarray,
                       input_ids: torch.Tensor) -> Any:
        """vLLM's own GPUModelRunner._calc_spec_decode_metadata on a stand-in runner."""
        stand_in = types.SimpleNamespace(
            device=torch.device("cpu"), arange_np=np.arange(10000, dtype=np.int64),
            _arange_scratch=np.empty(10000, dtype=np.int64),
            input_ids=types.SimpleNamespace(gpu=input_ids))
        stand_in._get_cumsum_and_arange = types.MethodType(
            self._runner_cls._get_cumsum_and_arange, stand_in)
        return self._runner_cls._calc_spec_decode_metadata(stand_in, num_drafts, cu)

    def _cam(self, query_start_loc: torch.Tensor, seq_lens: np.ndarray,
             num_tokens: int) -> Any:
        n = query_start_loc.shape[0] - 1
        seq = torch.from_numpy(seq_lens.astype(np.int32))
        candidates = dict(
            query_start_loc=query_start_loc, query_start_loc_cpu=query_start_loc.clone(),
            seq_lens=seq, seq_lens_cpu=seq.clone(), seq_lens_cpu_upper_bound=seq.clone(),
            num_computed_tokens_cpu=seq - (query_start_loc[1:] - query_start_loc[:-1]),
            num_reqs=n, num_actual_tokens=num_tokens,
            max_query_len=int((query_start_loc[1:] - query_start_loc[:-1]).max()),
            max_seq_len=int(seq.max()), block_table_tensor=torch.zeros((n, 8), dtype=torch.int32),
            slot_mapping=torch.arange(num_tokens, dtype=torch.int64), causal=True)
        names = {f.name for f in dataclasses.fields(self._cam_cls)}
        return self._cam_cls(**{k: v for k, v in candidates.items() if k in names})

    def _propose(self, order: list[str], so: Any, sampled: torch.Tensor, discard: np.ndarray,
                 metadata: Any, input_ids: torch.Tensor, positions: torch.Tensor,
                 query_start_loc: torch.Tensor, seq_lens: np.ndarray,
                 counts: np.ndarray) -> torch.Tensor | None:
        """GPUModelRunner.propose_draft_token_ids for EAGLE/MTP, padded drafter batch."""
        if self.version >= (0, 12, 0) and getattr(so, "skip_drafts", False):
            return None
        num_reqs = len(order)
        total = int(counts.sum())
        cam = self._cam(query_start_loc, seq_lens, total)
        batch = types.SimpleNamespace(
            num_reqs=num_reqs, req_ids=list(order), vocab_size=VOCAB,
            num_tokens_no_spec=np.array([self.requests[r].num_tokens for r in order]))
        requests = {r: self._state_view(r) for r in order}
        proposer = types.SimpleNamespace(
            backup_next_token_ids=Buffer(max(num_reqs, 1), torch.int32),
            arange=torch.arange(10000, dtype=torch.int32))
        # the arguments as the source tree's own signature names them: 0.11.x takes the
        # discarded rows' indices and their count, later trees a mask; 0.17.1 still takes
        # the attention metadata first, 0.24.0 no longer does
        prepare_next = self._proposer_cls.prepare_next_token_ids_padded
        wanted = _parameters(prepare_next)
        args: list[Any] = [cam] if "common_attn_metadata" in wanted else []
        args += [sampled, requests, batch]
        if "discard_request_indices" in wanted:
            indices = torch.tensor(np.flatnonzero(discard), dtype=torch.int64)
            args += [indices, int(indices.shape[0])]
        else:
            args.append(torch.from_numpy(discard))
        next_ids, valid_count = prepare_next(proposer, *args)
        if metadata is None:
            last = None
            target_ids, target_pos = input_ids[:total], positions[:total]
        else:
            prepare_inputs = self._proposer_cls.prepare_inputs_padded
            returned = prepare_inputs(proposer, cam, metadata, valid_count)
            cam = returned[0]
            last = returned[_returned_at(prepare_inputs, "token_indices_to_sample")]
            target_ids, target_pos = input_ids[:total], positions[:total]
        k = int(getattr(so, "num_spec_tokens_to_schedule", 0) or self.mtp_k)
        fields: dict[str, Any] = {
            "target_token_ids": target_ids.clone(), "target_positions": target_pos.clone(),
            "next_token_ids": next_ids.clone().to(torch.int32),
            "last_token_indices": None if last is None else last.clone(),
            "query_start_loc": cam.query_start_loc.clone()}
        if "num_speculative_tokens" in _parameters(self._proposer_cls.propose):
            fields["num_speculative_tokens"] = k
        self.record("drafter_input", fields)
        sample_at = last if last is not None else cam.query_start_loc[1:] - 1
        drafts = torch.zeros((num_reqs, k), dtype=torch.int64)
        for row in range(num_reqs):
            token = int(next_ids[row])
            position = int(target_pos[int(sample_at[row])]) + 1
            for j in range(k):
                token = draft_next(token, position + j)
                drafts[row, j] = token
        self.record("drafted", {"draft_token_ids": drafts.clone()})
        return drafts

    def _state_view(self, req_id: str) -> Any:
        state = self.requests[req_id]
        view = types.SimpleNamespace(
            prompt_token_ids=state.prompt_token_ids, num_prompt_tokens=state.num_prompt_tokens,
            output_token_ids=state.output_token_ids)
        view.get_token_id = types.MethodType(self._get_token_id, view)
        return view


def _parameters(function: Callable[..., Any]) -> list[str]:
    """The parameter names of a method of the source tree, without ``self``."""
    return [name for name in inspect.signature(function).parameters if name != "self"]


def _returned_at(function: Callable[..., Any], name: str) -> int:
    """Where the tuple ``function`` returns holds the variable ``name``, read from its
    source (``prepare_inputs_padded`` returns ``token_indices_to_sample`` third in 0.11.x
    and second from 0.17.1 on)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and isinstance(node.value, ast.Tuple):
            names = [ast.unparse(item) for item in node.value.elts]
            if name in names:
                return names.index(name)
    raise SystemExit(f"{function.__qualname__} returns no {name}")


_CLAMP = re.compile(r"input_ids\.gpu\[[^\]]*\]\.clamp_\(min=0\)")


def clamps_placeholders(runner_cls: type) -> bool:
    """Whether vLLM's own ``GPUModelRunner._preprocess`` clamps the ``-1`` draft
    placeholders in ``input_ids`` to 0 before the target embeds them (0.29.0 and 0.33.0 do;
    0.11.x, 0.17.1 and 0.24.0 have no such statement). Read from the source tree, not
    from a version."""
    preprocess = getattr(runner_cls, "_preprocess", None)
    if preprocess is None:
        return False
    return _CLAMP.search(inspect.getsource(preprocess)) is not None


def _resumed(cached: Any, i: int, req_id: str) -> bool:
    flags = getattr(cached, "resumed_from_preemption", None)
    if flags is not None:
        return bool(flags[i])
    ids = getattr(cached, "resumed_req_ids", None)
    return ids is not None and req_id in ids


def _rejection_rows(predictions: list[int], num_drafts: np.ndarray, metadata: Any) -> torch.Tensor:
    """The rejection sampler's output in vLLM's layout (greedy): accepted drafts, then
    one recovered or bonus token, ``-1`` after; one column when nothing is verified."""
    rows = num_drafts.shape[0]
    width = int(num_drafts.max()) + 1 if metadata is not None else 1
    out = torch.full((rows, width), -1, dtype=torch.int32)
    drafts = metadata.draft_token_ids.tolist() if metadata is not None else []
    at = 0
    d_at = 0
    for row in range(rows):
        nd = int(num_drafts[row])
        targets = predictions[at:at + nd + 1]
        mine = drafts[d_at:d_at + nd]
        accepted = 0
        while accepted < nd and mine[accepted] == targets[accepted]:
            accepted += 1
        # the accepted drafts (equal to the target's choices), then the recovered token
        # at the first rejection or the bonus token after the last draft
        out[row, :accepted + 1] = torch.tensor(targets[:accepted + 1], dtype=torch.int32)
        at += nd + 1
        d_at += nd
    return out


def _schedule_fields(so: Any, order: list[str]) -> dict[str, Any]:
    cached = so.scheduled_cached_reqs
    fields: dict[str, Any] = {
        "req_ids": list(order),
        "num_scheduled_tokens": dict(so.num_scheduled_tokens),
        "total_num_scheduled_tokens": int(so.total_num_scheduled_tokens),
        "scheduled_spec_decode_tokens": {r: [int(t) for t in d] for r, d in
                                         so.scheduled_spec_decode_tokens.items()},
        "scheduled_new_reqs": [{"req_id": n.req_id,
                                "num_computed_tokens": int(n.num_computed_tokens)}
                               for n in so.scheduled_new_reqs],
        "scheduled_cached_reqs": {"req_ids": list(cached.req_ids),
                                  "num_computed_tokens": [int(x) for x in
                                                          cached.num_computed_tokens]},
        "finished_req_ids": sorted(so.finished_req_ids),
    }
    for name in ("num_spec_tokens_to_schedule", "skip_drafts"):
        if hasattr(so, name):
            value = getattr(so, name)
            fields[name] = value if isinstance(value, bool) else int(value)
    return fields


def _runner_output(vllm: Any, version: tuple[int, int, int], order: list[str],
                   rows: list[list[int]]) -> Any:
    from vllm.v1.outputs import ModelRunnerOutput

    if (0, 11, 1) <= version < (0, 12, 0):
        sampled: list[Any] = [np.array(r, dtype=np.int64) for r in rows]
    else:
        sampled = rows
    candidates = dict(req_ids=list(order), req_id_to_index={r: i for i, r in enumerate(order)},
                      sampled_token_ids=sampled, logprobs=None, prompt_logprobs_dict={},
                      pooler_output=[])
    names = {f.name for f in dataclasses.fields(ModelRunnerOutput)}
    return ModelRunnerOutput(**{k: v for k, v in candidates.items() if k in names})


# -- EngineCore's loop --------------------------------------------------------------------


class Engine:
    """``EngineCore.step`` (sync) or ``step_with_batch_queue`` (async, two batches)."""

    def __init__(self, vllm: Any, *, mtp_k: int, async_scheduling: bool = False,
                 **scheduler_options: Any) -> None:
        self.vllm = vllm
        self.version = version_tuple(vllm)
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.step_index = 0
        self.async_scheduling = async_scheduling
        self.block_size = scheduler_options.get("block_size", 4)
        self.scheduler = make_scheduler(vllm, mtp_k=mtp_k, async_scheduling=async_scheduling,
                                        **scheduler_options)
        self.runner = SimRunner(vllm, self.version, mtp_k=mtp_k,
                                async_scheduling=async_scheduling, record=self._record)
        self.queue: deque[tuple[Any, Any, Any]] = deque()
        self._hasher = _block_hasher(self.block_size)
        #: A buggy scheduler, for a scenario that records one: changes a sync step's output.
        self.mutate: Callable[[Engine, Any], None] | None = None

    def order_at(self, step: int) -> list[str]:
        """The runner's batch order at ``step``."""
        for name, fields in self.events:
            if name == "schedule" and fields["step"] == step:
                return list(fields["req_ids"])
        raise KeyError(step)

    def _record(self, event: str, fields: dict[str, Any]) -> None:
        self.events.append((event, {"step": self.step_index, **fields}))

    def add(self, req_id: str, prompt: list[int], max_tokens: int, *,
            remote_prefill: bool = False) -> None:
        """Queue a request; ``remote_prefill``: its prompt was prefilled on a remote
        instance (NixlConnector's ``do_remote_prefill`` in its ``kv_transfer_params``)."""
        from vllm.sampling_params import SamplingParams
        from vllm.v1.request import Request

        extra = {"kv_transfer_params": {"do_remote_prefill": True}} if remote_prefill else None
        params = SamplingParams(max_tokens=max_tokens, ignore_eos=True, extra_args=extra)
        if hasattr(params, "update_from_generation_config"):
            params.update_from_generation_config({}, 999)
        kwargs: dict[str, Any] = dict(request_id=req_id, prompt_token_ids=list(prompt),
                                      sampling_params=params, pooling_params=None,
                                      block_hasher=self._hasher)
        if "eos_token_id" in inspect.signature(Request.__init__).parameters:
            kwargs["eos_token_id"] = 999
        self.scheduler.add_request(Request(**kwargs))

    def step(self) -> bool:
        """One engine step; False when nothing is left."""
        if not self.scheduler.has_requests() and not self.queue:
            return False
        if not self.async_scheduling:
            so = self.scheduler.schedule()
            if self.mutate is not None:
                self.mutate(self, so)
            output, drafts = self.runner.execute(so)
            self.scheduler.update_from_output(so, output)
            if drafts is not None and so.total_num_scheduled_tokens > 0:
                self.scheduler.update_draft_token_ids(drafts)
            self.step_index += 1
            return True
        if self.scheduler.has_requests():
            so = self.scheduler.schedule()
            output, _ = self.runner.execute(so)
            self.queue.appendleft((so, output, None))
            self.step_index += 1
            if so.total_num_scheduled_tokens > 0 and len(self.queue) < 2:
                return True
        if self.queue:
            so, output, _ = self.queue.pop()
            self.scheduler.update_from_output(so, output)
        return True

    def run(self, steps: int) -> None:
        for _ in range(steps):
            if not self.step():
                break


def _block_hasher(block_size: int) -> Any:
    from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash

    try:
        from vllm.utils.hashing import sha256
    except ImportError:
        from vllm.utils import sha256  # type: ignore[no-redef]
    init_none_hash(sha256)
    return get_request_block_hasher(block_size, sha256)


# -- the scenarios ---------------------------------------------------------------------


def prompt(seed: int, n: int) -> list[int]:
    """A deterministic prompt of ``n`` token ids."""
    return [(seed * 37 + i * 11) % 997 + 1 for i in range(n)]


def async_schedules_drafts() -> bool:
    """Whether the source tree's ``AsyncScheduler`` schedules drafts: its
    ``_update_after_schedule`` gives a request ``-1`` placeholders in ``spec_token_ids``
    (0.11.1 on; 0.11.0's has a TODO there, and its EngineArgs refuse async scheduling with
    speculative decoding)."""
    from vllm.v1.core.sched.async_scheduler import AsyncScheduler

    return "spec_token_ids" in inspect.getsource(AsyncScheduler._update_after_schedule)


def has_dynamic_k() -> bool:
    """Whether the source tree's ``SpeculativeConfig`` has dynamic speculative decoding
    (``num_speculative_tokens_per_batch_size``: 0.24.0 has it, 0.17.1 not yet)."""
    from vllm.config import SpeculativeConfig

    names = {f.name for f in dataclasses.fields(SpeculativeConfig)} \
        if dataclasses.is_dataclass(SpeculativeConfig) else set()
    names |= set(getattr(SpeculativeConfig, "__annotations__", {}))
    return "num_speculative_tokens_per_batch_size" in names


#: The releases the corpus holds, oldest first.
RECORDED = ("0.11.0", "0.11.1", "0.17.1", "0.21.0", "0.24.0", "0.29.0", "0.33.0")


@dataclasses.dataclass
class Scenario:
    """One recording. Which releases get it is what ``needs`` asks of the source tree
    (every release when empty); ``versions`` lists the releases the corpus holds it for."""

    name: str
    description: str
    mtp_k: int
    drive: Callable[[Engine], None]
    versions: tuple[str, ...] = RECORDED
    async_scheduling: bool = False
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    expect: Callable[[Engine], list[dict[str, Any]]] | None = None
    needs: tuple[Callable[[], bool], ...] = ()

    def applies(self) -> bool:
        """Whether the booted source tree has what this scenario needs."""
        return all(need() for need in self.needs)


def _mixed(e: Engine) -> None:
    e.add("r0", prompt(0, 6), 8)
    e.run(2)
    e.add("r1", prompt(1, 9), 4)
    e.add("r2", prompt(2, 5), 4)
    e.run(6)


def _chunked(e: Engine) -> None:
    e.add("dec", prompt(3, 5), 10)
    e.run(2)
    e.add("long", prompt(4, 30), 3)
    e.run(7)


def _preempt(e: Engine) -> None:
    e.add("r0", prompt(5, 7), 12)
    e.add("r1", prompt(6, 7), 12)
    e.run(12)


def _empty(e: Engine) -> None:
    e.add("r0", prompt(7, 5), 3)
    e.run(6)


def _async(e: Engine) -> None:
    e.add("r0", prompt(8, 6), 7)
    e.run(2)
    e.add("r1", prompt(9, 10), 5)
    e.run(9)


def _prefix(e: Engine) -> None:
    shared = prompt(10, 9)
    e.add("first", shared, 6)
    e.run(3)
    e.add("partial", shared[:8] + prompt(11, 3), 2)
    e.add("full", list(shared), 2)
    e.run(6)


def _simple(e: Engine) -> None:
    e.add("r0", prompt(12, 5), 8)
    e.add("r1", prompt(13, 7), 8)
    e.run(6)


def _dynamic(e: Engine) -> None:
    e.add("r0", prompt(14, 5), 6)
    e.run(3)
    e.add("r1", prompt(15, 4), 5)
    e.add("r2", prompt(16, 4), 5)
    e.run(6)


def _seed(e: Engine) -> None:
    e.add("short", prompt(17, 4), 3)
    e.add("chunked", prompt(18, 20), 2)
    e.run(2)


def _seed_expect(e: Engine) -> list[dict[str, Any]]:
    """The drafter input whose next token is -1: the discarded row's position."""
    for name, fields in e.events:
        if name == "drafter_input":
            ids = fields["next_token_ids"].tolist()
            if -1 in ids:
                row = ids.index(-1)
                return [{"code": "SG301", "seq_id": e.order_at(fields["step"])[row],
                         "position": row}]
    return []


def _reentry(e: Engine) -> None:
    e.add("r0", prompt(19, 2), 4)
    e.add("r1", prompt(20, 2), 4)
    e.add("r2", prompt(21, 2), 6)
    e.run(12)


def _reentry_expect(e: Engine) -> list[dict[str, Any]]:
    """A request scheduled with -1 placeholders that was not in the previous batch."""
    previous: list[str] = []
    for name, fields in e.events:
        if name != "schedule":
            continue
        order = fields["req_ids"]
        for position, req_id in enumerate(order):
            drafts = fields["scheduled_spec_decode_tokens"].get(req_id, [])
            if -1 in drafts and req_id not in previous and not e.runner.clamps_placeholders:
                return [{"code": "SG603", "seq_id": req_id, "position": position}]
        previous = order
    return []


def _pd_first_decode(e: Engine) -> None:
    shared = prompt(22, 8)
    e.add("local", shared + prompt(23, 2), 8)
    e.add("remote", prompt(24, 9), 5, remote_prefill=True)
    e.run(4)
    # remote KV for a prompt whose first two blocks are in the local prefix cache, and a
    # local prefill admitted beside it
    e.add("remote-hit", shared + prompt(25, 3), 4, remote_prefill=True)
    e.add("new", prompt(26, 5), 3)
    e.run(8)


def _pd_empty_steps(e: Engine) -> None:
    for name, seed, n in (("a", 33, 7), ("b", 34, 8), ("c", 35, 4)):
        e.add(name, prompt(seed, n), 5, remote_prefill=True)
    e.run(9)


#: Releases whose async scheduling supports speculative decoding (0.11.0's does not: its
#: EngineArgs say so, and its AsyncScheduler never schedules drafts); a scenario that
#: needs it has ``needs=ASYNC``.
ASYNC_SPEC = RECORDED[1:]
ASYNC = (async_schedules_drafts,)

SCENARIOS = [
    Scenario("mixed-batch", "Decode requests and new prefills in one batch, mtp_k=3.", 3,
             _mixed, options=dict(max_num_batched_tokens=32)),
    Scenario("chunked-prefill", "A 30-token prompt chunked under a 16-token budget beside a "
             "decoding request; in 0.11.x the drafts proposed for a discarded chunk are "
             "scheduled with the final chunk.", 2, _chunked,
             options=dict(max_num_batched_tokens=16)),
    Scenario("preempt-recompute", "Two requests outgrow a 6-block KV cache: one is preempted "
             "and comes back as a prefill that recomputes its tokens.", 2, _preempt,
             options=dict(max_num_batched_tokens=32, num_blocks=7)),
    Scenario("empty-schedule", "A request finishes; the next schedule() carries only its "
             "finished id and no tokens.", 2, _empty,
             options=dict(max_num_batched_tokens=32)),
    Scenario("async-scheduling", "AsyncScheduler: -1 draft placeholders the runner fills "
             "from the previous step, scheduled one step ahead of the results.", 2, _async,
             async_scheduling=True, versions=ASYNC_SPEC, needs=ASYNC,
             options=dict(max_num_batched_tokens=16)),
    Scenario("prefix-cache-hit", "Prefix caching: a partial hit and a full hit (the whole "
             "prompt cached; 0.33 pads the new request with [-1] * k draft slots).", 2,
             _prefix, options=dict(max_num_batched_tokens=32)),
    Scenario("prefix-cache-hit-async", "The prefix-cache scenario under async scheduling.",
             2, _prefix, async_scheduling=True, versions=ASYNC_SPEC, needs=ASYNC,
             options=dict(max_num_batched_tokens=32)),
    Scenario("mtp-k1", "Two decoding requests, mtp_k=1.", 1, _simple,
             options=dict(max_num_batched_tokens=32)),
    Scenario("mtp-k4", "Two decoding requests, mtp_k=4.", 4, _simple,
             options=dict(max_num_batched_tokens=32)),
    Scenario("dynamic-k", "Dynamic speculative decoding: K_t=3 at batch size 1 and K_t=1 "
             "above, for mtp_k=3.", 3, _dynamic, versions=("0.24.0", "0.29.0", "0.33.0"),
             needs=(has_dynamic_k,),
             options=dict(max_num_batched_tokens=32, dynamic_k=[(1, 1, 3), (2, 8, 1)])),
    Scenario("discarded-chunk-next-token", "The vLLM seed (fixed by PR #26231): a batch "
             "without drafts and a discarded chunked-prefill row. 0.11.0's max_gen_len == 1 "
             "fast path counts the row's -1 as valid and hands it to the MTP head's "
             "embedding; later versions give the row its next prompt token.", 1, _seed,
             options=dict(max_num_batched_tokens=16), expect=_seed_expect),
    Scenario("async-budget-reentry", "Async scheduling with a 6-token budget: a running "
             "request left out of a step keeps its [-1] * k placeholders and re-enters the "
             "next batch with them. Before vLLM #37629/#46899 nothing overwrites them and "
             "0.11.1 embeds the -1; 0.33.0 clamps them before the embedding.", 2, _reentry,
             async_scheduling=True, versions=ASYNC_SPEC, needs=ASYNC,
             options=dict(max_num_batched_tokens=6, max_num_seqs=4),
             expect=_reentry_expect),
    Scenario("pd-first-decode", "Decode side of P/D disaggregation (a kv_consumer KV "
             "connector): a request whose prompt was prefilled remotely waits for its KV "
             "until a later step's finished_recving, then enters as a new request with "
             "num_computed_tokens = prompt - 1 and no local prefill: one token and no drafts "
             "in 0.11.x, [-1] * k draft slots in 0.33. It decodes with drafts from the next "
             "step on, beside local requests; a second one's prompt partly hits the local "
             "prefix cache.", 2, _pd_first_decode,
             options=dict(max_num_batched_tokens=32, kv_consumer=True)),
    Scenario("pd-first-decode-async", "The P/D decode-side scenario under async scheduling: "
             "a request is admitted one step later than in sync mode (the scheduler reads "
             "finished_recving after it has scheduled the next step), and its first decode "
             "with drafts carries -1 placeholders the runner fills from its first step's "
             "proposal.", 2, _pd_first_decode, async_scheduling=True, versions=ASYNC_SPEC,
             needs=ASYNC,
             options=dict(max_num_batched_tokens=32, kv_consumer=True)),
    Scenario("pd-async-empty-steps", "Async P/D decode side, mtp_k=3: three remote-prefilled "
             "requests. The steps that only wait for their KV schedule nothing and run no "
             "forward (kv_connector_no_forward); after the first decodes, a step where every "
             "request waits for its results schedules nothing either. The runner keeps its "
             "previous-step buffers across such a step, so a request back after it has its "
             "-1 placeholders filled from the last forward.", 3, _pd_empty_steps,
             async_scheduling=True, versions=ASYNC_SPEC, needs=ASYNC,
             options=dict(max_num_batched_tokens=32, kv_consumer=True)),
]




def record(vllm: Any, scenario: Scenario) -> Any:
    """Run one scenario; returns its corpus."""
    engine = Engine(vllm, mtp_k=scenario.mtp_k, async_scheduling=scenario.async_scheduling,
                    **scenario.options)
    return drive_and_collect(vllm, scenario, engine, "vllm", {"runner": "GPUModelRunner"})


def drive_and_collect(vllm: Any, scenario: Any, engine: Any, engine_name: str,
                      config: dict[str, Any]) -> Any:
    """Drive ``engine`` through ``scenario`` and return what crossed as a corpus, with
    the scenario's expected violations and ``config`` beside mtp_k, the vocabulary and
    the scheduling mode."""
    from specguard.adapters.corpus import Corpus, Event, Expected, encode_tree

    scenario.drive(engine)
    expect = scenario.expect(engine) if scenario.expect is not None else []
    config = {"mtp_k": scenario.mtp_k, "vocab_size": VOCAB,
              "async_scheduling": scenario.async_scheduling, **config}
    return Corpus(engine=engine_name, engine_version=release(vllm), scenario=scenario.name,
                  description=scenario.description, config=config,
                  events=[Event(event=name, fields=encode_tree(fields))
                          for name, fields in engine.events],
                  expect=[Expected(**item) for item in expect])


def release(vllm: Any) -> str:
    """The vLLM release the sources are, without a local suffix (``0.33.0``)."""
    return str(vllm.__version__).split("+")[0]


def record_cli(argv: list[str] | None, *, description: str, folder: str,
               scenarios: Callable[[str], list[Any]],
               record_one: Callable[[Any, Any], Any],
               boot_sources: Callable[[str], Any] | None = None) -> int:
    """The command line of a recorder: boot the sources (``boot_sources``, default
    :func:`boot`), then record ``scenarios(release)`` (or those named by ``--scenario``)
    into ``tests/conformance/corpus/<folder>/<release>/`` or ``--out``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("vllm_src", help="an unpacked vLLM source distribution")
    parser.add_argument("--out", help="output folder (default: the repository's corpus)")
    parser.add_argument("--scenario", action="append", help="record only these scenarios")
    args = parser.parse_args(argv)
    vllm = (boot_sources or boot)(args.vllm_src)
    from specguard.adapters.corpus import write_corpus

    version = release(vllm)
    out = Path(args.out or ROOT / "tests" / "conformance" / "corpus" / folder / version)
    out.mkdir(parents=True, exist_ok=True)
    for scenario in scenarios(version):
        if args.scenario and scenario.name not in args.scenario:
            continue
        corpus = record_one(vllm, scenario)
        path = out / f"{scenario.name}.json"
        write_corpus(path, corpus)
        verdict = ", ".join(e.code for e in corpus.expect) or "valid"
        print(f"{path}: {len(corpus.events)} events, {verdict}")
    return 0


def main(argv: list[str] | None = None) -> int:
    return record_cli(argv, description=__doc__.split("\n\n")[0], folder="vllm",
                      scenarios=lambda version: [s for s in SCENARIOS if s.applies()],
                      record_one=record)


if __name__ == "__main__":
    sys.exit(main())
