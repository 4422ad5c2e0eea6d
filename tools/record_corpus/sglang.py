"""Record SGLang's own EAGLE/MTP boundary traffic into the conformance corpus, from its source.

Runs SGLang 0.5.10.post1's scheduler-side code and its v1 ``EAGLEWorker`` on CPU, with the
model outputs fabricated, and writes what crossed each hand-over the SGLang view reads,
step by step, to ``tests/conformance/corpus/sglang/0.5.10.post1/<scenario>.json``; with
``--release``, the same for the later releases that still have the v1 worker (0.5.11 and
0.5.12 are recorded; from 0.5.13 on ``srt/speculative/eagle_worker.py`` is gone) into
``tests/conformance/corpus/sglang/<release>/``. The corpus is data: no SGLang code is
copied into it, and CI only replays it.

What is SGLang's own code, imported from the source tree you point at:

* ``Req``, ``SamplingParams``, ``ScheduleBatch`` (``init_new``, ``prepare_for_extend``,
  ``prepare_for_decode``, ``filter_batch``, ``merge_batch``, ``retract_decode``,
  ``get_model_worker_batch``), ``ReqToTokenPool``, ``TokenToKVPoolAllocator`` and
  ``ChunkCache``;
* ``ForwardBatch.init_new`` for every draft and draft-extend forward;
* the ``EAGLEWorker`` methods of one step, called on a worker object built without its
  ``__init__`` (which loads models): ``forward_batch_generation``,
  ``forward_target_extend``, ``forward_draft_extend``, ``draft``,
  ``_draft_preprocess_decode``, ``draft_forward``, ``verify``,
  ``forward_draft_extend_after_decode`` and ``capture_for_decode``;
* ``EagleDraftInput`` (``prepare_for_extend``, ``prepare_extend_after_decode``,
  ``filter_batch``, ``merge_batch``), ``EagleVerifyInput`` (``prepare_for_verify``,
  ``verify``), ``build_tree_kernel_efficient``, ``organize_draft_results``,
  ``select_top_k_tokens``, and the Triton kernels of that path
  (``assign_draft_cache_locs``, ``assign_req_to_token_pool``,
  ``create_extend_after_decode_spec_info``), run by Triton's interpreter on CPU
  (``TRITON_INTERPRET=1``).

What is a stand-in:

* ``sgl_kernel`` and ``torchvision`` are empty modules (the first is CUDA-only on the
  package index, the second does not load against a CPU torch; nothing of either runs
  on this path);
* the two CUDA-only tree kernels of 0.5.10 to 0.5.12: ``sgl_build_tree_kernel_efficient`` (a
  ``NameError`` on CPU) fills the topk=1 chain, and ``verify_tree_greedy_func`` (a silent
  no-op on CPU) is a torch reference of the greedy chain walk; both follow the CUDA
  kernels' outputs for one linear chain per request;
* the target and draft models: ``target_worker.forward_batch_generation`` and the draft
  ``model_runner.forward`` return fabricated logits (a deterministic toy next-token
  function; the draft model agrees with it except at some positions, so accept lengths
  vary) and zero hidden states; attention backends are no-ops;
* the global ``ServerArgs`` is built from the dataclass defaults without
  ``__post_init__`` (which loads a Hugging Face config), ``model_config`` is a namespace;
* the scheduler's loop (``Scheduler.get_next_batch_to_run`` / ``process_batch_result``):
  the scenario drives the batch methods above in the scheduler's order: a new prefill
  batch runs, then merges into the running batch, which is filtered with
  ``v1_spec_info_filtered=True`` after each verify and prepared for decode.

Getting SGLang's source without installing it (``pip download`` only prepares the
sdist's metadata; never pip-install sglang)::

    pip download sglang==0.5.10.post1 --no-deps --no-binary :all: -d SDIST
    tar xzf SDIST/sglang-0.5.10.post1.tar.gz -C SRC   # gives SRC/sglang-0.5.10.post1/sglang

An environment to run it in: a virtual environment of its own with the CPU torch of
``constraints/ci.txt``, specguard (``pip install -e .``) and the packages SGLang's
scheduler imports: ``triton transformers openai tqdm pybase64 requests IPython pydantic
aiohttp orjson pillow starlette partial_json_parser dill sentencepiece
compressed_tensors gguf msgspec einops setproctitle pyzmq``. Then, from the repository
root::

    python tools/record_corpus/sglang.py SRC/sglang-0.5.10.post1       # every scenario
    python tools/record_corpus/sglang.py SRC/sglang-0.5.10.post1 --scenario batch-1 --out DIR
    python tools/record_corpus/sglang.py SRC/sglang-0.5.23 --release 0.5.23   # sglang_v2.py
    python tools/record_corpus/sglang.py SRC/sglang-0.5.10.post1 --check  # install_sglang live
    python tools/record_corpus/sglang.py SRC/sglang-0.5.12 --release 0.5.12

0.5.11 and 0.5.12 are taken from their wheels (``pip download sglang==0.5.12 --no-deps -d
DL``, then unzip the wheel into ``SRC/sglang-0.5.12``); their configs register
``qwen3_asr`` with transformers, which a newer transformers already has: run them with
the transformers they pin (``transformers==5.6.0`` with ``tokenizers<=0.23.0``, e.g.
installed with ``pip install --no-deps --target TF`` and put first with
``PYTHONPATH=TF``). That transformers hands out ``AutoImageProcessor`` as a placeholder
without torchvision; the recorder gives the real class. 0.5.10.post1 records the same
with either transformers.

The corpus keeps 0.5.10.post1's field names whatever the release calls them; where a
release renamed a field, the recorder reads it under the release's name (whichever of
the names the object has, not by version number):

* ``EagleVerifyInput.retrive_*`` are ``retrieve_*`` from 0.5.11 on;
* ``EagleVerifyOutput.accept_length_per_req_cpu`` is ``num_accepted_drafts_per_req_cpu``
  (0.5.11), ``num_correct_drafts_per_req_cpu`` (0.5.12); its ``verified_id`` is
  ``accept_tokens`` and its ``draft_input`` is ``draft_extend_input`` (0.5.12);
* the next input's ``accept_length_cpu`` is ``num_accepted_drafts_cpu`` (0.5.11); 0.5.12's
  ``EagleDraftExtendInput`` keeps ``num_accept_tokens_cpu`` (the bonus token counted,
  its ``extend_lens``), recorded less one, and its ``verified_id`` is ``input_ids``;
* ``EagleDraftInput.verified_id`` is ``bonus_tokens`` (0.5.12), as is the draft-extend
  input's, whose ``seq_lens_for_draft_extend_cpu`` is ``seq_lens_cpu``; 0.5.12's
  ``forward_draft_extend_after_decode`` returns the next ``EagleDraftInput`` (the draft
  extend's ``topk_index`` is read off it) and leaves ``batch.spec_info`` to its caller.

0.5.12's ``verify(batch)`` takes the verify input from ``batch.spec_info`` and returns
``(logits_output, verify_output, can_run_cuda_graph)``: the verify forward's
``out_cache_loc`` is read off the ``ModelWorkerBatch`` the target worker was handed. Its
draft decode steps run at the KV length (SGLang #25015 moved ``positions.add_(1)`` after
the forward; before, a draft's first decode step ran one past it): the fabricated draft
model reads which from its first decode step's positions. What SGLang changed and the
recorder does not bridge shows in the traffic: from 0.5.11 the request pool keeps row 0
for padding (``req_pool_indices`` start at 1), and 0.5.12's input for no request going
on is ``int64`` and has no hidden states.

``--check`` records nothing: it puts ``install_sglang`` on the live worker of each
scenario (SGLang's own objects and CPU tensors, not the corpus's stand-ins) and checks
that it reports exactly the scenario's expected rules, at the default and full depths.

Each event is one hand-over, with SGLang's own field names: ``schedule``
(``forward_batch_generation``'s batch on entry), ``draft_prefill``
(``forward_draft_extend``), ``drafted`` (``draft``'s ``EagleVerifyInput``), ``verified``
(``verify``'s ``EagleVerifyOutput`` and verify forward) and ``draft_extend``
(``forward_draft_extend_after_decode``). Float tensors (``topk_p``, hidden states) are
recorded by shape. A buggy scenario re-creates an SGLang bug by patching SGLang at run
time, and its ``expect`` lists the rules its replay must report.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import logging
import os
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
RELEASE = "0.5.10.post1"
RELEASES = (RELEASE, "0.5.11", "0.5.12")
"""The releases with the v1 ``EAGLEWorker`` this recorder has recorded (``--release``)."""
OUT = ROOT / "tests" / "conformance" / "corpus" / "sglang" / RELEASE
VOCAB = 1000
HIDDEN = 8
POOL = 4096
CONTEXT = 512


# -- bootstrap: SGLang's modules on CPU ------------------------------------------------

class _Stub(types.ModuleType):
    """An empty module whose attributes are empty modules: import succeeds, use fails."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        child = _Stub(f"{self.__name__}.{name}")
        setattr(self, name, child)
        return child

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"{self.__name__} is a CPU stand-in and does not run")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    ROOTS = ("sgl_kernel", "torchvision")

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in self.ROOTS:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        module = _Stub(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module: Any) -> None:
        pass


