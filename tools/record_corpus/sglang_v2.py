"""Record SGLang 0.5.23's overlap-worker traffic (``EAGLEWorkerV2``, MTP as EAGLE with
``topk = 1``) into the conformance corpus, from SGLang's own wheel, on CPU.

0.5.23 is published as a wheel only; unzip it (never pip-install it)::

    pip download sglang==0.5.23 --no-deps -d SRC
    cd SRC && mkdir sglang-0.5.23 && cd sglang-0.5.23 && unzip -q ../sglang-0.5.23-*.whl

and run, from the repository root, in an environment with a CPU torch, specguard
(``pip install -e .``), ``triton`` and the pure-Python packages SGLang's scheduler imports
(``transformers openai tqdm pybase64 requests IPython pydantic aiohttp orjson pillow
starlette partial_json_parser dill sentencepiece compressed_tensors gguf msgspec einops
setproctitle apache-tvm-ffi uvicorn fastapi psutil pyzmq``)::

    python tools/record_corpus/sglang_v2.py SRC/sglang-0.5.23          # every scenario
    python tools/record_corpus/sglang_v2.py SRC/sglang-0.5.23 --scenario bs1 --out DIR

The same recorder records the earlier releases that have the overlap worker and no v1
``EAGLEWorker`` (from 0.5.15.post1 on; 0.5.16 and 0.5.19 are recorded), with
``--release``, which names the corpus folder and ``engine_version``; they import
``xgrammar`` and need the transformers they pin (``transformers==5.12.1
xgrammar==0.2.1``: a newer transformers already registers ``qwen3_asr``, which their
configs register again)::

    python tools/record_corpus/sglang_v2.py SRC/sglang-0.5.19 --release 0.5.19

The release differences the recorder bridges (each found by what the release has, not by
its number): ``Req.set_extend_range`` for ``extend_end``, ``kv_committed_len`` on the
request rather than its ``kv``, ``retract_decode(server_args)``, ``release_kv_cache``
without ``checkpoint``, no ``accept_index`` on ``GenerationBatchResult``, the tree
kernels' dispatch and ``TreeMaskMode`` in ``eagle_utils``, the parallel widths stamped at
group build (0.5.19) or read off the expert-parallel group (0.5.16), and the model
runner's ``ps`` / ``server_args``. 0.5.15.post1 is not recorded: it has neither
``eagle_worker_common`` (``build_eagle_verify_input``, ``fill_bonus_tokens_func``) nor
``sglang.kernels.ops.speculative.spec_tree``: its verify assembly is inside the worker.
    python tools/record_corpus/sglang_v2.py SRC/sglang-0.5.23 --signatures   # ast only

``--signatures`` reads (with :mod:`ast`, importing nothing) the parameters of the
methods the installer and the plugin wrap, and the worker attributes they read, into
``tests/adapters/data/sglang_0.5.23_signatures.json``.

What is SGLang's own code, imported from the unzipped wheel and run as it is:

* the scheduler's objects: ``Req`` and its finish checks (``update_finish_state``),
  ``ScheduleBatch.init_new`` / ``prepare_for_extend`` / ``prepare_for_decode`` (the spec-v2
  ``eagle_prepare_for_decode`` allocation) / ``filter_batch`` / ``merge_batch`` /
  ``retract_decode``, over ``ReqToTokenPool``, ``MHATokenToKVPool``,
  ``TokenToKVPoolAllocator`` and a disabled ``RadixCache`` on CPU, and
  ``release_kv_cache`` for finished requests;
* the overlap relay: ``FutureMap`` (``stash``, ``publish``, ``resolve_seq_lens_cpu``),
  ``RelayPayload.from_draft_input`` and ``resolve_forward_inputs``, in the order
  ``Scheduler.run_batch`` calls them, and ``EagleDraftInput`` (``filter_batch`` and
  ``merge_batch`` on its ``future_indices``);
* the draft worker's assembly of the verify rows: ``select_top_k_tokens``,
  ``organize_draft_results`` and ``build_eagle_verify_input`` (its tree kernel is the
  Triton one SGLang ships for XPU, run by Triton's interpreter, ``TRITON_INTERPRET=1``);
* the target verify's ``ForwardBatch``: ``eagle_prepare_for_verify`` and
  ``ForwardBatch.init_new`` (``TARGET_VERIFY``), over a ``KVIndexTranslator`` of the CPU
  pools (its KV slot kernel has no CPU path, so no ``out_cache_loc`` is recorded);
* the verify: ``eagle_sample``'s greedy path (``verify_tree_greedy_triton``, interpreted)
  and ``fill_bonus_tokens_func``, then ``new_seq_lens = seq_lens + accept_lens`` as
  ``run_eagle_verify`` computes it on a non-CUDA device.

What is a stand-in: the models (a toy target and draft model, ``_Models``, give the
logits and the draft proposals; their hidden states are zeros), the model runners (a
namespace with the fields ``ForwardBatch.init_new`` reads) and attention backends (never
run), the scheduling policy (every waiting request is admitted
whole; ``extend_end`` set as ``PrefillAdder`` sets it for a non-chunked prefill), the
result processing (``_Scheduler._commit``, which does what
``process_batch_result_prefill`` / ``process_batch_result_decode`` do for spec v2: the
accepted run appended, ``kv_committed_len`` advanced, the finish state updated) and the
streams (one CPU stream; the scheduler processes a step's result before it launches the
next). ``sgl_kernel`` and ``torchvision`` are mocked out (no CPU builds on the package
index); the global ``ServerArgs`` is built for ``model_path="dummy"``.

Each event is one hand-over the adapter reads, with SGLang's field names: ``forward``
(the ``ScheduleBatch`` at ``EAGLEWorkerV2.forward_batch_generation``, after
``resolve_forward_inputs``), ``verify_input`` (the ``EagleVerifyInput`` ``draft``
returns), ``verify_forward`` (the target verify's ``ForwardBatch``: its ``input_ids``,
``positions`` and ``seq_lens``), ``verified`` (``run_eagle_verify``'s
``GenerationBatchResult``) and ``drafted``
(its ``next_draft_input`` after the draft extend). A buggy scenario patches SGLang at run
time to re-create a real bug, and its ``expect`` lists the first violation replaying it
must report.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.abc
import importlib.machinery
import os
import sys
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "conformance" / "corpus" / "sglang"
RELEASE = "0.5.23"
VOCAB = 1000
HIDDEN = 8


@dataclass(frozen=True)
class Request:
    rid: str
    prompt: list[int]
    max_new_tokens: int
    arrives: int = 0
    """The step at which the request reaches the scheduler."""


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    requests: tuple[Request, ...]
    steps: int = 3
    num_steps: int = 8
    """Scheduler iterations to run."""
    retract_at: int | None = None
    """The iteration before whose decode the scheduler retracts one request."""
    bug: str | None = None
    expect: tuple[dict[str, Any], ...] = ()


def _prompt(seed: int, length: int) -> list[int]:
    return [(seed * 37 + 11 * i) % (VOCAB - 10) + 5 for i in range(length)]


SCENARIOS: dict[str, Scenario] = {s.name: s for s in (
    Scenario("mixed-prompt-lengths",
             "Four requests with prompts of 3 to 17 tokens prefilled together, then "
             "decoded with three-step MTP chains.",
             tuple(Request(f"r{i}", _prompt(i, n), 10) for i, n in enumerate((5, 17, 3, 9)))),
    Scenario("finish-at-prefill-and-in-verify",
             "r0 asks for one token and finishes at its prefill; r1 finishes inside a "
             "verify (its accepted run passes max_new_tokens); r2 goes on. Finished rows "
             "stay in the verify output until the next filter_batch.",
             (Request("r0", _prompt(1, 6), 1), Request("r1", _prompt(2, 4), 5),
              Request("r2", _prompt(3, 7), 14)), num_steps=7),
    Scenario("join-running-batch",
             "r2 arrives while r0 and r1 decode: it is prefilled alone, then merged into "
             "the running batch (ScheduleBatch.merge_batch, EagleDraftInput.merge_batch on "
             "future_indices).",
             (Request("r0", _prompt(4, 5), 16), Request("r1", _prompt(5, 8), 16),
              Request("r2", _prompt(6, 6), 8, arrives=2)), num_steps=8),
    Scenario("retract-and-reprefill",
             "The scheduler retracts a request (ScheduleBatch.retract_decode, which sorts "
             "the rows) and re-prefills it later from its prompt and the tokens it was "
             "emitted.",
             (Request("r0", _prompt(7, 5), 14), Request("r1", _prompt(8, 9), 14),
              Request("r2", _prompt(9, 4), 14)), num_steps=9, retract_at=3),
    Scenario("bs1", "One request decoding alone.",
             (Request("solo", _prompt(10, 6), 12),), num_steps=6),
    Scenario("bs9", "Nine requests decoding together.",
             tuple(Request(f"r{i}", _prompt(20 + i, 4 + i), 9) for i in range(9)),
             num_steps=5),
    Scenario("sg650-filter-truncates-relay-rows",
             "SGLang #8671 re-created: EagleDraftInput.filter_batch keeps the first "
             "len(new_indices) future_indices instead of the kept requests' rows, so once "
             "r0 has finished r1 reads r0's relay row (its bonus token and length) and r2 "
             "reads r1's. Expected: SG650 at r1.",
             (Request("r0", _prompt(11, 5), 3), Request("r1", _prompt(12, 6), 14),
              Request("r2", _prompt(13, 7), 14)), num_steps=6,
             bug="filter-truncates",
             expect=({"code": "SG650", "seq_id": "r1", "position": 0},)),
    Scenario("sg658-bonus-token-wrong-stride",
             "SGLang PR #26866 family re-created: fill_bonus_tokens_func reads each "
             "request's bonus token with the verify width num_draft_tokens + 1 as its "
             "stride, so every request after the first gets a token of another row. "
             "Expected: SG658 at r1.",
             (Request("r0", _prompt(14, 5), 12), Request("r1", _prompt(15, 6), 12)),
             num_steps=4, bug="bonus-stride",
             expect=({"code": "SG658", "seq_id": "r1", "position": 1},)),
    Scenario("sg651-pad-sentinel-in-prefill",
             "SGLang PR #27512 re-created: a multimodal pad sentinel (an id past the "
             "vocabulary) is left in a prompt, so it reaches the extend batch's input_ids "
             "that the target and the draft prefill embed. Expected: SG651 at r1.",
             (Request("r0", _prompt(16, 5), 6), Request("r1", [*_prompt(17, 4), VOCAB + 7], 6)),
             num_steps=3, bug="pad-sentinel",
             expect=({"code": "SG651", "seq_id": "r1", "position": 1},)),
)}


# --- SGLang on CPU ---------------------------------------------------------------------

class _Mocked(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``sgl_kernel`` and ``torchvision`` as mocks: their PyPI builds need CUDA."""

    PREFIXES = ("sgl_kernel", "torchvision")

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in self.PREFIXES:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = mock.MagicMock(name=spec.name)
        module.__path__ = []
        module.__spec__ = spec
        module.__name__ = spec.name
        return module  # type: ignore[return-value]

    def exec_module(self, module: ModuleType) -> None:
        return None


