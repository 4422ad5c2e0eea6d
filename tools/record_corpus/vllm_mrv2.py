"""Record vLLM Model Runner V2 traffic into the conformance corpus, from vLLM's source.

Model Runner V2 (``vllm/v1/worker/gpu/``, vLLM 0.33.0) keeps every request's state in
device tensors (``RequestState``) and builds each step's ``InputBatch`` with triton
kernels; its drafts never leave the device (the scheduler is sent ``[-1] * K`` per
request). This script runs, on CPU, vLLM's real ``Scheduler`` (through the helpers of
``tools/record_corpus/vllm.py``) and MRV2's real host and kernel code, and writes what
crossed each step to ``tests/conformance/corpus/vllm-mrv2/<version>/<scenario>.json``.

What is vLLM's own code, imported from the source tree you point at:

* the scheduler, its KV-cache manager and prefix cache, ``update_from_output`` and
  ``update_draft_token_ids``, with ``use_v2_model_runner`` on;
* ``RequestState`` and ``InputBuffers`` (``states.py``, ``input_batch.py``), and these
  ``GPUModelRunner`` methods, called on a stand-in runner object: ``finish_requests``,
  ``_remove_request``, ``add_requests``, ``update_requests``, ``gather_batch_req_state``,
  ``prepare_inputs`` and ``postprocess_sampled``;
* through them, MRV2's triton kernels: ``prepare_prefill_inputs``,
  ``prepare_pos_seq_lens``, ``combine_sampled_and_draft_tokens``, ``expand_idx_mapping``,
  ``post_update`` and the staged writes of ``buffer_utils``; and
  ``get_num_sampled_and_rejected`` after the rejection step. They run in triton's
  interpreter (``TRITON_INTERPRET=1``, ``CUDA_VISIBLE_DEVICES=""``).

What is a stand-in, because it needs a GPU or a model:

* pinned host memory: ``UvaBuffer`` (a pinned CPU tensor and its device view) becomes
  one CPU tensor serving as both;
* the model and its sampler: a toy target model (``target_next``), a toy drafter
  (``draft_next``), and greedy rejection in MRV2's layout: ``(num_reqs, S + 1)`` rows,
  the first ``num_sampled`` valid, the rest left as they are (MRV2 allocates them with
  ``new_empty``), or ``(num_reqs, 1)`` from the plain sampler of a step without drafts.
  The draft slots a step verifies are what ``gather_draft_sampled`` reads: the input ids
  at ``logits_indices``, ``-1`` (rejected) while the row is still inside its prefill;
* the tail of ``sample_tokens`` that stores the drafts: ``draft_tokens[:, K_t:] = -1``
  then ``req_states.draft_tokens[idx_mapping] = draft_tokens``, as written in
  ``model_runner.py``, and ``DraftTokensHandler.get_draft_tokens`` without structured
  output (``[-1] * K_t`` per request; its CUDA stream cannot be built on CPU);
* attention, block tables, LoRA, encoder caches: absent (no-ops), as they do not touch
  the hand-overs recorded here.

Older trees (0.24.0, 0.29.0) differ, and the recorder follows what the tree has, not its
version: their ``UvaBuffer.uva`` is the device view itself (an attribute, not a method);
``async_copy_to_gpu`` pins its source (the stand-in copies without pinning); 0.29.0's
``prepare_inputs`` takes no ``num_active_loras``; 0.24.0 has no ``gather_batch_req_state``
(its ``prepare_inputs(scheduler_output, batch_desc)`` sorts the batch and pads to the
descriptor's ``num_tokens``), no ``InputBatch.has_prefill`` and a one-row
``next_prefill_tokens``. And their MRV2 does not read the scheduler's K_t
(``num_spec_tokens_to_schedule``): ``sample_tokens`` stores all ``S`` drafts and hands the
scheduler ``[-1] * S``, so the two scenarios about -1 columns past K_t (dynamic-k,
over-scheduled-drafts) are recorded only for trees that do (``runner_follows_k_t``).

Each event is one hand-over: ``schedule`` (the ``SchedulerOutput`` and MRV2's sorted
batch order), ``input_batch`` (the ``InputBatch`` fields), ``sampled`` (the rejection
sampler's ``sampled_token_ids``, ``num_sampled``, ``num_rejected``) and ``drafted`` (the
speculator's ``(num_reqs, S)`` proposals, ``-1`` past ``K_t``). From the repository root,
with the environment described in ``tools/record_corpus/vllm.py``::

    python tools/record_corpus/vllm_mrv2.py SRC/vllm-0.33.0
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import os
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1"
os.environ.setdefault("TRITON_INTERPRET", "1")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

_HERE = Path(__file__).resolve().parent


def _load_v1_recorder() -> Any:
    """tools/record_corpus/vllm.py under another name (``vllm`` is the engine package)."""
    spec = importlib.util.spec_from_file_location("record_vllm_v1", _HERE / "vllm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


v1 = _load_v1_recorder()

import numpy as np  # noqa: E402
import torch  # noqa: E402

ROOT = v1.ROOT
VOCAB = v1.VOCAB
target_next = v1.target_next
draft_next = v1.draft_next


class CpuUvaBuffer:
    """``UvaBuffer`` without pinned memory: one CPU tensor is host and device view."""

    def __init__(self, size: Any, dtype: torch.dtype) -> None:
        self.cpu = torch.zeros(size, dtype=dtype)
        self.np = self.cpu.numpy()

    def uva(self, n: int | None = None) -> torch.Tensor:
        return self.cpu[:n] if n is not None else self.cpu


class CpuUvaView:
    """``UvaBuffer`` of the trees whose ``uva`` is the device view itself, an attribute
    (``buf.uva[:n]``), not a method: one CPU tensor is host and device view."""

    def __init__(self, size: Any, dtype: torch.dtype) -> None:
        self.cpu = torch.zeros(size, dtype=dtype)
        self.np = self.cpu.numpy()
        self.uva = self.cpu


def cpu_copy_to_gpu(x: Any, out: torch.Tensor | None = None,
                    device: torch.device | None = None) -> torch.Tensor:
    """``async_copy_to_gpu`` of the trees that have it, without pinning its source."""
    if isinstance(x, np.ndarray):
        x = torch.from_numpy(x)
    if out is None:
        out = torch.empty_like(x, device=device)
    return out.copy_(x)


def boot(src: str) -> Any:
    """vLLM from ``src``, with MRV2's buffers on CPU; returns the vllm module."""
    vllm = v1.boot(src)
    from vllm.v1.worker.gpu import buffer_utils, model_runner

    # The source tree's UvaBuffer says whether its device view is a method or a tensor.
    view_is_method = callable(getattr(buffer_utils.UvaBuffer, "uva", None))
    buffer_utils.UvaBuffer = CpuUvaBuffer if view_is_method else CpuUvaView
    buffer_utils.is_uva_available = lambda: True
    # Trees whose host-to-device copies pin their source (x.pin_memory()) first.
    for module in (buffer_utils, model_runner):
        if hasattr(module, "async_copy_to_gpu"):
            module.async_copy_to_gpu = cpu_copy_to_gpu
    # Copy-on-write of KV blocks for partial prefix hits: there are no KV caches here.
    model_runner.copy_kv_cache_blocks_inplace = lambda *args, **kwargs: None
    return vllm


