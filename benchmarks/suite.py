"""Every measurement of ``specguard bench``, taken in one run, as one JSON-ready report."""

from __future__ import annotations

import contextlib
import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from specguard import contracts
from specguard.benchmarks import adapter_costs, floor, rule_costs
from specguard.benchmarks.agreement import disagreements
from specguard.benchmarks.engine import QUICK_WORKLOAD, engine_overhead
from specguard.benchmarks.ranks import QUICK_RANKS, rank_collective_cost
from specguard.benchmarks.timing import Case, Timings, interleave
from specguard.benchmarks.workload import (
    BLOCK_SIZE,
    MTP_K,
    VOCAB_SIZE,
    Fields,
    build,
    decode_batch,
    to_torch,
)

__all__ = ["Settings", "run_suite"]

Progress = Callable[[str], None]

_US = 1e6


@dataclass(frozen=True)
class Settings:
    """What to measure and how hard."""

    sizes: tuple[int, ...] = (8, 128, 1024, 8192, 65536)
    backends: tuple[str, ...] = ("numpy", "torch")
    #: Seqs per batch handed to the engine views (ATOM, vLLM).
    view_batch: int = 4096
    #: Batch sizes of the DraftTokens builders.
    mapping_sizes: tuple[int, ...] = (8, 1024, 65536)
    #: Decode seqs of the per-rule costs.
    rule_sizes: tuple[int, ...] = (8, 1024, 8192)
    #: Fresh interpreters per import timing.
    import_repeats: int = 7
    repeats: int = 21
    target_s: float = 0.01
    #: Overrides of ``specguard run``'s default workload (None: the defaults).
    engine_workload: dict[str, int] | None = None
    #: Runs of fresh engines whose per-step ratios are pooled (see benchmarks.engine).
    engine_passes: int = 3
    clock: Callable[[], float] = time.process_time

    @classmethod
    def quick(cls) -> Settings:
        """A smoke run: two small batches, few short repeats."""
        return cls(sizes=(8, 128), repeats=3, target_s=0.0005,
                   engine_workload=QUICK_WORKLOAD, view_batch=64, mapping_sizes=(8, 128),
                   import_repeats=1, rule_sizes=(8, 64), engine_passes=1)

    @property
    def clock_name(self) -> str:
        """How the clock is described in the report."""
        return "process CPU time" if self.clock is time.process_time else "wall-clock time"