def _image_processor_without_torchvision() -> None:
    """The transformers that SGLang 0.5.19 pins (5.12.1) hands out ``AutoImageProcessor``
    as a placeholder that needs torchvision, whose own class imports without it; SGLang's
    configs call its ``register`` on import. Give the real class (a no-op where the
    installed transformers already does, as the one 0.5.23 pins)."""
    import transformers
    from transformers.utils.import_utils import DummyObject

    if isinstance(transformers.AutoImageProcessor, DummyObject):
        auto = importlib.import_module("transformers.models.auto.image_processing_auto")
        # transformers' lazy module may have replaced itself in sys.modules
        sys.modules["transformers"].AutoImageProcessor = auto.AutoImageProcessor  # type: ignore[attr-defined]


def _record_stream_on_cpu() -> None:
    """``Tensor.record_stream`` as a no-op on CPU tensors (one CPU stream: nothing to keep
    alive across streams). 0.5.19's ``FutureMap._resolve_spec_extras`` calls it on the
    relay indices unguarded, where torch refuses a CPU tensor; 0.5.23 skips it on CPU."""
    import torch

    original = torch.Tensor.record_stream
    if getattr(original, "_specguard_cpu_no_op", False):
        return

    def record_stream(self: Any, stream: Any) -> None:
        if self.device.type != "cpu":
            original(self, stream)

    record_stream._specguard_cpu_no_op = True  # type: ignore[attr-defined]
    torch.Tensor.record_stream = record_stream  # type: ignore[assignment]


