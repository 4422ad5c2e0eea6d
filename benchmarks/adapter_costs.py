"""The costs a user pays around validation: engine views, the draft-row builder, the import.

Core validation is measured against the floor in :mod:`specguard.benchmarks.suite`; this
module measures what sits around it, each against the validation it feeds:

* **engine views** (ATOM's ``ScheduledBatch``, vLLM's ``SchedulerOutput``, SGLang
  0.5.10's decode ``ScheduleBatch`` with its ``EagleDraftInput``, SGLang 0.5.23's
  ``ScheduleBatch`` at the overlap worker's entry) at B decode seqs, per depth,
  with a StepTracker and without: the view's call against what the engine itself must
  read of the same object (its engine-read floor);
* **``DraftTokens.from_mapping``** from the engines' forms (a dict of lists, a dict of
  arrays, a dense ``(n, k)`` array with the ids of the seqs that have rows) against one
  plain ``np.array`` of the same rows;
* **the import** of ``specguard.contracts`` in fresh interpreters, in CPU time of the
  importing thread.

The engine objects are built here with the engines' field names, types and meanings
(nothing imports ATOM or vLLM).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from itertools import chain, repeat
from operator import attrgetter
from types import SimpleNamespace
from typing import Any

import numpy as np

from specguard import contracts
from specguard.benchmarks.timing import Case, interleave
from specguard.benchmarks.workload import BLOCK_SIZE, MTP_K, VOCAB_SIZE

__all__ = ["WITH_TRACKER", "atom_batch", "engine_floor", "from_mapping_costs", "import_cost",
           "scheduler_output", "sglang_batch", "sglang_v2_batch", "view_costs"]

_US = 1e6
_CONTEXT = 1024


def atom_batch(size: int, *, seed: int = 0) -> SimpleNamespace:
    """An all-decode ATOM ``ScheduledBatch`` of ``size`` seqs with dense draft rows."""
    rng = np.random.default_rng(seed)
    q = MTP_K + 1
    # Decode seqs continue a prefilled prompt: at least one token before the scheduled ones.
    context = rng.integers(q + 1, _CONTEXT + 1, size).astype(np.int32)
    blocks = -(-context // BLOCK_SIZE)
    starts = np.concatenate([[0], np.cumsum(blocks)[:-1]])
    tables = [list(range(int(s), int(s + b))) for s, b in zip(starts, blocks, strict=True)]
    return SimpleNamespace(
        req_ids=list(range(size)),
        num_scheduled_tokens=np.full(size, q, dtype=np.int32),
        temperatures=np.zeros(size, dtype=np.float32),
        context_lens=context,
        num_rejected=np.zeros(size, dtype=np.int32),
        num_bonus=np.zeros(size, dtype=np.int32),
        per_req_cache_groups=[],
        num_cached_tokens=[0] * size,
        scheduled_tokens=rng.integers(0, VOCAB_SIZE, size * q).astype(np.int32),
        block_tables=tables,
        last_block_num_tokens=[1] * size,
        total_tokens_num=size * q, total_seqs_num=size,
        total_tokens_num_prefill=0, total_tokens_num_decode=size * q,
        total_seqs_num_prefill=0, total_seqs_num_decode=size,
        num_spec_step=MTP_K, is_dummy_run=False,
        scheduled_spec_decode_tokens=rng.integers(0, VOCAB_SIZE, (size, MTP_K)).astype(np.int32),
    )


def scheduler_output(size: int, *, seed: int = 0) -> SimpleNamespace:
    """A vLLM ``SchedulerOutput`` of ``size`` cached decode requests with ``k`` drafts each."""
    rng = np.random.default_rng(seed)
    requests = [f"req-{i}" for i in range(size)]
    drafts = rng.integers(0, VOCAB_SIZE, (size, MTP_K)).tolist()
    cached = SimpleNamespace(
        req_ids=requests, resumed_from_preemption=[False] * size,
        new_token_ids=[[] for _ in requests], new_block_ids=[None] * size,
        num_computed_tokens=rng.integers(MTP_K + 1, _CONTEXT, size).tolist())
    return SimpleNamespace(
        scheduled_new_reqs=[], scheduled_cached_reqs=cached,
        num_scheduled_tokens=dict.fromkeys(requests, MTP_K + 1),
        total_num_scheduled_tokens=size * (MTP_K + 1),
        scheduled_spec_decode_tokens=dict(zip(requests, drafts, strict=True)))


def sglang_batch(size: int, *, seed: int = 0) -> SimpleNamespace:
    """An SGLang decode ``ScheduleBatch`` of ``size`` requests as ``forward_batch_generation``
    receives it: ``Req`` objects with their ``rid``, and the ``EagleDraftInput`` rows (topk
    1) the last draft extend left for them."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(MTP_K + 1, _CONTEXT, size)
    spec = SimpleNamespace(
        verified_id=rng.integers(0, VOCAB_SIZE, size).astype(np.int32),
        topk_index=rng.integers(0, VOCAB_SIZE, (size, 1)),
        topk_p=np.ones((size, 1), dtype=np.float32),
        hidden_states=np.zeros((size, 16), dtype=np.float32))
    return SimpleNamespace(
        reqs=[SimpleNamespace(rid=f"req-{i}") for i in range(size)],
        forward_mode=SimpleNamespace(name="DECODE"), seq_lens=lens, seq_lens_cpu=lens,
        req_pool_indices=np.arange(size), spec_info=spec)