@contextlib.contextmanager
def _one_torch_thread() -> Iterator[None]:
    """Validation is single-threaded work; keep torch's thread pool out of the timings."""
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def machine() -> dict[str, Any]:
    """The machine and the versions the figures were measured with."""
    import beartype
    import jaxtyping
    import pydantic
    import torch

    return {
        "cpu": _cpu_name(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "numpy": np.__version__,
        "torch": torch.__version__,
        "pydantic": pydantic.__version__,
        "jaxtyping": _version("jaxtyping", jaxtyping),
        "beartype": beartype.__version__,
        "platform": platform.platform(terse=True),
    }


def _version(name: str, module: Any) -> str:
    """A package's version from its metadata (not every package sets ``__version__``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return str(getattr(module, "__version__", "unknown"))


def _cpu_name() -> str:
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _fields(size: int, backend: str) -> Fields:
    fields = decode_batch(size)
    return to_torch(fields) if backend == "torch" else fields


def _interleave(cases: dict[str, Case], settings: Settings) -> Timings:
    return interleave(cases, repeats=settings.repeats, target_s=settings.target_s,
                      clock=settings.clock)


def _peak_bytes(check: Callable[[], object]) -> int:
    """Peak memory ``check`` allocates beyond what is already live (numpy is traced)."""
    check()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        check()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def _validation_row(size: int, backend: str, settings: Settings) -> dict[str, Any]:
    from specguard.benchmarks.naive import naive_batch

    fields = _fields(size, backend)
    problems = disagreements(fields)
    if problems:
        raise RuntimeError("checkers disagree, the comparison would be unfair: "
                           + "; ".join(problems))
    batch = build(fields)
    check = floor.check if backend == "numpy" else floor.check_torch
    metadata = contracts.Config(mode=contracts.Mode.STRICT, depth=contracts.Depth.METADATA)
    default = contracts.Config(mode=contracts.Mode.STRICT)
    ns = {"validate": contracts.validate, "b": batch, "check": check, "f": fields,
          "build": contracts.ScheduledBatch, "naive": naive_batch, "metadata": metadata,
          "default": default}
    # Two comparisons, each interleaved on its own: the naive baseline allocates far
    # more than the rest and would disturb the floor comparison's caches.
    against_floor = {
        "floor": Case("check(b)", ns),
        "full": Case("validate(b)", ns),
        "metadata": Case("validate(b, config=metadata)", ns),
        "default": Case("validate(b, config=default)", ns),
    }
    against_naive = {"construct": Case("build(**f)", ns), "naive": Case("naive(**f)", ns)}
    with contracts.checking(mode="strict", depth="full", collect="first"):
        floor_timings = _interleave(against_floor, settings)
        naive_timings = _interleave(against_naive, settings)
        traced = backend == "numpy"
        peak = _peak_bytes(lambda: contracts.validate(batch)) if traced else None
        floor_peak = _peak_bytes(lambda: check(batch)) if traced else None
    token_bytes = sum(int(fields[n].nbytes) for n in ("token_ids", "draft_token_ids"))
    row: dict[str, Any] = {"backend": backend, "batch": size}
    row.update({f"{name}_us": floor_timings.median(name) * _US for name in against_floor})
    row.update({f"{name}_us": naive_timings.median(name) * _US for name in against_naive})
    row.update({
        "full_vs_floor": floor_timings.ratio("full", "floor"),
        "naive_vs_construct": naive_timings.ratio("naive", "construct"),
        "peak_bytes": peak,
        "floor_peak_bytes": floor_peak,
        "token_bytes": token_bytes,
    })
    return row


def token_stream_memory(num_tokens: int = 1 << 18) -> dict[str, Any]:
    """Peak extra memory of validating four seqs whose token stream is ``num_tokens`` ids.

    One prefill chunk carries almost the whole stream: if any rule copied a token array
    (or built a per-token temporary), the peak would be of the stream's size.
    """
    fields = decode_batch(4, num_prefill=1)
    chunk = num_tokens - 3 * (MTP_K + 1)
    scheduled = fields["num_scheduled_tokens"].copy()
    context = fields["context_lens"].copy()
    scheduled[0], context[0] = chunk, chunk
    needed = -(-context // BLOCK_SIZE)
    tables = np.full((4, int(needed.max())), -1, dtype=np.int32)
    for row, count in enumerate(needed.tolist()):
        tables[row, :count] = np.arange(count) + row * tables.shape[1]
    tokens = np.random.default_rng(1).integers(0, VOCAB_SIZE, num_tokens).astype(np.int32)
    batch = build({**fields, "num_scheduled_tokens": scheduled, "context_lens": context,
                   "block_tables": tables, "token_ids": tokens, "num_tokens": num_tokens})
    with contracts.checking(mode="strict", depth="full", collect="first"):
        peak = _peak_bytes(lambda: contracts.validate(batch))
    return {"num_seqs": 4, "num_tokens": num_tokens, "token_bytes": int(tokens.nbytes),
            "peak_bytes": peak}


def _execute(self: Any, batch: contracts.ScheduledBatch) -> int:
    """A runner method: reads one field of the batch it is handed."""
    return batch.num_tokens


def mode_off(settings: Settings) -> dict[str, Any]:
    """A method guarded while the mode is off, against the same method undecorated."""
    from specguard.adapters import guard

    with contracts.checking(mode="off"):
        decorated_off = guard(batch=contracts.ScheduledBatch)(_execute)
    with contracts.checking(mode="strict", depth="metadata"):
        decorated_strict = guard(batch=contracts.ScheduledBatch)(_execute)
    plain = type("Runner", (), {"execute": _execute})()
    off = type("Runner", (), {"execute": decorated_off})()
    strict = type("Runner", (), {"execute": decorated_strict})()
    by_hand = type("Runner", (), {"execute": floor.guarded_by_hand(_execute)})()
    ns = {"plain": plain, "off": off, "strict": strict, "by_hand": by_hand,
          "b": build(decode_batch(128))}
    cases = {
        "plain": Case("plain.execute(b)", ns),
        "off": Case("off.execute(b)", ns),
        "strict": Case("strict.execute(b)", ns),
        "by_hand": Case("by_hand.execute(b)", ns),
    }
    with contracts.checking(mode="strict", depth="metadata"):
        timings = _interleave(cases, settings)
    with contracts.checking(mode="strict"):  # the default depth
        default = _interleave({"strict": cases["strict"]}, settings)
    return {
        "identity": decorated_off is _execute,
        "plain_us": timings.median("plain") * _US,
        "off_us": timings.median("off") * _US,
        "strict_metadata_us": timings.median("strict") * _US,
        "strict_default_us": default.median("strict") * _US,
        # The floor of a guarded call: the same method guarded by hand (a switch, a type
        # check and the batch's metadata, checked in straight-line code).
        "by_hand_us": timings.median("by_hand") * _US,
        "strict_vs_by_hand": timings.median("strict") / timings.median("by_hand"),
    }


def _target(text: str, value: Any, met: bool) -> dict[str, Any]:
    return {"target": text, "value": value, "met": bool(met)}


def _targets(rows: list[dict[str, Any]], off: dict[str, Any], engine: dict[str, Any]
             ) -> list[dict[str, Any]]:
    found = []
    for row in rows:
        where = f"{row['backend']} B={row['batch']}"
        ratio = row["full_vs_floor"]
        if row["backend"] == "numpy":
            limit = 1.5 if row["batch"] >= 1024 else 2.0
            found.append(_target(f"full ≤ {limit}× floor, {where}", ratio, ratio <= limit))
            found.append(_target(f"full ≤ 1.2× floor, {where}", ratio, ratio <= 1.2))
        found.append(_target(f"faster than the naive baseline, {where}",
                             row["naive_vs_construct"], row["naive_vs_construct"] > 1))
    found.append(_target("mode off is the original function", off["identity"],
                         off["identity"]))
    found.append(_target("a strict guarded call at metadata depth ≤ 2× the same call "
                         "guarded by hand", off["strict_vs_by_hand"],
                         off["strict_vs_by_hand"] <= 2)
                 | {"note": f"{off['strict_metadata_us']:.2f} µs against "
                            f"{off['by_hand_us']:.2f} µs by hand"})
    # A smoke workload's steps are a few milliseconds: too short to judge the overhead.
    if engine.get("available") and not engine.get("smoke"):
        # Full depth's bound is the default configuration's doubled.
        for name, label, limit in (("strict", "metadata depth", 3),
                                   ("strict_full", "full depth", 2)):
            overhead = engine[f"{name}_overhead"]
            found.append(_target(f"engine step time, strict vs off ≤ +{limit}% ({label})",
                                 overhead, overhead <= limit / 100))
        overhead = engine["strict_default_overhead"]
        found.append(_target("engine step time, default configuration vs off ≤ +1%",
                             overhead, overhead <= 0.01))
    return found


def _around_targets(views: list[dict[str, Any]], mapping: list[dict[str, Any]],
                    imported: dict[str, Any]) -> list[dict[str, Any]]:
    """Targets of the costs around validation: views, the draft-row builder, the import."""
    found = []
    for entry in views:
        where = f"{entry['view']} view at B={entry['batch']}, {entry['depth']} depth"
        ratio = entry["ratio_to_engine_floor"]
        if entry["depth"] == "metadata" and not entry["view"].endswith(adapter_costs.WITH_TRACKER):
            # Metadata reads no value: a fraction of what the engine reads of the batch.
            found.append(_target(f"{where} ≤ ½ its engine-read floor", ratio, ratio <= 0.5)
                         | {"note": f"{entry['view_us']:.0f} µs"})
        found.append(_target(f"{where} ≤ 2× its engine-read floor", ratio, ratio <= 2)
                     | {"note": "the floor: what the engine reads of the same object anyway"})
    for entry in mapping:
        if entry["batch"] < 1024:
            continue
        for form in ("lists", "arrays", "dense"):
            if f"{form}_ratio" in entry:
                ratio = entry[f"{form}_ratio"]
                found.append(_target(
                    f"DraftTokens from {_FORMS[form]} ≤ 2× np.array of the rows, "
                    f"B={entry['batch']}", ratio, ratio <= 2))
    # The floor of the import is numpy's own, which every engine has loaded already.
    ratio = imported["import_ms"] / imported["numpy_ms"]
    found.append(_target("import specguard.contracts ≤ 2× numpy's own import (CPU of the "
                         "importing thread)", ratio, ratio <= 2)
                 | {"note": f"{imported['import_ms']:.0f} ms; numpy's own import: "
                            f"{imported['numpy_ms']:.0f} ms; specguard's modules beyond it: "
                            f"{imported['beyond_numpy_ms']:.0f} ms"})
    return found


_FORMS = {"lists": "a dict of lists", "arrays": "a dict of arrays",
          "dense": "dense rows and their seq ids (from_rows)"}


def run_suite(settings: Settings, progress: Progress) -> dict[str, Any]:
    """Measure everything; ``progress`` hears one line per step."""
    rows = []
    with _one_torch_thread():
        for backend in settings.backends:
            for size in settings.sizes:
                progress(f"validation: {backend} B={size}")
                rows.append(_validation_row(size, backend, settings))
        progress("mode off")
        off = mode_off(settings)
        progress("memory: four seqs, a long token stream")
        memory = token_stream_memory()
        progress(f"engine views at B={settings.view_batch}")
        views = adapter_costs.view_costs(settings.view_batch, _DEPTHS, repeats=settings.repeats,
                                         target_s=settings.target_s, clock=settings.clock)
        mapping = []
        for size in settings.mapping_sizes:
            progress(f"DraftTokens builders: B={size}")
            mapping.append(adapter_costs.from_mapping_costs(
                size, repeats=settings.repeats, target_s=settings.target_s,
                clock=settings.clock))
        progress(f"each rule on its own: B={', '.join(map(str, settings.rule_sizes))}")
        rules = rule_costs.rule_costs(settings.rule_sizes, repeats=settings.repeats,
                                      clock=settings.clock)
        progress("import specguard.contracts in fresh interpreters")
        imported = adapter_costs.import_cost(settings.import_repeats)
        progress("engine steps: off, strict (metadata, default, full depth) in lockstep")
        engine = engine_overhead(settings.engine_workload, settings.clock,
                                 passes=settings.engine_passes)
        engine["smoke"] = settings.engine_workload is not None
        progress("data-parallel ranks: the contracts' collective per step")
        quick = settings.engine_workload is not None
        dp = rank_collective_cost(QUICK_RANKS if quick else None)
    return {
        "machine": machine(),
        "settings": {"sizes": list(settings.sizes), "mtp_k": MTP_K, "vocab_size": VOCAB_SIZE,
                     "repeats": settings.repeats, "target_ms": settings.target_s * 1e3,
                     "clock": settings.clock_name, "torch_threads": 1},
        "validation": rows,
        "mode_off": off,
        "memory": memory,
        "adapters": views,
        "from_mapping": mapping,
        "rules": rules,
        "import": imported,
        "engine": engine,
        "dp": dp,
        "targets": _targets(rows, off, engine) + _around_targets(views, mapping, imported)
        + [_target("no copy of the token arrays: peak extra memory ≤ 1/16 of a long "
                   "token stream", memory["peak_bytes"] / memory["token_bytes"],
                   memory["peak_bytes"] <= memory["token_bytes"] / 16)],
    }


_DEPTHS = tuple(depth.value for depth in contracts.Depth)