def _one_rank_widths() -> None:
    """0.5.19 reads the derived parallel widths (``moe_ep_size``...) from what
    ``initialize_model_parallel`` stamps when it builds the process groups, which no CPU
    run builds: stamp what it stamps for one rank. Releases before it (0.5.16) read the
    live expert-parallel group: give the one-rank group's size and rank, as the v1
    recorder does. (0.5.23 computes them from the published ``ServerArgs``.)"""
    import sglang.srt.runtime_context as runtime_context

    parallel = runtime_context.get_parallel()
    if hasattr(parallel, "stamp_derived_widths"):
        parallel.stamp_derived_widths(**runtime_context.derive_parallel_widths(
            tp_size=1, attn_cp_size=1, attn_dp_size=1, moe_ep_size=1, moe_dp_size=1,
            dcp_size=1, dcp_enabled=False))
    elif not hasattr(runtime_context, "derive_parallel_widths"):
        parallel_state = importlib.import_module("sglang.srt.distributed.parallel_state")
        if getattr(parallel_state, "_MOE_EP", ()) is None:
            parallel_state._MOE_EP = SimpleNamespace(  # type: ignore[attr-defined]
                world_size=1, rank_in_group=0)


def _one_rank_state() -> Any:
    """0.5.19's ``ModelRunner.ps``: the ``ParallelState`` of one rank (``trivial``), which
    ``ForwardBatch.init_new`` reads; ``None`` in a release without it (0.5.23)."""
    try:
        wrapper = importlib.import_module("sglang.srt.distributed.parallel_state_wrapper")
    except ImportError:
        return None
    state = getattr(wrapper, "ParallelState", None)
    return state.trivial() if state is not None and hasattr(state, "trivial") else None