def bootstrap(source_dir: str | Path) -> types.SimpleNamespace:
    """Import SGLang's modules from ``source_dir`` on CPU; return them by short name."""
    os.environ["TRITON_INTERPRET"] = "1"
    os.environ.setdefault("SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK", "1")
    source = Path(source_dir)
    for candidate in (source / "python", source):
        if (candidate / "sglang").is_dir():
            sys.path.insert(0, str(candidate))
            break
    else:
        raise SystemExit(f"{source}: no sglang package in it (or in its python/ folder)")
    # transformers asks whether torchvision is there; it must say no before the stub is.
    import transformers.utils as transformers_utils
    import transformers.utils.import_utils as import_utils

    import_utils.is_torchvision_available = transformers_utils.is_torchvision_available = (
        lambda: False)
    _image_processor_without_torchvision()
    sys.meta_path.insert(0, _StubFinder())
    logging.getLogger("sglang").setLevel(logging.ERROR)
    names = {
        "schedule_batch": "sglang.srt.managers.schedule_batch",
        "sampling_params": "sglang.srt.sampling.sampling_params",
        "server_args": "sglang.srt.server_args",
        "memory_pool": "sglang.srt.mem_cache.memory_pool",
        "allocator": "sglang.srt.mem_cache.allocator",
        "chunk_cache": "sglang.srt.mem_cache.chunk_cache",
        "cache_init": "sglang.srt.mem_cache.cache_init_params",
        "forward_batch_info": "sglang.srt.model_executor.forward_batch_info",
        "eagle_worker": "sglang.srt.speculative.eagle_worker",
        "eagle_info": "sglang.srt.speculative.eagle_info",
        "eagle_utils": "sglang.srt.speculative.eagle_utils",
        "spec_info": "sglang.srt.speculative.spec_info",
        "logits_processor": "sglang.srt.layers.logits_processor",
        "managers_utils": "sglang.srt.managers.utils",
    }
    found = types.SimpleNamespace(**{key: importlib.import_module(value)
                                     for key, value in names.items()})
    found.eagle_utils.sgl_build_tree_kernel_efficient = _build_chain_cpu
    found.eagle_info.verify_tree_greedy_func = _verify_chain_greedy_cpu
    _global_server_args(found.server_args)
    # One rank, no expert parallelism: the groups SGLang's distributed set-up would make.
    parallel_state = importlib.import_module("sglang.srt.distributed.parallel_state")
    parallel_state._MOE_EP = types.SimpleNamespace(world_size=1, rank_in_group=0)
    return found


