"""What each rule costs on its own: the check of every rule, timed on clean objects of B seqs.

The objects are those of two consecutive decode steps of ``B`` seqs, built the way an
engine hands them over and all clean: the scheduler's batch and its draft rows, the
target model's and the drafter's inputs, the verifier's rows and the drafter's
proposals, and what a :class:`~specguard.adapters.StepTracker` builds from them (the
step-to-step objects). Every object is captured as it is built, so a rule is timed on
exactly what validation hands it; a rule with no object in this workload (an engine's
layout rule, the data-parallel rules) is listed without a figure, and why.

A rule's figure is its check alone (``rule.check(object, values)``), the median of
interleaved repeats: what the default depth pays for it when it runs on its own, before
any clearance fuses it with its neighbours. The depth is the rule's registered depth.
"""

from __future__ import annotations

import contextlib
import statistics
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np

from specguard import contracts
from specguard.benchmarks.workload import BLOCK_SIZE, MAX_CONTEXT, MTP_K, VOCAB_SIZE, decode_batch
from specguard.contracts._core import _compiled

__all__ = ["rule_costs", "step_objects"]

_US = 1e6


def _block_tables(context: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    width = -(-MAX_CONTEXT // BLOCK_SIZE)
    needed = -(-context // BLOCK_SIZE)
    ids = rng.permutation(context.shape[0] * width).astype(np.int32).reshape(-1, width)
    return np.where(np.arange(width)[None, :] < needed[:, None], ids, np.int32(-1))


def _model_inputs(batch: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The target's and the drafter's inputs of a decode batch: every seq's span of
    ``mtp_k + 1`` tokens at its last positions, one slot per token, and the drafter's
    first pass with its attention metadata."""
    scheduled, context = batch["num_scheduled_tokens"], batch["context_lens"]
    n, total = scheduled.shape[0], int(batch["num_tokens"])
    starts = np.concatenate([[0], np.cumsum(scheduled)]).astype(np.int32)
    first = np.repeat(context - scheduled, scheduled)
    offset = np.arange(total, dtype=np.int32) - np.repeat(starts[:-1], scheduled)
    positions = (first + offset).astype(np.int32)
    common = {"vocab_size": VOCAB_SIZE, "num_tokens": total,
              "seq_ids": batch["seq_ids"], "input_ids": batch["token_ids"],
              "positions": positions, "query_start_loc": starts}
    target = {**common, "num_slots": 2 * total,
              "slot_mapping": np.arange(total, dtype=np.int32)}
    # The first pass's attention metadata: each seq's context ends at its span's end.
    seq_lens = context.astype(np.int32)
    drafter = {**common, "sample_indices": (starts[1:] - 1).astype(np.int32),
               "seq_lens": seq_lens, "max_seq_len": int(seq_lens.max(initial=0)),
               "draft_step": 0}
    assert drafter["sample_indices"].shape[0] == n
    return target, drafter


def _verified(batch: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """The verifier's rows: each seq accepts up to its real drafts, then one token."""
    drafts, counts = batch["draft_token_ids"], batch["num_drafts"]
    accepted = (rng.random(counts.shape[0]) * (counts + 1)).astype(np.int32)
    columns = np.arange(MTP_K + 1)[None, :]
    padded = np.concatenate([drafts, np.zeros((drafts.shape[0], 1), np.int32)], axis=1)
    tokens = np.where(columns < accepted[:, None], padded, np.int32(-1))
    bonus = rng.integers(0, VOCAB_SIZE, counts.shape[0]).astype(np.int32)
    tokens[np.arange(counts.shape[0]), accepted] = bonus
    return {"mtp_k": MTP_K, "vocab_size": VOCAB_SIZE, "seq_ids": batch["seq_ids"],
            "token_ids": tokens, "num_accepted": accepted}


def _next_batch(batch: dict[str, Any], verified: dict[str, Any], proposals: np.ndarray,
                rng: np.random.Generator) -> dict[str, Any]:
    """The following step: every seq moved on by its accepted drafts plus one, carrying
    all of the drafter's proposals, its anchor the token it was just given."""
    accepted = verified["num_accepted"]
    context = (batch["context_lens"] + accepted + 1).astype(np.int32)
    n, q = context.shape[0], MTP_K + 1
    anchors = verified["token_ids"][np.arange(n), accepted]
    tokens = np.concatenate([anchors[:, None], proposals], axis=1).reshape(-1)
    return {**batch, "context_lens": context, "block_tables": _block_tables(context, rng),
            "token_ids": tokens.astype(np.int32), "draft_token_ids": proposals,
            "num_drafts": np.full(n, MTP_K, dtype=np.int32), "num_tokens": n * q}


@contextlib.contextmanager
def _captured() -> Iterator[dict[str, list[Any]]]:
    """Every boundary object validated while the block runs, by class name."""
    from specguard.contracts._core import _contract

    found: dict[str, list[Any]] = {}
    validate = getattr(_contract, "validate")  # what __post_init__ calls  # noqa: B009

    def keep(obj: Any, **options: Any) -> Any:
        found.setdefault(type(obj).__name__, []).append(obj)
        return validate(obj, **options)

    setattr(_contract, "validate", keep)  # noqa: B010
    try:
        yield found
    finally:
        setattr(_contract, "validate", validate)  # noqa: B010


def step_objects(size: int, *, seed: int = 0) -> dict[str, Any]:
    """The clean objects of two consecutive decode steps of ``size`` seqs, by class (the
    first one built of each), every one validated strictly at full depth as it is built."""
    from specguard.adapters import StepTracker

    rng = np.random.default_rng(seed)
    first = decode_batch(size, seed=seed)
    first["context_lens"] = np.minimum(first["context_lens"], MAX_CONTEXT - 2 * (MTP_K + 1))
    first["block_tables"] = _block_tables(first["context_lens"], rng)
    tracker = StepTracker()
    # Numpy answers while the objects are collected: the tracker's fused kernels would
    # vouch for its clean objects without building them, and these are what is timed.
    with contracts.checking(mode="strict", depth="full"), _captured() as found, \
            _compiled.switched_off():
        batch = first
        for _ in range(2):
            scheduled = contracts.ScheduledBatch(**batch)
            contracts.DraftTokens(mtp_k=MTP_K, vocab_size=VOCAB_SIZE,
                                  seq_ids=batch["draft_seq_ids"],
                                  draft_token_ids=batch["draft_token_ids"],
                                  num_drafts=batch["num_drafts"])
            tracker.schedule(scheduled)
            target, drafter = _model_inputs(batch)
            contracts.ModelInput(**target)
            contracts.DrafterInput(**drafter)
            verified = _verified(batch, rng)
            tracker.verified(contracts.VerifyOutput(**verified))
            _hand_overs(verified, size)
            proposals = rng.integers(0, VOCAB_SIZE, (size, MTP_K)).astype(np.int32)
            tracker.drafted(contracts.DrafterOutput(
                mtp_k=MTP_K, vocab_size=VOCAB_SIZE, seq_ids=batch["seq_ids"],
                draft_token_ids=proposals))
            batch = _next_batch(batch, verified, proposals, rng)
        _engine_views(size, seed)
    return {name: objects[0] for name, objects in found.items()}


def _hand_overs(verified: dict[str, Any], size: int) -> None:
    """The logits rows of ``size`` decode seqs, every one under a grammar, and the tokens
    each is given (no stop id; far from its limit)."""
    q = MTP_K + 1
    contracts.LogitsRows(num_logits=size * q, num_rows=size * q, seq_ids=verified["seq_ids"],
                         num_drafts=np.full(size, MTP_K, dtype=np.int32),
                         row_starts=np.arange(size, dtype=np.int32) * q,
                         row_counts=np.full(size, q, dtype=np.int32))
    emitted = verified["num_accepted"] + 1
    contracts.RequestOutput(vocab_size=VOCAB_SIZE, seq_ids=verified["seq_ids"],
                            token_ids=verified["token_ids"], num_emitted=emitted,
                            num_generated=np.zeros(size, dtype=np.int32),
                            max_new_tokens=np.full(size, 1 << 20, dtype=np.int32),
                            stop_token_ids=np.full((size, 1), -1, dtype=np.int32),
                            finished=np.zeros(size, dtype=bool))


def _engine_views(size: int, seed: int) -> None:
    """The engine views' own objects (their layout rules) for a decode batch of ``size``:
    ATOM's ``ScheduledBatch``, vLLM's ``SchedulerOutput`` and both SGLang workers'
    decode batches as the adapter benchmark builds them."""
    from specguard.adapters import AtomView, SglangV2View, SglangView, VllmView
    from specguard.benchmarks.adapter_costs import (
        atom_batch,
        scheduler_output,
        sglang_batch,
        sglang_v2_batch,
    )

    AtomView(mtp_k=MTP_K, vocab_size=VOCAB_SIZE, block_size=BLOCK_SIZE)(atom_batch(size, seed=seed))
    VllmView(mtp_k=MTP_K, vocab_size=VOCAB_SIZE).schedule(scheduler_output(size, seed=seed))
    SglangView(spec_steps=MTP_K, vocab_size=VOCAB_SIZE).schedule(sglang_batch(size, seed=seed))
    SglangV2View(spec_steps=MTP_K, vocab_size=VOCAB_SIZE).schedule(
        sglang_v2_batch(size, seed=seed))
    _mrv2_step(size, np.random.default_rng(seed))
    _ranks(size)


#: Data-parallel ranks of the rank-agreement workload; the seqs are spread over them.
RANKS = 8


def _ranks(size: int) -> None:
    """The rows :func:`~specguard.adapters.check_ranks` gathers in one step of
    :data:`RANKS` ranks sharing ``size`` seqs, each sending all of its seq ids."""
    from specguard.adapters import RankStep, check_ranks

    per_rank = max(size // RANKS, 1)
    q = MTP_K + 1
    across = np.full(RANKS, per_rank * q, dtype=np.int64)
    contracts.TokensAcrossRanks(dp_size=RANKS, dp_rank=0, own_tokens=per_rank * q,
                                tokens_across_ranks=across)
    steps = [RankStep(5, MTP_K, per_rank * q, per_rank * q, False, q,
                      np.arange(rank, per_rank * RANKS, RANKS), tokens_across_ranks=across)
             for rank in range(RANKS)]
    check_ranks(np.stack([step.row(id_slots=per_rank) for step in steps]))


def _mrv2_step(size: int, rng: np.random.Generator) -> None:
    """Model Runner V2's ``InputBatch``, ``SamplerOutput`` and next drafts for ``size``
    requests verifying ``mtp_k`` drafts each (host arrays where MRV2 has device tensors:
    the same rules, answered at once instead of deferred)."""
    from specguard.adapters import Mrv2View

    q = MTP_K + 1
    counts = np.full(size, q, dtype=np.int32)
    starts = np.arange(size + 1, dtype=np.int32) * q
    computed = rng.integers(q, MAX_CONTEXT // 2, size).astype(np.int32)
    batch = SimpleNamespace(
        req_ids=[f"req-{i}" for i in range(size)], num_tokens=size * q,
        idx_mapping_np=rng.permutation(size).astype(np.int32), num_scheduled_tokens=counts,
        num_draft_tokens_per_req=np.full(size, MTP_K, dtype=np.int32),
        query_start_loc_np=starts, cu_num_logits_np=starts.copy(),
        logits_indices=np.arange(size * q, dtype=np.int64),
        input_ids=rng.integers(0, VOCAB_SIZE, size * q).astype(np.int64),
        query_start_loc=starts.copy(), num_computed_tokens_np=computed,
        prefill_len_np=np.minimum(computed, 8).astype(np.int32))
    accepted = rng.integers(0, MTP_K + 1, size).astype(np.int32)
    sampled = rng.integers(0, VOCAB_SIZE, (size, q)).astype(np.int64)
    view = Mrv2View(mtp_k=MTP_K, vocab_size=VOCAB_SIZE)
    checked = view.schedule(batch, max_num_reqs=size)
    view.verified(checked, SimpleNamespace(sampled_token_ids=sampled,
                                           num_sampled=accepted + 1,
                                           num_rejected=MTP_K - accepted))
    view.drafted(checked, rng.integers(0, VOCAB_SIZE, (size, MTP_K)).astype(np.int64),
                 num_speculative_tokens=MTP_K)


def _time(check: Callable[[], object], repeats: int, clock: Callable[[], float]) -> float:
    """The median seconds of one call, each sample long enough for the clock."""
    calls = 1
    while True:
        start = clock()
        for _ in range(calls):
            check()
        if clock() - start >= 2e-4 or calls >= 1 << 14:
            break
        calls *= 4
    samples = []
    for _ in range(repeats):
        start = clock()
        for _ in range(calls):
            check()
        samples.append((clock() - start) / calls)
    return statistics.median(samples)


def rule_costs(sizes: tuple[int, ...], *, repeats: int,
               clock: Callable[[], float]) -> list[dict[str, Any]]:
    """Per rule: its code, its depth, the µs of its check at each size at that depth
    (None where the workload has no object it applies to, with a note saying so) and,
    for a rule whose check reads further at full depth, its µs there too."""
    from specguard.contracts._core._config import Config, Depth
    from specguard.contracts._core._values import ValueChecks

    objects = {size: step_objects(size) for size in sizes}
    configs = {depth: Config(mode=contracts.Mode.STRICT, depth=depth)
               for depth in (Depth.ESSENTIAL, Depth.FULL)}
    rows = []
    for code, rule in sorted(contracts.REGISTRY.items()):
        if rule.check is None:
            continue
        row: dict[str, Any] = {"code": code, "depth": rule.depth.value, "us": {}}
        depths = {"us": max(rule.depth, Depth.ESSENTIAL, key=_DEPTHS.index)}
        if rule.deeper and rule.depth is not Depth.FULL:
            row["us_full"] = {}
            depths["us_full"] = Depth.FULL
        for size in sizes:
            subject = next((s for s in rule.applies_to if s in objects[size]), None)
            for key, depth in depths.items():
                row[key][size] = None if subject is None else _rule_us(
                    rule, objects[size][subject], subject, configs[depth], ValueChecks,
                    repeats, clock, size)
        if all(v is None for v in row["us"].values()):
            row["note"] = "no object of this workload (" + ", ".join(rule.applies_to) + ")"
        rows.append(row)
    return rows


_DEPTHS = list(contracts.Depth)


def _rule_us(rule: Any, obj: Any, subject: str, config: Any, values: Any, repeats: int,
             clock: Callable[[], float], size: int) -> float:
    target = type(obj).__sg_plan__.rule_target(obj)

    def check() -> Any:
        return rule.check(target, values(config, subject))

    if check() is not None:
        raise AssertionError(f"{rule.code} finds a violation on the clean {subject} of "
                             f"{size} seqs: the workload is wrong")
    return _time(check, repeats, clock) * _US