def bootstrap(source_dir: Path, *, steps: int) -> SimpleNamespace:
    """Put the unzipped wheel on sys.path, mock what has no CPU build, publish the global
    ``ServerArgs``, and import what the recorder runs."""
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
    if str(source_dir) not in sys.path:
        sys.path.insert(0, str(source_dir))
    import transformers.utils.import_utils as hf_imports

    with contextlib.suppress(Exception):  # cached False before the mock shadows it
        hf_imports.is_torchvision_available()
    _image_processor_without_torchvision()
    _record_stream_on_cpu()
    if not any(isinstance(f, _Mocked) for f in sys.meta_path):
        sys.meta_path.insert(0, _Mocked())

    from sglang.srt.runtime_context import reset_context
    from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler

    reset_context()
    set_global_server_args_for_scheduler(ServerArgs(
        model_path="dummy", device="cpu", speculative_algorithm="EAGLE",
        speculative_num_steps=steps, speculative_eagle_topk=1,
        speculative_num_draft_tokens=steps + 1, page_size=1))
    _one_rank_widths()

    import sglang.kernels.ops.speculative.spec_tree as spec_tree

    # The tree kernels SGLang ships for XPU are Triton; the interpreter runs them on CPU.
    spec_tree._is_xpu, spec_tree._is_cpu = True, False
    modules = {}
    for name in ("sglang.srt.managers.schedule_batch", "sglang.srt.managers.overlap_utils",
                 "sglang.srt.speculative.eagle_info", "sglang.srt.speculative.eagle_utils",
                 "sglang.srt.speculative.eagle_worker_common",
                 "sglang.srt.speculative.spec_utils", "sglang.srt.speculative.spec_info",
                 "sglang.srt.mem_cache.memory_pool", "sglang.srt.mem_cache.allocator",
                 "sglang.srt.mem_cache.radix_cache", "sglang.srt.mem_cache.cache_init_params",
                 "sglang.srt.mem_cache.common", "sglang.srt.sampling.sampling_params",
                 "sglang.srt.managers.utils", "sglang.srt.layers.logits_processor"):
        modules[name.rsplit(".", 1)[1]] = importlib.import_module(name)
    modules["spec_tree"] = spec_tree
    eagle_utils = modules["eagle_utils"]
    if not hasattr(spec_tree, "TreeMaskMode"):
        # 0.5.19: the tree kernels' dispatch (and TreeMaskMode) are in eagle_utils, whose
        # XPU branches call the same Triton kernels of spec_tree.
        eagle_utils._is_xpu, eagle_utils._is_cpu = True, False  # type: ignore[attr-defined]
    modules["TreeMaskMode"] = getattr(spec_tree, "TreeMaskMode", None) or \
        eagle_utils.TreeMaskMode
    return SimpleNamespace(**modules)


# --- stand-ins: the models --------------------------------------------------------------

class _Models:
    """A toy target model and a draft model that agrees with it most of the time."""

    @staticmethod
    def target(context: list[int]) -> int:
        tail = context[-3:]
        return (sum((i + 3) * t for i, t in enumerate(tail)) * 7 + len(context)) % (VOCAB - 2) + 1

    @classmethod
    def draft(cls, context: list[int]) -> int:
        guess = cls.target(context)
        return guess if (len(context) * 5 + context[-1]) % 7 not in (0, 3) else (guess + 1) % VOCAB


# --- the recorder -----------------------------------------------------------------------

def _extend_end(req: Any) -> int:
    """Where this round's extend ends: ``extend_range.end`` (0.5.19) or ``extend_end``."""
    extend_range = getattr(req, "extend_range", None)
    return int(extend_range.end if extend_range is not None else req.extend_end)

def _array(tensor: Any) -> Any:
    return tensor.detach().cpu().numpy() if tensor is not None else None