def _image_processor_without_torchvision() -> None:
    """Without torchvision, the transformers that 0.5.11 and 0.5.12 pin (5.6.0) hand out
    ``AutoImageProcessor`` as a placeholder that refuses use, though its own class imports
    without torchvision; those releases' configs call its ``register`` on import. Give the
    real class (a no-op where transformers already does, as 5.19 does)."""
    import transformers
    from transformers.utils.import_utils import DummyObject

    if isinstance(transformers.AutoImageProcessor, DummyObject):
        auto = importlib.import_module("transformers.models.auto.image_processing_auto")
        # transformers' lazy module may have replaced itself in sys.modules
        sys.modules["transformers"].AutoImageProcessor = auto.AutoImageProcessor  # type: ignore[attr-defined]


def _global_server_args(module: Any) -> None:
    """SGLang's global ``ServerArgs`` from its defaults, without ``__post_init__``."""
    cls = module.ServerArgs
    args = cls.__new__(cls)
    for spec in dataclasses.fields(cls):
        if spec.default is not dataclasses.MISSING:
            value = spec.default
        elif spec.default_factory is not dataclasses.MISSING:
            value = spec.default_factory()
        else:
            value = None
        object.__setattr__(args, spec.name, value)
    args.model_path = "toy"
    args.device = "cpu"
    args.speculative_algorithm = "EAGLE"
    args.speculative_eagle_topk = 1
    args.page_size = 1
    args.disable_cuda_graph = True
    module.set_global_server_args_for_scheduler(args)


# -- the CPU stand-ins of the two CUDA-only tree kernels --------------------------------

def _build_chain_cpu(parent_list: Any, top_scores_index: Any, seq_lens: Any, tree_mask: Any,
                     positions: Any, retrive_index: Any, retrive_next_token: Any,
                     retrive_next_sibling: Any, topk: int, spec_steps: int,
                     num_verify_tokens: int, tree_mask_mode: Any) -> None:
    """``sgl_kernel.build_tree_kernel_efficient`` for topk=1: one chain per request.

    What the CUDA kernel writes for a chain: node ``j`` of request ``i`` is flat token
    ``i * ndt + j`` at position ``seq_len + j``, its next token is ``j + 1`` (none after
    the last) and it has no sibling; the mask (a full causal chain) stays as allocated.
    """
    import torch

    if topk != 1:
        raise NotImplementedError("the CPU stand-in builds topk=1 chains only")
    bs = seq_lens.numel()
    depth = torch.arange(num_verify_tokens, device=seq_lens.device)
    retrive_index.copy_(torch.arange(bs * num_verify_tokens).reshape(bs, num_verify_tokens))
    nxt = (depth + 1).repeat(bs, 1)
    nxt[:, -1] = -1
    retrive_next_token.copy_(nxt)
    retrive_next_sibling.fill_(-1)
    positions.copy_((seq_lens.reshape(bs, 1) + depth).reshape(-1))


def _verify_chain_greedy_cpu(predicts: Any, accept_index: Any, accept_token_num: Any,
                             candidates: Any, target_predict: Any, topk: int = -1,
                             **tree: Any) -> tuple[Any, Any, Any]:
    """``sgl_kernel.verify_tree_greedy`` for chains: walk each request's chain while the
    target's prediction after node ``j`` is draft ``j + 1``; write the prediction of every
    node walked (the accepted drafts, then the bonus) and the nodes' flat indices. The
    tree comes as ``retrive_index`` / ``retrive_next_token`` / ``retrive_next_sibling``
    (0.5.10.post1) or ``retrieve_...`` (0.5.11 on)."""
    retrive_index, retrive_next_token = (
        tree[f"retrive_{name}"] if f"retrive_{name}" in tree else tree[f"retrieve_{name}"]
        for name in ("index", "next_token"))
    bs = candidates.shape[0]
    for i in range(bs):
        node, accepted = 0, 0
        accept_index[i, 0] = int(retrive_index[i, 0])
        while True:
            predicts[int(retrive_index[i, node])] = target_predict[i, node]
            child = int(retrive_next_token[i, node])
            if child < 0 or int(candidates[i, child]) != int(target_predict[i, node]):
                break
            accepted += 1
            node = child
            accept_index[i, accepted] = int(retrive_index[i, node])
        accept_token_num[i] = accepted
    return predicts, accept_index, accept_token_num


# -- the fabricated models ---------------------------------------------------------------

def target_next(token: int, position: int) -> int:
    """The toy target's next token after ``token`` at ``position``."""
    return (token * 31 + position * 7 + 3) % (VOCAB - 1) + 1


def draft_next(token: int, position: int) -> int:
    """The toy draft model: the target's token, except at some positions."""
    guess = target_next(token, position)
    return guess if (token + 2 * position) % 5 else guess % (VOCAB - 1) + 1


@dataclasses.dataclass
class Models:
    """What the fabricated models do, changed by a buggy scenario."""

    out_of_vocab_every: int = 0
    """When set, the draft head proposes ``VOCAB`` (one past the target's vocabulary)
    wherever its guess is a multiple of this: a draft head larger than the target's."""