#: The names of the SGLang views in the report: the v1 worker's and the overlap worker's.
SGLANG, SGLANG_V2 = "SGLang 0.5.10", "SGLang 0.5.23"


def sglang_v2_batch(size: int, *, seed: int = 0) -> SimpleNamespace:
    """An all-decode SGLang 0.5.23 ``ScheduleBatch`` of ``size`` requests as
    ``EAGLEWorkerV2.forward_batch_generation`` receives it: inputs resolved, each request's
    bonus token and first draft gathered from its own relay row."""
    rng = np.random.default_rng(seed)
    lens = rng.integers(2, _CONTEXT + 1, size).astype(np.int64)
    rows = rng.permutation(size).astype(np.int64) + 1
    spec = SimpleNamespace(
        future_indices=rows, bonus_tokens=rng.integers(0, VOCAB_SIZE, size).astype(np.int32),
        topk_index=rng.integers(0, VOCAB_SIZE, (size, 1)).astype(np.int64))
    return SimpleNamespace(
        reqs=[SimpleNamespace(rid=f"req-{i}") for i in range(size)],
        forward_mode=SimpleNamespace(name="DECODE", is_extend=lambda: False),
        seq_lens=lens, seq_lens_cpu=lens.copy(), req_pool_indices=rows.copy(),
        spec_info=spec)


def _config(depth: str) -> contracts.Config:
    return contracts.Config(mode=contracts.Mode.STRICT, depth=contracts.Depth(depth))


def _validate_all(objects: tuple[Any, ...], config: contracts.Config) -> None:
    for obj in objects:
        contracts.validate(obj, config=config)


#: Suffix of the view entries that carry a StepTracker.
WITH_TRACKER = " + StepTracker"


def _views(size: int, *, tracked: bool = False,
           ) -> dict[str, tuple[Callable[[], Any], Callable[[], tuple[Any, ...]]]]:
    """Per view: a call of the view, and the contract objects it builds (to re-validate).

    ``tracked`` gives each view a StepTracker. It then sees the same decode batch every
    step: the steady state of the scheduler hand-over, with no verify or draft hand-over
    in between (those are the runner's, and are not timed here).
    """
    from specguard.adapters import AtomView, SglangV2View, SglangView, StepTracker, VllmView

    batch, output, decode = atom_batch(size), scheduler_output(size), sglang_batch(size)
    entry = sglang_v2_batch(size)
    sglang_v2 = SglangV2View(spec_steps=MTP_K, vocab_size=VOCAB_SIZE,
                             tracker=StepTracker() if tracked else None,
                             carried=tracked)
    atom = AtomView(mtp_k=MTP_K, vocab_size=VOCAB_SIZE, block_size=BLOCK_SIZE,
                    tracker=StepTracker() if tracked else None)
    vllm = VllmView(mtp_k=MTP_K, vocab_size=VOCAB_SIZE,
                    tracker=StepTracker() if tracked else None)
    sglang = SglangView(spec_steps=MTP_K, vocab_size=VOCAB_SIZE,
                        tracker=StepTracker() if tracked else None)
    suffix = WITH_TRACKER if tracked else ""

    def atom_objects() -> tuple[Any, ...]:
        return (atom(batch),)

    def vllm_objects() -> tuple[Any, ...]:
        return (vllm.schedule(output).draft_tokens,)

    def sglang_objects() -> tuple[Any, ...]:
        return (sglang.schedule(decode),)

    def sglang_v2_objects() -> tuple[Any, ...]:
        return (sglang_v2.schedule(entry).entry,)

    return {"ATOM" + suffix: (lambda: atom(batch), atom_objects),
            "vLLM" + suffix: (lambda: vllm.schedule(output), vllm_objects),
            SGLANG + suffix: (lambda: sglang.schedule(decode), sglang_objects),
            SGLANG_V2 + suffix: (lambda: sglang_v2.schedule(entry), sglang_v2_objects)}