@dataclass
class _Scheduler:
    """Drives SGLang's scheduler-side objects step by step, as ``Scheduler`` does in its
    overlap event loop, around a stand-in worker that records the hand-overs."""

    sg: SimpleNamespace
    scenario: Scenario
    events: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        import torch

        sg, steps = self.sg, self.scenario.steps
        self.torch = torch
        self.steps, self.ndt = steps, steps + 1
        self.r2t = sg.memory_pool.ReqToTokenPool(size=16, max_context_len=256, device="cpu",
                                                 enable_memory_saver=False)
        kv = sg.memory_pool.MHATokenToKVPool(
            size=2048, page_size=1, dtype=torch.float16, head_num=1, head_dim=8,
            layer_num=1, device="cpu", enable_memory_saver=False)
        self.allocator = sg.allocator.TokenToKVPoolAllocator(
            size=2048, dtype=torch.float16, device="cpu", kvcache=kv, need_sort=False)
        self.cache = sg.radix_cache.RadixCache(sg.cache_init_params.CacheInitParams(
            req_to_token_pool=self.r2t, token_to_kv_pool_allocator=self.allocator,
            page_size=1, disable=True, is_eagle=True))
        self.model_config = SimpleNamespace(
            vocab_size=VOCAB, hidden_size=HIDDEN, dtype=torch.float16,
            is_encoder_decoder=False, is_multimodal=False, is_matryoshka=False,
            context_len=256, is_multimodal_gen=False, num_attention_layers=1,
            model_is_mrope=False, requires_mm_token_modalities=False)
        self.algo = sg.spec_info.SpeculativeAlgorithm.from_string("EAGLE")
        self.future_map = sg.overlap_utils.FutureMap(
            torch.device("cpu"), self.algo, self.r2t, needs_cpu_seq_lens=True)
        try:  # 0.5.19 on; before it ForwardBatch.init_new reads the pools directly
            translator = importlib.import_module(
                "sglang.srt.mem_cache.kv_index_translator").KVIndexTranslator(
                req_to_token=self.r2t.req_to_token,
                token_to_kv_pool_allocator=self.allocator, token_to_kv_pool=kv,
                page_size=1, device="cpu")
        except ModuleNotFoundError:
            translator = None
        from sglang.srt.server_args import get_global_server_args

        try:
            server_args = get_global_server_args()
        except RuntimeError:  # retired in 0.5.23 (read from the runtime context there)
            server_args = None
        # What the releases' ForwardBatch.init_new read of the target's model runner:
        # server_args (to 0.5.18), ps (0.5.19), kv_index_translator (0.5.19 on).
        self.target_worker = SimpleNamespace(model_runner=SimpleNamespace(
            attn_backend=SimpleNamespace(
                verify_mask=None, max_context_len=256,
                # the base AttentionBackend's: no preallocated verify buffers (to 0.5.18)
                get_verify_buffers_to_fill_after_draft=lambda: [None, None]),
            model_config=self.model_config, watermark_state=None, device="cpu",
            is_draft_worker=False, kv_index_translator=translator, lora_manager=None,
            spec_algorithm=self.algo, decode_cuda_graph_runner=None,
            ngram_embedding_manager=SimpleNamespace(enabled=False), ps=_one_rank_state(),
            server_args=server_args))
        self.running: Any = None
        self.waiting: list[Any] = []
        self.reqs: dict[str, Any] = {}

    # - requests -

    def _new_req(self, spec: Request) -> Any:
        params = self.sg.sampling_params.SamplingParams(max_new_tokens=spec.max_new_tokens,
                                                        temperature=0.0)
        params.normalize(None)
        req = self.sg.schedule_batch.Req(spec.rid, "", array("q", spec.prompt), params,
                                         vocab_size=VOCAB)
        self.reqs[spec.rid] = req
        return req

    def _admit(self, req: Any) -> None:
        req.init_next_round_input(self.cache)
        end = len(req.full_untruncated_fill_ids)  # PrefillAdder, no chunking
        if hasattr(req, "set_extend_range"):  # 0.5.19: an extend_range (start, end)
            req.set_extend_range(len(req.prefix_indices), end)
        else:
            req.extend_end = end

    # - the loop -

    def run(self) -> list[dict[str, Any]]:
        for iteration in range(self.scenario.num_steps):
            self.waiting += [self._new_req(r) for r in self.scenario.requests
                             if r.arrives == iteration]
            if self.waiting:
                self._prefill()
            elif self.running is not None and self.running.reqs:
                if self.scenario.retract_at == iteration:
                    self._retract()
                self._decode()
        return self.events

    def _prefill(self) -> None:
        sg = self.sg
        reqs, self.waiting = self.waiting, []
        for req in reqs:
            self._admit(req)
        batch = sg.schedule_batch.ScheduleBatch.init_new(
            reqs, self.r2t, self.allocator, self.cache, self.model_config, True, self.algo)
        batch.prepare_for_extend()
        result = self._run_batch(batch)
        self._commit_prefill(batch, result)
        batch.filter_batch()
        if not batch.reqs:
            return
        if self.running is None or not self.running.reqs:
            self.running = batch
        else:
            self.running.merge_batch(batch)

    def _decode(self) -> None:
        batch = self.running
        batch.prepare_for_decode()
        result = self._run_batch(batch)
        self._commit_decode(batch, result)
        batch.filter_batch()

    def _retract(self) -> None:
        import inspect

        retract = self.running.retract_decode
        if "server_args" in inspect.signature(retract).parameters:  # to 0.5.18
            from sglang.srt.server_args import get_global_server_args

            retracted, _ratio, _ = retract(get_global_server_args())
        else:
            retracted, _ratio, _ = retract()
        for req in retracted:
            self.waiting.append(req)

    def _run_batch(self, batch: Any) -> Any:
        """``Scheduler.run_batch``'s overlap path on one CPU stream."""
        from functools import partial

        fm = self.future_map
        fm.resolve_seq_lens_cpu(batch)
        self.sg.overlap_utils.resolve_forward_inputs(batch, fm)
        future_indices = batch.req_pool_indices
        saved = {name: getattr(batch, name) for name in (
            "input_ids", "seq_lens", "seq_lens_cpu", "seq_lens_sum", "out_cache_loc",
            "forward_mode", "spec_info")}
        result = self._forward(batch, on_publish=partial(fm.publish, future_indices))
        for name, value in saved.items():  # _forward_isolation restores what the worker set
            setattr(batch, name, value)
        fm.stash(future_indices, self.sg.overlap_utils.RelayPayload.from_draft_input(
            result.next_draft_input))
        batch.input_ids = None
        batch.spec_info = result.next_draft_input
        batch.spec_info.future_indices = future_indices
        return result

    # - the worker (a stand-in around SGLang's own pieces) -

    def _contexts(self, batch: Any) -> list[list[int]]:
        return [list(r.origin_input_ids) + list(r.output_ids) for r in batch.reqs]

    def _record(self, event: str, batch: Any, **fields: Any) -> None:
        self.events.append({"event": event, "fields": {
            "rids": [r.rid for r in batch.reqs], **fields}})

    def _forward(self, batch: Any, on_publish: Callable[[Any], None]) -> Any:
        mode = batch.forward_mode
        spec = batch.spec_info
        entry: dict[str, Any] = {
            "forward_mode": mode.name, "seq_lens": _array(batch.seq_lens),
            "seq_lens_cpu": _array(batch.seq_lens_cpu),
            "req_pool_indices": _array(batch.req_pool_indices)}
        if mode.is_extend():
            entry |= {"input_ids": _array(batch.input_ids),
                      "prefix_lens": list(batch.prefix_lens),
                      "extend_lens": list(batch.extend_lens)}
        else:
            entry |= {"future_indices": _array(spec.future_indices),
                      "bonus_tokens": _array(spec.bonus_tokens),
                      "topk_index": _array(spec.topk_index)}
        self._record("forward", batch, **entry)
        if mode.is_extend():
            return self._prefill_forward(batch, on_publish)
        verify_input = self._draft(batch)
        batch.spec_info = verify_input
        result = self._verify(batch, verify_input)
        on_publish(result.new_seq_lens)
        self._draft_extend(batch, result)
        return result

    def _prefill_forward(self, batch: Any, on_publish: Callable[[Any], None]) -> Any:
        torch, sg = self.torch, self.sg
        contexts = [list(r.full_untruncated_fill_ids[: _extend_end(r)]) for r in batch.reqs]
        next_ids = torch.tensor([_Models.target(c) for c in contexts], dtype=torch.int64)
        on_publish(batch.seq_lens)  # new_seq_lens: the prompt, before the sampled token
        first = torch.tensor([[_Models.draft([*c, int(t)])] for c, t in zip(
            contexts, next_ids.tolist(), strict=True)], dtype=torch.int64)
        draft_input = sg.eagle_info.EagleDraftInput(
            bonus_tokens=next_ids.to(torch.int32), topk_p=torch.ones(first.shape),
            topk_index=first, hidden_states=torch.zeros(len(contexts), HIDDEN))
        self._record("drafted", batch, bonus_tokens=_array(draft_input.bonus_tokens),
                     topk_index=_array(draft_input.topk_index))
        return sg.utils.GenerationBatchResult(
            logits_output=None, next_token_ids=next_ids, can_run_cuda_graph=False,
            next_draft_input=draft_input, new_seq_lens=batch.seq_lens)

    def _draft(self, batch: Any) -> Any:
        """``EagleDraftWorker.draft``: the draft model's steps are the stand-in; the
        top-k selection, the result organisation and the verify input are SGLang's."""
        torch, sg = self.torch, self.sg
        draft_input = batch.spec_info
        bs = len(batch.reqs)
        chains = [[int(b), int(d)] for b, d in zip(draft_input.bonus_tokens.tolist(),
                                                   draft_input.topk_index[:, 0].tolist(),
                                                   strict=True)]
        contexts = self._contexts(batch)
        topk_p, topk_index = draft_input.topk_p, draft_input.topk_index
        hidden, scores = draft_input.hidden_states, None
        score_list, token_list, parents_list = [], [], []
        for i in range(self.steps):
            _ids, hidden, scores, tree_info = sg.spec_utils.select_top_k_tokens(
                i, topk_p, topk_index, hidden, scores, 1)
            score_list.append(tree_info[0])
            token_list.append(tree_info[1])
            parents_list.append(tree_info[2])
            if i == self.steps - 1:
                break
            nxt = [_Models.draft(c[:-1] + chain) for c, chain in zip(contexts, chains,
                                                                      strict=True)]
            for chain, token in zip(chains, nxt, strict=True):
                chain.append(token)
            topk_index = torch.tensor(nxt, dtype=torch.int64)[:, None]
            topk_p = torch.ones((bs, 1))
        parent_list, top_scores_index, draft_tokens = sg.eagle_utils.organize_draft_results(
            score_list, token_list, parents_list, self.ndt)
        verify_input = sg.eagle_worker_common.build_eagle_verify_input(
            batch, draft_input, parent_list, top_scores_index, draft_tokens, None,
            target_worker=self.target_worker, topk=1, num_steps=self.steps,
            num_draft_tokens=self.ndt, tree_mask_mode=sg.TreeMaskMode.FULL_MASK,
            device="cpu")
        self._record("verify_input", batch, seq_lens=_array(batch.seq_lens),
                     spec_steps=verify_input.spec_steps, topk=verify_input.topk,
                     draft_token_num=verify_input.draft_token_num,
                     draft_token=_array(verify_input.draft_token),
                     positions=_array(verify_input.positions),
                     retrieve_index=_array(verify_input.retrieve_index),
                     retrieve_next_token=_array(verify_input.retrieve_next_token),
                     retrieve_next_sibling=_array(verify_input.retrieve_next_sibling))
        return verify_input

    def _verify(self, batch: Any, verify_input: Any) -> Any:
        """``run_eagle_verify`` without the target forward: the logits are the toy
        target's one-hot rows; sampling and the bonus tokens are SGLang's."""
        torch, sg = self.torch, self.sg
        bs, ndt = len(batch.reqs), self.ndt
        forward_batch, _graph = sg.eagle_utils.eagle_prepare_for_verify(
            verify_input, self.r2t, batch, self.target_worker)
        self._record("verify_forward", batch, forward_mode=forward_batch.forward_mode.name,
                     input_ids=_array(forward_batch.input_ids),
                     positions=_array(forward_batch.positions),
                     seq_lens=_array(forward_batch.seq_lens))
        rows = verify_input.draft_token.view(bs, ndt).tolist()
        logits = torch.full((bs * ndt, VOCAB), -1e4)
        for i, context in enumerate(self._contexts(batch)):
            for j in range(ndt):
                logits[i * ndt + j, _Models.target(context + rows[i][1: j + 1])] = 0.0
        output = sg.logits_processor.LogitsProcessorOutput(
            next_token_logits=logits, hidden_states=torch.zeros(bs * ndt, HIDDEN))
        predict, accept_lens, accept_index = sg.eagle_utils.eagle_sample(
            verify_input, batch, output, None)
        new_seq_lens = batch.seq_lens + accept_lens
        accept_tokens = predict[accept_index]
        bonus = torch.empty_like(accept_lens, dtype=torch.int32)
        sg.eagle_worker_common.fill_bonus_tokens_func(accept_tokens, accept_lens, bonus,
                                                      accept_index.shape[1], bs)
        # 0.5.19's GenerationBatchResult has no accept_index (run_eagle_verify keeps it)
        has_index = "accept_index" in {
            f.name for f in dataclasses.fields(sg.utils.GenerationBatchResult)}
        result = sg.utils.GenerationBatchResult(
            logits_output=output, next_token_ids=predict, can_run_cuda_graph=False,
            speculative_num_draft_tokens=ndt,
            next_draft_input=sg.eagle_info.EagleDraftInput(bonus_tokens=bonus),
            accept_lens=accept_lens, new_seq_lens=new_seq_lens,
            **({"accept_index": accept_index} if has_index else {}))
        self._record("verified", batch, seq_lens=_array(batch.seq_lens),
                     next_token_ids=_array(predict), accept_lens=_array(accept_lens),
                     accept_index=_array(accept_index), new_seq_lens=_array(new_seq_lens),
                     bonus_tokens=_array(bonus))
        return result

    def _draft_extend(self, batch: Any, result: Any) -> None:
        """``_draft_extend_for_decode``: the draft model's next proposal for each request
        after its accepted run (argmax, topk 1) is the stand-in."""
        torch = self.torch
        ndt = self.ndt
        predict = result.next_token_ids.tolist()
        nxt = []
        for i, (context, n) in enumerate(zip(self._contexts(batch), result.accept_lens.tolist(),
                                             strict=True)):
            nxt.append(_Models.draft(context + predict[i * ndt: i * ndt + n]))
        draft_input = result.next_draft_input
        draft_input.topk_index = torch.tensor(nxt, dtype=torch.int64)[:, None]
        draft_input.topk_p = torch.ones(draft_input.topk_index.shape)
        draft_input.hidden_states = torch.zeros(len(nxt), HIDDEN)
        self._record("drafted", batch, bonus_tokens=_array(draft_input.bonus_tokens),
                     topk_index=_array(draft_input.topk_index))

    # - result processing (stand-in for process_batch_result_*) -

    def _release(self, req: Any) -> None:
        """``release_kv_cache`` for a finished request, the tree keeping what it can key:
        ``checkpoint=True`` (0.5.23), ``is_insert=True`` (0.5.19, its default)."""
        import inspect

        release = self.sg.common.release_kv_cache
        if "checkpoint" in inspect.signature(release).parameters:
            release(req, self.cache, checkpoint=True)
        else:
            release(req, self.cache)

    def _commit_prefill(self, batch: Any, result: Any) -> None:
        for req, token in zip(batch.reqs, result.next_token_ids.tolist(), strict=True):
            req.output_ids.append(int(token))
            req.update_finish_state()
            if req.finished():
                self._release(req)

    def _commit_decode(self, batch: Any, result: Any) -> None:
        predict = result.next_token_ids.tolist()
        for i, (req, n) in enumerate(zip(batch.reqs, result.accept_lens.tolist(),
                                         strict=True)):
            if req.finished() or req.is_retracted:
                continue
            tokens = predict[i * self.ndt: i * self.ndt + n]
            # on the request's kv info (0.5.19 on), on the request itself before
            owner = req.kv if hasattr(req.kv, "kv_committed_len") else req
            owner.kv_committed_len += len(tokens)
            req.output_ids.extend(tokens)
            req.update_finish_state(len(tokens))
            if req.finished():
                self._release(req)