def _logits(tokens: list[int], width: int) -> Any:
    import torch

    logits = torch.full((len(tokens), width), -10.0)
    if tokens:
        logits[torch.arange(len(tokens)), torch.tensor(tokens)] = 10.0
    return logits


def _last_tokens(forward_batch: Any) -> tuple[list[int], list[int]]:
    """Per row of a LAST-capture forward, its last token and position."""
    ids = forward_batch.input_ids.tolist()
    positions = forward_batch.positions.tolist()
    lens = forward_batch.extend_seq_lens_cpu
    if lens is None:
        lens = forward_batch.spec_info.accept_length.tolist()
    ends, total = [], 0
    for length in lens:
        total += int(length)
        ends.append(total - 1)
    return [ids[e] for e in ends], [positions[e] for e in ends]


class DraftRunner:
    """The draft ``ModelRunner`` as ``EAGLEWorker`` and ``ForwardBatch.init_new`` use it."""

    def __init__(self, sg: Any, server_args: Any, pools: Any, models: Models) -> None:
        self.sg, self.server_args, self.models = sg, server_args, models
        self.req_to_token_pool, self.token_to_kv_pool_allocator = pools
        self.token_to_kv_pool = pools[1].get_kvcache()
        self.attn_backend = types.SimpleNamespace(init_forward_metadata=lambda batch: None)
        self.device = "cpu"
        self.use_ngram_embedding = False
        self.model_is_mrope = False
        self.is_hybrid_swa = False
        self.tp_group = None
        self.hybrid_gdn_config = self.mamba2_config = self.hybrid_lightning_config = None
        self.model_config: Any = None  # make_worker's
        self._draft_batch: Any = None
        self._decode_ahead = 1

    def forward(self, forward_batch: Any, skip_attn_backend_init: bool = False,
                **kwargs: Any) -> Any:
        import torch

        mode = forward_batch.forward_mode
        if mode.is_decode():
            tokens = forward_batch.input_ids.tolist()
            positions = forward_batch.positions.tolist()
            if tokens and forward_batch is not self._draft_batch:  # a draft's first step
                # It runs at the KV length in 0.5.12 on (SGLang #25015: a decode row at
                # p holds the token at p + 1, as an extend row does), one past it before
                # (the row at p holds the token at p).
                self._draft_batch = forward_batch
                self._decode_ahead = 2 - (positions[0] - int(forward_batch.seq_lens[0]))
            ahead = self._decode_ahead
        else:
            tokens, positions = _last_tokens(forward_batch)
            ahead = 2  # an extend row at position p holds token p + 1 (EAGLE's shift)
        guesses = [draft_next(t, p + ahead) for t, p in zip(tokens, positions, strict=True)]
        every = self.models.out_of_vocab_every
        if every:
            guesses = [VOCAB if g % every == 0 else g for g in guesses]
        width = max(VOCAB, max(guesses, default=0) + 1)
        output = self.sg.logits_processor.LogitsProcessorOutput(
            next_token_logits=_logits(guesses, width),
            hidden_states=torch.zeros((len(tokens), HIDDEN)))
        return types.SimpleNamespace(logits_output=output, can_run_graph=False)


class TargetWorker:
    """``TpModelWorker`` as ``EAGLEWorker`` calls it: fabricated target outputs."""

    def __init__(self, sg: Any, runner: Any) -> None:
        self.sg = sg
        self.model_runner = runner
        self.verify_batch: Any = None
        """The ``ModelWorkerBatch`` of the last verify forward (a release whose
        ``verify`` does not return it: 0.5.12)."""

    def forward_batch_generation(self, worker_batch: Any, is_verify: bool = False,
                                 **kwargs: Any) -> Any:
        import torch

        ids = worker_batch.input_ids.tolist()
        if is_verify:
            self.verify_batch = worker_batch
            positions = worker_batch.spec_info.positions.tolist()
            predicted = [target_next(t, p + 1) for t, p in zip(ids, positions, strict=True)]
            hidden = torch.zeros((len(ids), HIDDEN))
            output = self.sg.logits_processor.LogitsProcessorOutput(
                next_token_logits=_logits(predicted, VOCAB), hidden_states=hidden)
            return self.sg.managers_utils.GenerationBatchResult(
                logits_output=output, can_run_cuda_graph=False)
        lens = worker_batch.extend_seq_lens
        prefix = worker_batch.extend_prefix_lens
        ends, total, sampled = [], 0, []
        for start, length in zip(prefix, lens, strict=True):
            total += length
            ends.append(total - 1)
            sampled.append(target_next(ids[total - 1], start + length))
        output = self.sg.logits_processor.LogitsProcessorOutput(
            next_token_logits=_logits(sampled, VOCAB),
            hidden_states=torch.zeros((len(ids), HIDDEN)))
        return self.sg.managers_utils.GenerationBatchResult(
            logits_output=output, next_token_ids=torch.tensor(sampled, dtype=torch.int64),
            can_run_cuda_graph=False)