def engine_floor(view: str, size: int) -> Callable[[], Any]:
    """What the engine itself must read of the object ``view`` reads, whatever specguard
    does: the least any check of that object could add to, written independently of the
    view, with the cheapest C-level reads numpy and the standard library offer.

    * ATOM: its request ids, and every block id written into the ``-1``-padded table
      that attention reads (``(batch, max blocks)``, as the runner builds it);
    * vLLM: the request order, the per-request scheduled counts, the spec tokens
      flattened in that order, and each request's ``num_computed_tokens`` (what
      ``_update_states`` and ``_prepare_inputs`` copy into the input batch);
    * SGLang (both workers): each ``Req``'s ``rid``, in ``batch.reqs`` order (the
      batch's tensors are arrays already: the engine reads them where they are).

    The same floor serves every depth, with a tracker or without: the engine pays it
    anyway.
    """
    if view in (SGLANG, SGLANG_V2):
        reqs = (sglang_batch if view == SGLANG else sglang_v2_batch)(size).reqs
        rid = attrgetter("rid")
        return lambda: tuple(map(rid, reqs))
    if view == "ATOM":
        batch = atom_batch(size)
        ids, tables = batch.req_ids, batch.block_tables

        def read_atom() -> Any:
            lengths = np.fromiter(map(len, tables), dtype=np.int64, count=len(tables))
            width = int(lengths.max(initial=0))
            padded = np.full((len(tables), width), -1, dtype=np.int32)
            padded[np.arange(width)[None, :] < lengths[:, None]] = np.fromiter(
                chain.from_iterable(tables), dtype=np.int32, count=int(lengths.sum()))
            return np.fromiter(ids, dtype=np.int64, count=len(ids)), padded

        return read_atom
    output = scheduler_output(size)
    counts, drafts = output.num_scheduled_tokens, output.scheduled_spec_decode_tokens
    computed = output.scheduled_cached_reqs.num_computed_tokens

    def read_vllm() -> Any:
        order = tuple(counts)
        scheduled = np.fromiter(counts.values(), dtype=np.int64, count=len(counts))
        spec = np.fromiter(chain.from_iterable(map(drafts.get, order, repeat(()))),
                           dtype=np.int64)
        return order, scheduled, spec, np.fromiter(computed, dtype=np.int64,
                                                   count=len(computed))

    return read_vllm


def view_costs(size: int, depths: tuple[str, ...], *, repeats: int, target_s: float,
               clock: Callable[[], float]) -> list[dict[str, Any]]:
    """One entry per view and depth, with a StepTracker (the view named
    ``"<view> + StepTracker"``) and without: the view's call against its engine-read
    floor (:func:`engine_floor`), with the validation of what it built for scale."""
    found = []
    views = [*_views(size).items(), *_views(size, tracked=True).items()]
    floors = {name: engine_floor(name, size) for name in ("ATOM", "vLLM", SGLANG, SGLANG_V2)}
    for name, (call, objects) in views:
        for depth in depths:
            config = _config(depth)
            floor = floors[name.removesuffix(WITH_TRACKER)]
            with contracts.checking(mode="strict", depth=depth):
                built = objects()
                ns = {"call": call, "check": _validate_all, "objects": built, "config": config,
                      "floor": floor}
                timings = interleave({
                    "view": Case("call()", ns),
                    "validation": Case("check(objects, config)", ns),
                    "floor": Case("floor()", ns),
                }, repeats=repeats, target_s=target_s, clock=clock)
            found.append({
                "view": name, "depth": depth, "batch": size,
                "view_us": timings.median("view") * _US,
                "validation_us": timings.median("validation") * _US,
                "engine_floor_us": timings.median("floor") * _US,
                "ratio_to_engine_floor": timings.ratio("view", "floor"),
            })
    return found