class _NoOp:
    """A component the recorded hand-overs never read (attention, LoRA, block tables)."""

    num_new_sampled_tokens_per_step = 1

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *args, **kwargs: None


class Mrv2Runner:
    """MRV2's ``GPUModelRunner`` methods on a stand-in object, plus a toy model."""

    def __init__(self, *, mtp_k: int, max_num_reqs: int, max_model_len: int,
                 max_num_tokens: int, record: Callable[[str, dict[str, Any]], None]) -> None:
        from vllm.v1.worker.gpu.input_batch import InputBuffers
        from vllm.v1.worker.gpu.model_runner import GPUModelRunner
        from vllm.v1.worker.gpu.states import RequestState

        self.cls = GPUModelRunner
        self.follows_k_t = runner_follows_k_t()
        self.mtp_k = mtp_k
        self.record = record
        device = torch.device("cpu")
        state = types.SimpleNamespace(
            device=device, max_num_reqs=max_num_reqs, decode_query_len=mtp_k + 1,
            num_speculative_steps=mtp_k, use_pp=False, is_last_pp_rank=False,
            req_states=RequestState(max_num_reqs, max_model_len, max_num_tokens, mtp_k,
                                    VOCAB, device),
            input_buffers=InputBuffers(max_num_reqs, max_num_tokens, device),
            model_state=_NoOp(), block_tables=_NoOp(), lora_state=_NoOp(),
            kv_block_zeroer=_NoOp(), kv_caches=[], kv_cache_config=None,
            adaptive_verification=None, pooling_runner=None, encoder_cache=None,
            pp_handler=None, prompt_logprobs_worker=None, sampler=None, fast_prefill=None,
            pcp_manager=None, model_config=types.SimpleNamespace(rswa_window=None),
            use_dcp=False)
        # Trees without gather_batch_req_state (0.24.0) sort the batch in prepare_inputs.
        self.gathers = hasattr(GPUModelRunner, "gather_batch_req_state")
        for name in ("_remove_request", "finish_requests", "add_requests", "update_requests",
                     "gather_batch_req_state", "prepare_inputs", "postprocess_sampled"):
            if name == "gather_batch_req_state" and not self.gathers:
                continue
            setattr(state, name, types.MethodType(getattr(GPUModelRunner, name), state))
        self.state = state

    def execute(self, so: Any) -> tuple[Any, Any]:
        """``execute_model`` then ``sample_tokens``; returns (ModelRunnerOutput, drafts)."""
        from vllm.v1.outputs import DraftTokenIds

        s = self.state
        s.finish_requests(so)
        s.add_requests(so)
        s.update_requests(so)
        if so.total_num_scheduled_tokens == 0:
            self.record("schedule", v1._schedule_fields(so, []))
            return v1._runner_output(None, (0, 33, 0), [], []), None
        if self.gathers:
            batch_state, _ = s.gather_batch_req_state(so, False)
            self.record("schedule", v1._schedule_fields(so, list(batch_state.req_ids)))
            desc = types.SimpleNamespace(num_tokens=0, num_reqs=None)
            # The trees with LoRA-aware fast prefill take the number of active LoRAs too.
            params = inspect.signature(self.cls.prepare_inputs).parameters
            loras = (0,) if "num_active_loras" in params else ()
            batch = s.prepare_inputs(so, batch_state, desc, *loras)
        else:  # prepare_inputs sorts the batch, and pads to the descriptor's num_tokens
            # (eager dispatch: the scheduled tokens, no request padding).
            desc = types.SimpleNamespace(num_tokens=so.total_num_scheduled_tokens, num_reqs=None)
            batch = s.prepare_inputs(so, desc)
            self.record("schedule", v1._schedule_fields(so, list(batch.req_ids)))
        self.record("input_batch", _input_batch_fields(batch))
        sampled, num_sampled = self._verify(batch)
        from vllm.v1.worker.gpu.input_batch import get_num_sampled_and_rejected

        num_sampled, num_rejected = get_num_sampled_and_rejected(
            num_sampled, batch.seq_lens, batch.cu_num_logits, batch.idx_mapping,
            s.req_states.prefill_len.gpu)
        self.record("sampled", {"sampled_token_ids": sampled.clone(),
                                "num_sampled": num_sampled.clone(),
                                "num_rejected": num_rejected.clone()})
        s.postprocess_sampled(batch.idx_mapping, sampled, num_sampled, num_rejected,
                              batch.query_start_loc)
        if self.follows_k_t:
            k_t = 0 if getattr(so, "skip_drafts", False) else int(so.num_spec_tokens_to_schedule)
        else:  # this tree's sample_tokens stores and hands back all S drafts, whatever K_t
            k_t = self.mtp_k
        drafts = self._propose(batch, num_sampled, k_t)
        if k_t < self.mtp_k:  # sample_tokens, as written in model_runner.py
            drafts[:, k_t:] = -1
        s.req_states.draft_tokens[batch.idx_mapping] = drafts
        self.record("drafted", {"draft_tokens": drafts.clone(), "num_speculative_tokens": k_t})
        counts = num_sampled.tolist()
        rows = [sampled[i, :counts[i]].tolist() for i in range(len(batch.req_ids))]
        output = v1._runner_output(None, (0, 33, 0), list(batch.req_ids), rows)
        return output, DraftTokenIds(list(batch.req_ids),
                                     [[-1] * k_t for _ in batch.req_ids])

    def _verify(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Greedy rejection in MRV2's layout, on the slots ``gather_draft_sampled`` reads."""
        prefill_len = self.state.req_states.prefill_len.np
        cu = batch.cu_num_logits_np.tolist()
        rows = batch.logits_indices.tolist()
        ids = batch.input_ids.tolist()
        positions = batch.positions.tolist()
        num_reqs = len(batch.req_ids)
        # The rejection sampler's rows are (num_reqs, S + 1), allocated with new_empty:
        # slots past num_sampled hold whatever was there. The plain sampler's are
        # (num_reqs, 1).
        width = self.mtp_k + 1 if batch.num_draft_tokens > 0 else 1
        sampled = torch.full((num_reqs, width), 777, dtype=torch.int64)
        num_sampled = torch.zeros(num_reqs, dtype=torch.int32)
        for i in range(num_reqs):
            span = rows[cu[i]:cu[i + 1]]
            predictions = [target_next(ids[t], positions[t]) for t in span]
            state_row = int(batch.idx_mapping_np[i])
            drafts = []
            for local, t in enumerate(span[1:], start=1):
                placeholder = positions[t] - local < prefill_len[state_row]
                drafts.append(-1 if placeholder else ids[t])
            accepted = 0
            while accepted < len(drafts) and drafts[accepted] == predictions[accepted]:
                accepted += 1
            sampled[i, :accepted + 1] = torch.tensor(predictions[:accepted + 1])
            num_sampled[i] = accepted + 1
        return sampled, num_sampled

    def _propose(self, batch: Any, num_sampled: torch.Tensor, k_t: int) -> torch.Tensor:
        """The toy MTP head: ``S`` drafts per request from its last token."""
        req_states = self.state.req_states
        drafts = torch.zeros((len(batch.req_ids), self.mtp_k), dtype=torch.int64)
        for i, state_row in enumerate(batch.idx_mapping_np.tolist()):
            if int(num_sampled[i]) > 0:
                token = int(req_states.last_sampled_tokens[state_row, 0])
            else:  # a chunk of a prefill: its next prompt token
                upcoming = req_states.next_prefill_tokens  # (max_num_reqs,) in 0.24.0
                token = int(upcoming[state_row] if upcoming.dim() == 1
                            else upcoming[0, state_row])
            position = int(req_states.num_computed_tokens.gpu[state_row])
            for j in range(self.mtp_k):
                token = draft_next(token, position + j)
                drafts[i, j] = token
        return drafts


_BATCH_FIELDS = (
    "req_ids", "num_reqs", "num_reqs_after_padding", "idx_mapping", "idx_mapping_np",
    "expanded_idx_mapping", "expanded_local_pos", "num_scheduled_tokens", "num_tokens",
    "num_tokens_after_padding", "num_draft_tokens", "num_draft_tokens_per_req",
    "query_start_loc", "query_start_loc_np", "seq_lens", "num_computed_tokens_np",
    "prefill_len_np", "num_computed_prefill_tokens_np", "is_prefilling_np", "has_prefill",
    "input_ids", "positions", "logits_indices", "cu_num_logits", "cu_num_logits_np")


def _input_batch_fields(batch: Any) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name in _BATCH_FIELDS:
        if name == "has_prefill" and not hasattr(batch, name):
            continue  # 0.24.0's InputBatch has only is_prefilling_np
        value = getattr(batch, name)
        if isinstance(value, torch.Tensor):
            value = value.clone()
        elif isinstance(value, np.ndarray):
            value = value.copy()
            if value.dtype == np.intp:
                value = value.astype(np.int64)
        fields[name] = value
    return fields


class Engine(v1.Engine):
    """vLLM's engine loop (sync, or async with two batches in flight) around the MRV2
    runner."""

    def __init__(self, vllm: Any, *, mtp_k: int, async_scheduling: bool = False,
                 **options: Any) -> None:
        super().__init__(vllm, mtp_k=mtp_k, async_scheduling=async_scheduling, **options)
        self.scheduler.use_v2_model_runner = True
        self.runner = Mrv2Runner(  # type: ignore[assignment]
            mtp_k=mtp_k, max_num_reqs=options.get("max_num_seqs", 8),
            max_model_len=options.get("max_model_len", 512),
            max_num_tokens=options["max_num_batched_tokens"], record=self._record)


def runner_follows_k_t() -> bool:
    """Whether the booted tree's MRV2 reads the scheduler's K_t
    (``num_spec_tokens_to_schedule``): it then proposes K_t drafts, sets the columns past
    K_t to -1 on the device and hands the scheduler ``[-1] * K_t``. Without it (0.24, 0.29)
    MRV2 proposes, stores and hands back all S drafts whatever K_t is."""
    from vllm.v1.worker.gpu.model_runner import GPUModelRunner

    return "num_spec_tokens_to_schedule" in inspect.getsource(GPUModelRunner.execute_model)


#: The V1 recorder's scenario, for the releases Model Runner V2 is recorded from (the
#: recorder records whichever release it boots, the scenarios whose ``needs`` it has).
Scenario = functools.partial(v1.Scenario, versions=("0.24.0", "0.29.0", "0.33.0"))


def _steady(e: Engine) -> None:
    e.add("r0", v1.prompt(30, 5), 10)
    e.add("r1", v1.prompt(31, 7), 10)
    e.run(8)


def _chunked(e: Engine) -> None:
    e.add("dec", v1.prompt(32, 5), 10)
    e.run(2)
    e.add("long", v1.prompt(33, 30), 3)
    e.run(7)


def _mixed(e: Engine) -> None:
    e.add("r0", v1.prompt(34, 6), 8)
    e.run(2)
    e.add("r1", v1.prompt(35, 9), 4)
    e.add("r2", v1.prompt(36, 5), 4)
    e.run(6)


def _prefix(e: Engine) -> None:
    shared = v1.prompt(37, 9)
    e.add("first", shared, 6)
    e.run(3)
    e.add("partial", shared[:8] + v1.prompt(38, 3), 2)
    e.add("full", list(shared), 2)
    e.run(6)


def _async(e: Engine) -> None:
    e.add("r0", v1.prompt(42, 6), 7)
    e.run(2)
    e.add("r1", v1.prompt(43, 10), 5)
    e.run(9)


def _dynamic(e: Engine) -> None:
    _dynamic_prefix(e)
    e.run(6)


def _over_scheduled(e: Engine) -> None:
    """Dynamic K, then a scheduler that pads one request's drafts to S (as the V1 path
    pads a fully cached prompt with ``[-1] * k``) while its device row holds K_t=1 real
    draft and ``-1`` after it."""
    _dynamic_prefix(e)

    def pad(engine: Engine, so: Any) -> None:
        listed = so.scheduled_spec_decode_tokens.get("r1")
        if engine.step_index != 4 or listed is None:
            return
        extra = engine.runner.mtp_k - len(listed)
        so.scheduled_spec_decode_tokens["r1"] = list(listed) + [-1] * extra
        so.num_scheduled_tokens["r1"] += extra
        so.total_num_scheduled_tokens += extra

    e.mutate = pad
    e.run(2)


def _dynamic_prefix(e: Engine) -> None:
    e.add("r0", v1.prompt(39, 5), 6)
    e.run(3)
    e.add("r1", v1.prompt(40, 4), 5)
    e.add("r2", v1.prompt(41, 4), 5)


def _first_sentinel(e: Engine) -> list[dict[str, Any]]:
    """The first ``-1`` in an ``InputBatch``'s ``input_ids``: its request and position."""
    for name, fields in e.events:
        if name != "input_batch":
            continue
        ids = fields["input_ids"][: fields["num_tokens"]].tolist()
        if -1 in ids:
            token = ids.index(-1)
            starts = fields["query_start_loc_np"]
            position = int(np.searchsorted(starts, token, side="right")) - 1
            return [{"code": "SG628", "seq_id": fields["req_ids"][position],
                     "position": position}]
    return []


SCENARIOS = [
    Scenario("steady-decode", "Two requests decoding with mtp_k=3 drafts that stay on the "
             "device.", 3, _steady, options=dict(max_num_batched_tokens=32)),
    Scenario("chunked-prefill", "A 30-token prompt chunked under a 16-token budget beside a "
             "decoding request, mtp_k=2.", 2, _chunked, options=dict(max_num_batched_tokens=16)),
    Scenario("mixed-batch", "Decode requests and new prefills in one batch, sorted "
             "decodes first, mtp_k=3.", 3, _mixed, options=dict(max_num_batched_tokens=32)),
    Scenario("prefix-cache-hit", "A partial and a full prefix-cache hit; the fully cached "
             "request is scheduled with [-1] * k draft slots, which MRV2 fills from its "
             "zeroed device row and rejects as placeholders.", 2, _prefix,
             options=dict(max_num_batched_tokens=32)),
    Scenario("dynamic-k", "Dynamic speculative decoding: K_t=3 at batch size 1 and K_t=1 "
             "above; the speculator's columns past K_t are -1 on the device.", 3, _dynamic,
             versions=("0.33.0",), needs=(runner_follows_k_t,),
             options=dict(max_num_batched_tokens=32, dynamic_k=[(1, 1, 3), (2, 8, 1)])),
    Scenario("async-scheduling", "AsyncScheduler, one step ahead of the results: its "
             "[-1] * K_t placeholders are the draft counts; MRV2 copies the drafts from the "
             "device.", 2, _async, options=dict(max_num_batched_tokens=16),
             async_scheduling=True),
    Scenario("over-scheduled-drafts", "A buggy scheduler (the mutation is the recorder's): "
             "under dynamic K it schedules r1 three draft slots while MRV2's device row "
             "holds one real draft and -1 after it; MRV2's own combine kernel copies the "
             "-1 into input_ids, which the target would embed.", 3, _over_scheduled,
             options=dict(max_num_batched_tokens=32, dynamic_k=[(1, 1, 3), (2, 8, 1)]),
             expect=_first_sentinel, versions=("0.33.0",), needs=(runner_follows_k_t,)),
]


def record(vllm: Any, scenario: Scenario) -> Any:
    """Run one scenario; returns its corpus."""
    engine = Engine(vllm, mtp_k=scenario.mtp_k, async_scheduling=scenario.async_scheduling,
                    **scenario.options)
    return v1.drive_and_collect(vllm, scenario, engine, "vllm-mrv2", {
        "runner": "ModelRunnerV2",
        "max_num_reqs": int(scenario.options.get("max_num_seqs", 8))})


def main(argv: list[str] | None = None) -> int:
    return v1.record_cli(argv, description=__doc__.split("\n\n")[0], folder="vllm-mrv2",
                         scenarios=lambda version: [s for s in SCENARIOS if s.applies()],
                         record_one=record, boot_sources=boot)


if __name__ == "__main__":
    sys.exit(main())