def make_worker(sg: Any, steps: int, models: Models) -> Any:
    """SGLang's ``EAGLEWorker`` without its ``__init__``, on CPU pools and toy models."""
    import torch

    server_args = sg.server_args.get_global_server_args()
    server_args.speculative_num_steps = steps
    server_args.speculative_num_draft_tokens = steps + 1
    req_pool = sg.memory_pool.ReqToTokenPool(size=64, max_context_len=CONTEXT, device="cpu",
                                             enable_memory_saver=False)
    kv_cache = types.SimpleNamespace(size=POOL)
    allocator = sg.allocator.TokenToKVPoolAllocator(
        size=POOL, dtype=torch.float16, device="cpu", kvcache=kv_cache, need_sort=False)
    model_config = types.SimpleNamespace(
        vocab_size=VOCAB, hidden_size=HIDDEN, spec_hidden_size=HIDDEN,
        dtype=torch.float32, context_len=CONTEXT,
        is_encoder_decoder=False, is_matryoshka=False, is_multimodal=False,
        think_end_id=None,
        hf_config=types.SimpleNamespace(architectures=["LlamaForCausalLM"]))
    draft_runner = DraftRunner(sg, server_args, (req_pool, allocator), models)
    target_runner = DraftRunner(sg, server_args, (req_pool, allocator), models)
    target_runner.model_config = model_config
    draft_runner.model_config = model_config  # 0.5.12's idle inputs read its hidden size
    cls = sg.eagle_worker.EAGLEWorker
    worker = cls.__new__(cls)
    worker.__dict__.update(
        server_args=server_args, topk=1, speculative_num_steps=steps,
        speculative_num_draft_tokens=steps + 1, gpu_id=0, device="cpu",
        target_worker=TargetWorker(sg, target_runner), page_size=1,
        speculative_algorithm=sg.spec_info.SpeculativeAlgorithm.from_string("EAGLE"),
        req_to_token_pool=req_pool, token_to_kv_pool_allocator=allocator,
        hot_token_id=None, _model_runner=draft_runner, model_config=model_config,
        cuda_graph_runner=None, cuda_graph_runner_for_draft_extend=None,
        draft_attn_backend=types.SimpleNamespace(
            init_forward_metadata=lambda batch: None, attn_backends=[None] * steps),
        draft_tp_context=lambda group: contextlib.nullcontext(),
        eagle_use_aux_hidden_state=False, extend_lens=torch.empty(0),
        num_new_pages_per_topk=torch.empty(0), tp_rank=0,
        # 0.5.11 on: no adaptive step switching; the draft extend on the draft's backend
        adaptive_controller=None, draft_extend_attn_backend=None)
    tree_cache = sg.chunk_cache.ChunkCache(sg.cache_init.CacheInitParams(
        disable=True, req_to_token_pool=req_pool, token_to_kv_pool_allocator=allocator,
        page_size=1))
    worker.__dict__["_specguard_recorder_tree_cache"] = tree_cache
    return worker


# -- what crosses each hand-over, in SGLang's names -------------------------------------

def _array(value: Any) -> Any:
    """A tensor as a numpy copy (the corpus form: SGLang changes some tensors in place
    later in the step), anything else as it is."""
    return value.detach().cpu().numpy().copy() if hasattr(value, "detach") else value


def _rids(batch: Any) -> list[str]:
    return [req.rid for req in batch.reqs]


def _named(owner: Any, *names: str) -> Any:
    """The value of the first of ``names`` that ``owner`` has: one field under the names
    the releases give it (0.5.10.post1's first, the corpus's)."""
    for name in names:
        if hasattr(owner, name):
            return getattr(owner, name)
    raise AttributeError(f"{type(owner).__name__} has none of {', '.join(names)}")


def _anchors(info: Any) -> Any:
    """``EagleDraftInput``'s per-request last verified token: ``verified_id``, named
    ``bonus_tokens`` from 0.5.12 on."""
    return _named(info, "verified_id", "bonus_tokens")


def _next_accept_lengths(nxt: Any) -> list[int]:
    """The accepted drafts of the requests that go on, from the draft(-extend) input that
    ``verify`` hands on: ``accept_length_cpu`` (0.5.10.post1), ``num_accepted_drafts_cpu``
    (0.5.11), or 0.5.12's ``EagleDraftExtendInput.num_accept_tokens_cpu``, which counts
    the bonus token too (its ``extend_lens``), less that one."""
    if hasattr(nxt, "accept_length_cpu") or hasattr(nxt, "num_accepted_drafts_cpu"):
        return list(_named(nxt, "accept_length_cpu", "num_accepted_drafts_cpu") or [])
    return [int(n) - 1 for n in nxt.num_accept_tokens_cpu or []]