# --- the bugs, re-created at run time ---------------------------------------------------

@contextlib.contextmanager
def _bug(sg: SimpleNamespace, name: str | None) -> Iterator[None]:
    if name is None:
        yield
        return
    patches: list[Any] = []
    if name == "filter-truncates":
        original = sg.eagle_info.EagleDraftInput.filter_batch

        def filter_batch(self: Any, new_indices: Any, *args: Any, **kwargs: Any) -> None:
            # (to 0.5.18 filter_batch also takes has_been_filtered: passed on as given)
            if self.future_indices is not None:  # the pre-#9252 truncation
                self.future_indices = self.future_indices[: len(new_indices)]
                return
            original(self, new_indices, *args, **kwargs)

        patches.append(mock.patch.object(sg.eagle_info.EagleDraftInput, "filter_batch",
                                         filter_batch))
    elif name == "bonus-stride":
        original_fill = sg.eagle_worker_common.fill_bonus_tokens_func

        def fill(accept_tokens: Any, accept_lens: Any, out: Any, stride: int, bs: int) -> Any:
            flat = accept_tokens.reshape(-1)
            for i in range(bs):  # stride num_draft_tokens + 1: off by one row per request
                at = min(i * (stride + 1) + int(accept_lens[i]) - 1, flat.numel() - 1)
                out[i] = flat[at]
            return out

        del original_fill
        patches.append(mock.patch.object(sg.eagle_worker_common, "fill_bonus_tokens_func",
                                         fill))
    elif name != "pad-sentinel":  # the sentinel is in the scenario's prompt
        raise ValueError(f"unknown bug {name!r}")
    with contextlib.ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