def from_mapping_costs(size: int, *, repeats: int, target_s: float,
                       clock: Callable[[], float]) -> dict[str, Any]:
    """``DraftTokens.from_mapping`` from each engine form, against ``np.array`` of the rows."""
    rng = np.random.default_rng(size)
    ids = rng.permutation(4 * size)[:size].astype(np.int64)
    with_rows = ids[np.sort(rng.permutation(size)[: size - size // 10])]
    rows = rng.integers(0, VOCAB_SIZE, (with_rows.shape[0], MTP_K)).astype(np.int32)
    as_lists = dict(zip(with_rows.tolist(), rows.tolist(), strict=True))
    as_arrays = dict(zip(with_rows.tolist(), rows, strict=True))
    build = contracts.DraftTokens.from_mapping
    ns = {"build": build, "ids": ids, "lists": as_lists, "arrays": as_arrays,
          "k": MTP_K, "v": VOCAB_SIZE, "np": np, "values": list(as_lists.values())}
    cases = {
        "np_array": Case("np.array(values, dtype=np.int32)", ns),
        "lists": Case("build(ids, lists, mtp_k=k, vocab_size=v, placeholder=0)", ns),
        "arrays": Case("build(ids, arrays, mtp_k=k, vocab_size=v, placeholder=0)", ns),
    }
    from_rows = getattr(contracts.DraftTokens, "from_rows", None)
    if from_rows is not None:  # the dense form (absent before it existed)
        ns.update({"from_rows": from_rows, "rows": rows, "with_rows": with_rows})
        cases["dense"] = Case("from_rows(ids, rows, rows_for=with_rows, mtp_k=k, vocab_size=v, "
                              "placeholder=0)",
                              ns)
    with contracts.checking(mode="strict", depth="metadata"):
        timings = interleave(cases, repeats=repeats, target_s=target_s, clock=clock)
    entry: dict[str, Any] = {"batch": size, "np_array_us": timings.median("np_array") * _US}
    for name in cases:
        if name != "np_array":
            entry[f"{name}_us"] = timings.median(name) * _US
            entry[f"{name}_ratio"] = timings.ratio(name, "np_array")
    return entry


#: Run in a fresh interpreter: the importing thread's CPU time of each import, one by one.
_TIME_IMPORTS = """
import sys, time
for name in sys.argv[1:]:
    start = time.thread_time()
    __import__(name)
    print(time.thread_time() - start)
"""


def _import_cpu_s(*modules: str, env: dict[str, str]) -> list[float]:
    """CPU seconds the importing thread spends on each of ``modules``, in a fresh interpreter.

    The importing thread's time, not the process's: numpy starts its BLAS worker threads at
    import, and they spin on the other cores for as long as the process lives. Process CPU
    time charges that spinning to whatever is imported after numpy.
    """
    done = subprocess.run([sys.executable, "-c", _TIME_IMPORTS, *modules], check=True,
                          env=env, capture_output=True, text=True)
    return [float(line) for line in done.stdout.split()]


def import_cost(repeats: int) -> dict[str, Any]:
    """CPU time of ``import specguard.contracts`` in fresh interpreters.

    As after any install, bytecode is cached (in a private cache directory, warmed once,
    whatever ``PYTHONDONTWRITEBYTECODE`` says): compiling sources is not an import cost a
    user pays twice. Measured two ways: the whole import on its own, and numpy first, then
    specguard's modules beyond it (what an engine, which has numpy, pays).
    """
    with tempfile.TemporaryDirectory() as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        _import_cpu_s("specguard.contracts", env=env)  # warm the bytecode cache
        alone: list[float] = []
        numpy: list[float] = []
        beyond: list[float] = []
        for _ in range(max(repeats, 1)):
            alone += _import_cpu_s("specguard.contracts", env=env)
            first, then = _import_cpu_s("numpy", "specguard.contracts", env=env)
            numpy.append(first)
            beyond.append(then)
        probe = ("import sys, specguard.contracts; print(','.join(m for m in "
                 "('pydantic', 'torch', 'jaxtyping', 'importlib.metadata') if m in sys.modules))")
        loaded = subprocess.run([sys.executable, "-c", probe], check=True, env=env,
                                capture_output=True, text=True).stdout.strip()
    return {
        "import_ms": statistics.median(alone) * 1e3,
        "numpy_ms": statistics.median(numpy) * 1e3,
        # What specguard's own modules add to a process that has numpy (every engine).
        "beyond_numpy_ms": statistics.median(beyond) * 1e3,
        "loads": [m for m in loaded.split(",") if m],
    }