class Recorder:
    """Wraps a worker's hand-over methods and records what crosses them, in order."""

    def __init__(self, worker: Any) -> None:
        self.events: list[dict[str, Any]] = []
        self.step = 0
        originals = {name: getattr(worker, name) for name in (
            "forward_batch_generation", "forward_draft_extend", "draft", "verify",
            "forward_draft_extend_after_decode")}

        def forward_batch_generation(batch: Any) -> Any:
            self._schedule(batch)
            return originals["forward_batch_generation"](batch)

        def forward_draft_extend(batch: Any, hidden_states: Any, next_token_ids: Any,
                                 seq_lens_cpu: Any, mm_input_embeds: Any = None) -> Any:
            result = originals["forward_draft_extend"](batch, hidden_states, next_token_ids,
                                                       seq_lens_cpu, mm_input_embeds)
            self._add("draft_prefill", {
                "req_ids": _rids(batch), "input_ids": _array(batch.input_ids),
                "extend_lens": list(batch.extend_lens), "prefix_lens": list(batch.prefix_lens),
                "next_token_ids": _array(next_token_ids),
                "is_chunked": [int(req.is_chunked) for req in batch.reqs]})
            return result

        def draft(batch: Any) -> Any:
            spec = originals["draft"](batch)
            info = batch.spec_info
            self._add("drafted", {
                "req_ids": _rids(batch), "seq_lens": _array(batch.seq_lens),
                "seq_lens_cpu": _array(batch.seq_lens_cpu),
                "verified_id": _array(_anchors(info)), "topk_index": _array(info.topk_index),
                "draft_token": _array(spec.draft_token), "positions": _array(spec.positions),
                **{f"retrive_{name}": _array(_named(spec, f"retrive_{name}",
                                                    f"retrieve_{name}"))
                   for name in ("index", "next_token", "next_sibling")},
                "spec_steps": spec.spec_steps, "topk": spec.topk,
                "draft_token_num": spec.draft_token_num})
            return spec

        def verified(batch: Any, spec_info: Any, result: Any) -> None:
            # verify(batch, spec_info) returns (logits, output, worker batch, graph);
            # 0.5.12's verify(batch) returns no worker batch
            out = result[1]
            worker_batch = result[2] if len(result) == 4 else worker.target_worker.verify_batch
            nxt = _named(out, "draft_input", "draft_extend_input")
            self._add("verified", {
                "req_ids": _rids(batch), "finished": [req.finished() for req in batch.reqs],
                "accept_length_per_req_cpu": list(_named(
                    out, "accept_length_per_req_cpu", "num_accepted_drafts_per_req_cpu",
                    "num_correct_drafts_per_req_cpu")),
                "verified_id": _array(_named(out, "verified_id", "accept_tokens")),
                "next_accept_length_cpu": _next_accept_lengths(nxt),
                "next_verified_id": _array(_named(nxt, "verified_id", "input_ids")),
                # 0.5.12's input for no request going on has no hidden states (None)
                "next_hidden_rows": 0 if nxt.hidden_states is None
                else int(nxt.hidden_states.shape[0]),
                "draft_token": _array(spec_info.draft_token),
                "positions": _array(spec_info.positions),
                "draft_token_num": spec_info.draft_token_num,
                "out_cache_loc": _array(worker_batch.out_cache_loc)})

        def verify(batch: Any, spec_info: Any) -> Any:
            result = originals["verify"](batch, spec_info)
            verified(batch, spec_info, result)
            return result

        def verify_on_batch(batch: Any) -> Any:
            """0.5.12's ``verify(batch)``: the verify input is ``batch.spec_info``."""
            spec_info = batch.spec_info
            result = originals["verify"](batch)
            verified(batch, spec_info, result)
            return result

        def forward_draft_extend_after_decode(batch: Any) -> Any:
            result = originals["forward_draft_extend_after_decode"](batch)
            # 0.5.12: batch.spec_info is still the EagleDraftExtendInput, the next
            # EagleDraftInput (its topk_index) is returned
            info = batch.spec_info
            self._add("draft_extend", {
                "req_ids": _rids(batch), "input_ids": _array(batch.input_ids),
                "positions": _array(info.positions), "verified_id": _array(_anchors(info)),
                "seq_lens_for_draft_extend_cpu": _array(_named(
                    info, "seq_lens_for_draft_extend_cpu", "seq_lens_cpu")),
                "topk_index": _array((info if result is None else result).topk_index)})
            return result

        worker.__dict__.update(
            forward_batch_generation=forward_batch_generation,
            forward_draft_extend=forward_draft_extend, draft=draft,
            # the wrapper takes what the release's verify takes (install_sglang reads it)
            verify=verify if "spec_info" in inspect.signature(originals["verify"]).parameters
            else verify_on_batch,
            forward_draft_extend_after_decode=forward_draft_extend_after_decode)

    def _add(self, event: str, fields: dict[str, Any]) -> None:
        self.events.append({"event": event, "fields": {"step": self.step, **fields}})

    def _schedule(self, batch: Any) -> None:
        self.step += 1
        mode = batch.forward_mode.name
        fields: dict[str, Any] = {"req_ids": _rids(batch), "forward_mode": mode}
        if mode == "EXTEND":
            fields.update(input_ids=_array(batch.input_ids),
                          extend_lens=list(batch.extend_lens),
                          prefix_lens=list(batch.prefix_lens),
                          out_cache_loc=_array(batch.out_cache_loc))
        else:
            info = batch.spec_info
            fields.update(
                seq_lens=_array(batch.seq_lens),
                req_pool_indices=_array(batch.req_pool_indices),
                verified_id=_array(_anchors(info)), topk_index=_array(info.topk_index),
                topk_p_shape=list(info.topk_p.shape),
                hidden_states_rows=int(info.hidden_states.shape[0]))
        self._add("schedule", fields)


# -- the scheduler's order, around SGLang's own batch methods ----------------------------