# --- the wrapped methods' signatures, read with ast ------------------------------------

SIGNATURES = ROOT / "tests" / "adapters" / "data" / f"sglang_{RELEASE}_signatures.json"
_WRAPPED = {
    "sglang/srt/speculative/eagle_worker_v2.py": {
        "EAGLEWorkerV2": ("__init__", "forward_batch_generation", "verify"),
        "EagleDraftWorker": ("draft",)},
    "sglang/srt/speculative/base_spec_worker.py": {
        "BaseSpecWorker": ("draft_worker", "target_worker")},
    "sglang/srt/plugins/hook_registry.py": {"HookRegistry": ("register",)},
}
#: Attributes of the worker the installer reads, looked for as ``self.X = ...`` in
#: ``EAGLEWorkerV2.__init__``.
_ATTRIBUTES = ("topk", "speculative_num_steps", "speculative_num_draft_tokens",
               "adaptive_controller", "_draft_worker", "_target_worker")


def _parameters(function: Any) -> list[str]:
    import ast

    args: ast.arguments = function.args
    names = [a.arg for a in [*args.posonlyargs, *args.args]]
    if args.vararg is not None:
        names.append("*" + args.vararg.arg)
    names += [a.arg for a in args.kwonlyargs]
    if args.kwarg is not None:
        names.append("**" + args.kwarg.arg)
    return names[1:] if names[:1] in (["self"], ["cls"]) else names