class Scheduler:
    """``Scheduler.get_next_batch_to_run`` / ``process_batch_result`` in SGLang's order."""

    def __init__(self, sg: Any, steps: int, models: Models) -> None:
        self.sg = sg
        self.worker = make_worker(sg, steps, models)
        self.recorder = Recorder(self.worker)
        self.tree_cache = self.worker.__dict__["_specguard_recorder_tree_cache"]
        self.running: Any = None
        self.last_prefill: Any = None
        self.waiting: list[Any] = []
        self.count = 0

    def request(self, prompt_len: int, max_new_tokens: int, name: str | None = None) -> Any:
        sg = self.sg
        params = sg.sampling_params.SamplingParams(max_new_tokens=max_new_tokens,
                                                   temperature=0.0)
        params.normalize(None)
        rid = name or f"req-{self.count}"
        self.count += 1
        prompt = [(7 * self.count + 13 * j) % (VOCAB - 1) + 1 for j in range(prompt_len)]
        req = sg.schedule_batch.Req(rid, "", prompt, params, vocab_size=VOCAB)
        self.waiting.append(req)
        return req

    def _merge_last_prefill(self) -> None:
        batch, self.last_prefill = self.last_prefill, None
        if batch is None:
            return
        batch.filter_batch()
        if batch.is_empty():
            return
        if self.running is None or self.running.is_empty():
            self.running = batch
        else:
            self.running.merge_batch(batch)

    def prefill(self) -> None:
        """Prefill every waiting request as one new batch."""
        self._merge_last_prefill()
        sg, worker = self.sg, self.worker
        reqs, self.waiting = self.waiting, []
        for req in reqs:
            req.init_next_round_input(self.tree_cache)
        batch = sg.schedule_batch.ScheduleBatch.init_new(
            reqs, worker.req_to_token_pool, worker.token_to_kv_pool_allocator,
            self.tree_cache, worker.model_config, False, worker.speculative_algorithm)
        batch.prepare_for_extend()
        result = worker.forward_batch_generation(batch)
        for req, token in zip(batch.reqs, result.next_token_ids.tolist(), strict=True):
            req.output_ids.append(token)
            req.check_finished()
        self.last_prefill = batch

    def decode(self) -> None:
        """One decode step of the running batch (after merging the last prefill)."""
        self._merge_last_prefill()
        batch = self.running
        if batch is None:
            return
        batch.filter_batch(v1_spec_info_filtered=True)
        if batch.is_empty():
            self.running = None
            return
        batch.prepare_for_decode()
        self.worker.forward_batch_generation(batch)

    def retract(self) -> list[Any]:
        """``retract_decode`` on the running batch, as under memory pressure; the
        retracted requests wait to be prefilled again."""
        self._merge_last_prefill()
        batch = self.running
        batch.filter_batch(v1_spec_info_filtered=True)
        args = self.sg.server_args.get_global_server_args()
        retracted, _, _ = batch.retract_decode(args)
        self.waiting.extend(retracted)
        return retracted

    def finish_outside_verify(self, position: int) -> None:
        """The scheduler finishing a running request itself (an abort, a grammar that
        rejects the request), after the worker's verify."""
        req = self.running.reqs[position]
        req.finished_reason = self.sg.schedule_batch.FINISH_ABORT("finished by the scheduler")

    def run(self, steps: int) -> None:
        for _ in range(steps):
            if self.running is None and self.last_prefill is None:
                return
            self.decode()


# -- the scenarios ------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    steps: int
    drive: Callable[[Scheduler], None]
    expect: tuple[str, ...] = ()
    models: Models = dataclasses.field(default_factory=Models)
    patch: Callable[[Any], contextlib.AbstractContextManager[Any]] | None = None


def _mixed(s: Scheduler) -> None:
    for length, new in ((5, 12), (11, 9), (2, 14), (7, 10)):
        s.request(length, new)
    s.prefill()
    s.run(6)


def _finishing(s: Scheduler) -> None:
    s.request(6, 1)    # finishes at its prefill: it never decodes
    s.request(4, 5)    # finishes inside a verify
    s.request(9, 16)
    s.prefill()
    s.run(6)


def _joining(s: Scheduler) -> None:
    s.request(5, 14)
    s.request(3, 14)
    s.prefill()
    s.run(2)
    s.request(8, 8)
    s.request(2, 8)
    s.prefill()
    s.run(4)


def _retract(s: Scheduler) -> None:
    for length in (6, 4, 9):
        s.request(length, 16)
    s.prefill()
    s.run(2)
    s.retract()
    s.decode()
    s.prefill()  # the retracted request again, with its output so far
    s.run(3)


def _batch_one(s: Scheduler) -> None:
    s.request(7, 12)
    s.prefill()
    s.run(5)


def _batch_nine(s: Scheduler) -> None:
    for j in range(9):
        s.request(3 + j, 8 + j % 3)
    s.prefill()
    s.run(4)


def _finished_by_scheduler(s: Scheduler) -> None:
    for length in (5, 6, 7):
        s.request(length, 16)
    s.prefill()
    s.run(2)
    s.finish_outside_verify(0)
    s.run(2)


@contextlib.contextmanager
def _warn_only_filter_check(sg: Any) -> Iterator[None]:
    """SGLang's strict filter check as a warning (the SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK
    switch off), as before it was on by default: the truncation goes through."""
    previous = os.environ.get("SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK")
    os.environ["SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK"] = "0"
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK", None)
        else:
            os.environ["SGLANG_SPEC_ENABLE_STRICT_FILTER_CHECK"] = previous


@contextlib.contextmanager
def _retract_keeps_draft_rows(sg: Any) -> Iterator[None]:
    """SGLang before #2939: ``retract_decode`` filters the batch but not its
    ``EagleDraftInput``, which keeps the retracted request's row."""
    batch_cls = sg.schedule_batch.ScheduleBatch
    original = batch_cls.retract_decode

    def retract_decode(self: Any, server_args: Any) -> Any:
        spec = self.spec_info
        keep = spec.filter_batch
        spec.filter_batch = lambda *args, **kwargs: None
        try:
            return original(self, server_args)
        finally:
            spec.filter_batch = keep

    batch_cls.retract_decode = retract_decode
    try:
        yield
    finally:
        batch_cls.retract_decode = original