def signatures(source_dir: str | Path) -> dict[str, Any]:
    """The parameters (in order, without ``self``) of every method wrapped or read, the
    worker attributes ``__init__`` assigns, and ``HookType``'s members."""
    import ast

    found: dict[str, Any] = {}
    for relative, classes in _WRAPPED.items():
        tree = ast.parse((Path(source_dir) / relative).read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.name in classes:
                methods = {f.name: f for f in node.body
                           if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)}
                for name in classes[node.name]:
                    method = methods.get(name)
                    found[f"{node.name}.{name}"] = (
                        None if method is None else _parameters(method))
                if node.name == "EAGLEWorkerV2" and "__init__" in methods:
                    assigned = {t.attr for n in ast.walk(methods["__init__"])
                                if isinstance(n, ast.Assign) for t in n.targets
                                if isinstance(t, ast.Attribute)
                                and isinstance(t.value, ast.Name) and t.value.id == "self"}
                    found["EAGLEWorkerV2.__init__ assigns"] = sorted(
                        a for a in _ATTRIBUTES if a in assigned)
            if isinstance(node, ast.ClassDef) and node.name == "HookType":
                found["HookType"] = [t.id for n in node.body if isinstance(n, ast.Assign)
                                     for t in n.targets if isinstance(t, ast.Name)]
    return {"about": (
        f"Parameter names (in order, without self) of the SGLang {RELEASE} methods "
        "specguard's installer and plugin wrap or read, the worker attributes "
        "EAGLEWorkerV2.__init__ assigns that the installer reads, and HookType's members, "
        "read from the unzipped wheel with ast by tools/record_corpus/sglang_v2.py "
        "--signatures."), "release": RELEASE, "methods": found}


# --- writing -----------------------------------------------------------------------------

def record_scenario(sg: SimpleNamespace, scenario: Scenario, release: str = RELEASE) -> Any:
    from specguard.adapters.corpus import Corpus, Event, encode_tree

    with _bug(sg, scenario.bug):
        events = _Scheduler(sg, scenario).run()
    return Corpus(
        engine="sglang", engine_version=release, scenario=scenario.name,
        description=scenario.description,
        config={"spec_steps": scenario.steps, "topk": 1,
                "num_draft_tokens": scenario.steps + 1, "vocab_size": VOCAB},
        events=[Event(event=e["event"], fields=encode_tree(e["fields"])) for e in events],
        expect=list(scenario.expect))


def record(source_dir: str | Path, corpus_dir: str | Path | None = None, *,
           scenarios: list[str] | None = None, release: str = RELEASE) -> list[Path]:
    """Record every scenario (or ``scenarios``) of SGLang ``release`` (0.5.23 unless
    told) from the unzipped wheel at ``source_dir`` into ``corpus_dir`` (default: the
    repository's ``tests/conformance/corpus/sglang/<release>``); return the files
    written."""
    from specguard.adapters.corpus import write_corpus

    out = Path(corpus_dir) if corpus_dir is not None else CORPUS / release
    out.mkdir(parents=True, exist_ok=True)
    chosen = [SCENARIOS[n] for n in (scenarios or list(SCENARIOS))]
    sg = bootstrap(Path(source_dir), steps=chosen[0].steps)
    written = []
    for scenario in chosen:
        path = out / f"{scenario.name}.json"
        write_corpus(path, record_scenario(sg, scenario, release))
        written.append(path)
        print(f"wrote {path}")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="the unzipped sglang-0.5.23 wheel")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    parser.add_argument("--out", help="corpus folder (default: the repository's)")
    parser.add_argument("--release", default=RELEASE,
                        help=f"the release of the wheel (default {RELEASE}; also 0.5.19)")
    parser.add_argument("--signatures", action="store_true",
                        help=f"write {SIGNATURES.name} instead of the corpus")
    args = parser.parse_args(argv)
    if args.signatures:
        import json

        SIGNATURES.write_text(json.dumps(signatures(args.source), indent=1) + "\n",
                              encoding="utf-8")
        print(f"wrote {SIGNATURES}")
        return 0
    record(args.source, args.out, scenarios=args.scenario, release=args.release)
    return 0


if __name__ == "__main__":
    sys.exit(main())