SCENARIOS = (
    Scenario("mixed-prompts", "Four requests with prompts of 5, 11, 2 and 7 tokens, three "
             "draft steps, decoding to their token limits.", 3, _mixed),
    Scenario("finish-at-prefill-and-in-verify", "One request finishes at its prefill "
             "(max_new_tokens=1) and never decodes, one finishes inside a verify row, one "
             "runs on: the next draft input keeps only the unfinished.", 3, _finishing),
    Scenario("join-running-batch", "Two requests decode; two more are prefilled and "
             "merged into the running batch (merge_batch), which decodes on.", 2, _joining),
    Scenario("retract-reprefill", "Three requests decode; retract_decode retracts the last "
             "one, the rest decode, it is prefilled again with its output so far and "
             "merged back (new req_pool_indices).", 3, _retract),
    Scenario("batch-1", "One request, one draft step... four decode steps (steps=4).", 4,
             _batch_one),
    Scenario("batch-9", "Nine requests of prompts 3 to 11 tokens in one batch.", 3,
             _batch_nine),
    Scenario("SG647-filter-keeps-wrong-rows", "SGLang #8671: the scheduler finishes the "
             "first request after a verify; filter_batch(v1_spec_info_filtered=True) keeps "
             "the first rows of the draft input (the strict check as a warning), so every "
             "request is handed its predecessor's draft row.", 3, _finished_by_scheduler,
             expect=("SG647",), patch=_warn_only_filter_check),
    Scenario("SG640-retract-keeps-draft-rows", "SGLang #2896: retract_decode leaves the "
             "retracted request's row in EagleDraftInput, so the next decode batch carries "
             "three draft rows for two requests.", 3, _retract,
             expect=("SG640",), patch=_retract_keeps_draft_rows),
    Scenario("SG108-draft-id-out-of-vocab", "SGLang #27482: the draft head proposes id "
             "1000 for a 1000-token vocabulary, and the chain hands it to the target's "
             "embedding.", 3, _mixed, expect=("SG108", "SG301"),
             models=Models(out_of_vocab_every=7)),
)


def record(sg: Any, scenario: Scenario, release: str = RELEASE) -> Any:
    """Run one scenario on SGLang's code (of ``release``); return its corpus."""
    from specguard.adapters.corpus import Corpus, Event, encode_tree

    with scenario.patch(sg) if scenario.patch is not None else contextlib.nullcontext():
        scheduler = Scheduler(sg, scenario.steps, scenario.models)
        try:
            scenario.drive(scheduler)
        except Exception as error:
            if not scenario.expect:
                raise
            logging.getLogger(__name__).warning("%s: SGLang stopped: %r", scenario.name,
                                                error)
    events = [Event(event=e["event"], fields={k: encode_tree(v) for k, v in e["fields"].items()})
              for e in scheduler.recorder.events]
    from specguard.adapters.corpus import Expected

    return Corpus(
        engine="sglang", engine_version=release, scenario=scenario.name,
        description=scenario.description,
        config={"spec_steps": scenario.steps, "topk": 1, "vocab_size": VOCAB,
                "num_slots": POOL + 1, "max_model_len": CONTEXT},
        events=events, expect=[Expected(code=code) for code in scenario.expect])


def check_installed(sg: Any, scenario: Scenario, depth: str) -> list[str]:
    """Run one scenario with ``install_sglang`` on the live worker (SGLang's own objects
    and tensors, in warn mode at ``depth``); return the codes it reported, in order."""
    from specguard import contracts
    from specguard.adapters import install_sglang

    found: list[str] = []
    with scenario.patch(sg) if scenario.patch is not None else contextlib.nullcontext():
        scheduler = Scheduler(sg, scenario.steps, scenario.models)
        install_sglang(scheduler.worker)
        logging.getLogger("specguard").setLevel(logging.CRITICAL)
        with contracts.listening(lambda delivery: found.extend(v.code for v in delivery)), \
                contracts.checking(mode="warn", depth=depth):
            try:
                scenario.drive(scheduler)
            except Exception:
                if not scenario.expect:
                    raise
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("source", help="an unpacked SGLang source distribution (or wheel)")
    parser.add_argument("--release", default=RELEASE,
                        help=f"the release of the source ({', '.join(RELEASES)} or "
                        "0.5.23); it names the corpus folder and engine_version")
    parser.add_argument("--out", help="output folder (default: the repository's corpus)")
    parser.add_argument("--scenario", action="append", help="record only these scenarios")
    parser.add_argument("--check", action="store_true",
                        help="record nothing: run each scenario with install_sglang on the "
                        "live worker, at the default and full depths, and compare what it "
                        "reports with the scenario's expected rules")
    args = parser.parse_args(argv)
    if args.release == "0.5.23":
        v2 = ROOT / "tools" / "record_corpus" / "sglang_v2.py"
        if not v2.exists():
            print(f"--release 0.5.23 is recorded by {v2.relative_to(ROOT)}, which this "
                  "checkout does not have", file=sys.stderr)
            return 1
        spec = importlib.util.spec_from_file_location("sglang_v2_recorder", v2)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        corpus_dir = Path(args.out) if args.out else OUT.parent / "0.5.23"
        module.record(args.source, corpus_dir)
        return 0
    if args.release not in RELEASES:
        print(f"--release {args.release}: this recorder knows {', '.join(RELEASES)} and "
              "0.5.23", file=sys.stderr)
        return 2
    from specguard.adapters.corpus import write_corpus

    sg = bootstrap(args.source)
    out = Path(args.out) if args.out else OUT.parent / args.release
    out.mkdir(parents=True, exist_ok=True)
    chosen = [s for s in SCENARIOS if not args.scenario or s.name in args.scenario]
    if args.check:
        agreed = True
        for scenario in chosen:
            for depth in ("essential", "full"):
                codes = set(check_installed(sg, scenario, depth))
                fits = codes == set(scenario.expect)
                agreed &= fits
                print(f"{scenario.name} at {depth}: {sorted(codes) or 'clean'}"
                      f"{'' if fits else f' (expected {sorted(scenario.expect)})'}")
        return 0 if agreed else 1
    for scenario in chosen:
        corpus = record(sg, scenario, args.release)
        write_corpus(out / f"{scenario.name}.json", corpus)
        print(f"{scenario.name}: {len(corpus.events)} events")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
