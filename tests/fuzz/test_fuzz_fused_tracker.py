"""The step tracker with its fused kernels is the tracker without them, step for step.

The fused kernels (``transition``, ``verify_rows``, ``draft_rows``) stand for deriving,
building and validating the tracker's objects and for the bookkeeping after them. Two
trackers are driven through the same drawn steps, one with the kernels and one in
numpy: after every call they must have raised the same violation (or none) and hold the
same state. The steps are drawn to follow each other most of the time (resumes, drafts
and rows as the previous step left them) and to break one relation now and then, with
ids, dtypes and masks that make the kernels decline.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_switch import CountingKernels, require

from specguard import contracts
from specguard.adapters import StepTracker
from specguard.adapters._step_plan import StepPlan
from specguard.contracts._core import _compiled

_K = 2
_POOL = 7  # seq ids 0..6: seqs leave and come back often


@st.composite
def _steps(draw: Any) -> list[dict[str, Any]]:
    """Up to six steps of a tracked engine, each a plan and what its rows said."""
    positions = dict.fromkeys(range(_POOL), 0)  # where each seq should resume
    earlier = dict.fromkeys(range(_POOL), 0)  # where it stood a move before
    proposals: dict[int, list[int]] = {}
    placeholder = draw(st.sampled_from([None, -1]))
    dtype = draw(st.sampled_from([np.int64, np.int64, np.int32, np.int16]))
    steps = []
    for _ in range(draw(st.integers(1, 6))):
        ids = draw(st.lists(st.integers(0, _POOL - 1), max_size=5,
                            unique=draw(st.integers(0, 9)) > 0))
        n = len(ids)
        phases = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        starts, scheduled, drafts, counts = [], [], [], []
        for seq, decode in zip(ids, phases, strict=True):
            right = positions[seq]
            start = right if draw(st.integers(0, 5)) else draw(st.sampled_from(
                [earlier[seq], right - 1, right + 1, -1, 0]))
            starts.append(start)
            scheduled.append(_K + 1 if decode else draw(st.integers(1, 4)))
            if decode:
                made = proposals.get(seq, [0] * _K)
                row = made if draw(st.integers(0, 5)) else draw(
                    st.lists(st.sampled_from([0, 1, -1]), min_size=_K, max_size=_K))
                drafts.append(list(row))
                counts.append(draw(st.sampled_from([_K, _K, _K, 0, 1, 3])))
        d = len(drafts)
        accepted = draw(st.lists(st.integers(-1, _K + 1), min_size=d, max_size=d))
        verify = [s for s, decode in zip(ids, phases, strict=True) if decode]
        if verify and not draw(st.integers(0, 6)):
            verify = draw(st.permutations(verify))
        drafter = list(ids) if draw(st.integers(0, 6)) else draw(st.permutations(ids))
        made = draw(st.lists(st.lists(st.integers(0, 5), min_size=_K, max_size=_K),
                             min_size=n, max_size=n))
        proposed = draw(st.sampled_from([None, "full", "drawn"]))
        num_proposed = None if proposed is None else np.array(
            [_K] * n if proposed == "full"
            else draw(st.lists(st.integers(0, _K), min_size=n, max_size=n)), dtype=np.int64)
        plan = StepPlan(
            _K, np.array(ids, dtype=dtype), np.array(phases, dtype=bool),
            np.array(starts, dtype=dtype), np.array(scheduled, dtype=np.int64),
            np.array(drafts, dtype=dtype).reshape(d, _K), np.array(counts, dtype=dtype),
            placeholder,
            drafts_handed_over=(np.array(draw(st.lists(st.booleans(), min_size=d,
                                                       max_size=d)), dtype=bool)
                                if not draw(st.integers(0, 4)) else None))
        refilled = (np.array(draw(st.lists(st.booleans(), min_size=d, max_size=d)),
                             dtype=bool) if not draw(st.integers(0, 5)) else None)
        steps.append({"plan": plan, "refilled": refilled,
                      "forwarded": bool(draw(st.integers(0, 6))),
                      "verify": (np.array(verify, dtype=np.int64),
                                 np.array(accepted[:len(verify)], dtype=np.int64)),
                      "draft": (np.array(drafter, dtype=np.int64),
                                np.array(made, dtype=np.int64).reshape(n, _K), num_proposed)})
        # The model moves on as a well-behaved engine would.
        row_of = {seq: i for i, seq in enumerate(drafter)}
        for j, seq in enumerate(s for s, decode in zip(ids, phases, strict=True) if decode):
            earlier[seq] = positions[seq]
            positions[seq] += max(0, min(accepted[j], _K)) + 1
        for seq, decode, count in zip(ids, phases, scheduled, strict=True):
            if not decode:
                earlier[seq] = positions[seq]
                positions[seq] += count
            if seq in row_of:
                proposals[seq] = made[row_of[seq]]
    return steps


def _outcome(call: Any) -> str | None:
    try:
        call()
    except contracts.ContractViolation as error:
        return str(error)
    return None


def _state(tracker: StepTracker) -> list[Any]:
    """Everything the next step is checked against, as plain values."""
    seen: list[Any] = []
    for state in (tracker.previous, getattr(tracker._current, "state", lambda: None)()):
        if state is None:
            seen.append(None)
            continue
        seen.append({name: np.asarray(getattr(state, name)).tolist() for name in (
            "seq_ids", "is_decode", "starts", "advance", "drafted", "proposals",
            "num_proposed")})
    seen.append(tracker._memory.ends(np.arange(_POOL, dtype=np.int64)).tolist())
    seen.append(sorted(tracker._short_proposals.items()))
    return seen


def _drive(steps: list[dict[str, Any]], depth: str, **options: bool) -> list[Any]:
    tracker, record = StepTracker(**options), []
    with contracts.checking(mode="strict", depth=depth):
        for step in steps:
            record.append(_outcome(lambda s=step: tracker.schedule(
                s["plan"], refilled=s["refilled"], forwarded=s["forwarded"])))
            record.append(_outcome(lambda s=step: tracker.verify_rows(*s["verify"])))
            record.append(_outcome(lambda s=step: tracker.draft_rows(
                *s["draft"][:2], num_proposed=s["draft"][2])))
            record.append(_state(tracker))
    return record


@pytest.mark.parametrize("depth", ["essential", "full"])
@settings(max_examples=max(settings().max_examples, 300))
@given(steps=_steps(), progress=st.booleans(), whole=st.booleans())
def test_the_fused_tracker_is_the_numpy_tracker(depth: str, steps: list[dict[str, Any]],
                                                progress: bool, whole: bool) -> None:
    require("compiled")
    options = {"progress": progress, "whole_proposals": whole}
    fused = _drive(steps, depth, **options)
    with _compiled.switched_off():
        plain = _drive(steps, depth, **options)
    assert fused == plain


def test_a_clean_engine_run_takes_the_fused_path_every_step() -> None:
    """The reference engine's clean steps are answered by the kernels, not declined."""
    require("compiled")
    from specguard.benchmarks.engine import QUICK_WORKLOAD, _defaults, _engine

    counting = CountingKernels(_compiled.load_kernels())
    previous, _compiled.KERNELS = _compiled.KERNELS, counting  # type: ignore[assignment]
    try:
        engine = _engine(_defaults(QUICK_WORKLOAD))
        with contracts.checking(mode="strict", depth="essential"):
            while engine.scheduler.has_unfinished():
                engine.step()
    finally:
        _compiled.KERNELS = previous
    steps = engine.runner.num_forwards
    assert steps > 3
    assert counting.answers[("transition", True)] == steps - 1
    assert counting.answers[("draft_rows", True)] == steps
    assert counting.answers[("verify_rows", True)] >= steps - 2  # steps with decode rows
    assert not any(verdict is not True for (name, verdict) in counting.answers
                   if name in ("transition", "verify_rows", "draft_rows"))


def test_a_broken_transition_still_names_its_rule_with_the_kernels() -> None:
    """The kernel's no hands over to the numpy path, which builds the transition and
    raises the rule's own message."""
    require("compiled")
    tracker = StepTracker()
    plan = StepPlan(1, np.array([3]), np.array([True]), np.array([10]), np.array([2]),
                    np.array([[7]]), np.array([1]))
    with contracts.checking(mode="strict", depth="essential"):
        tracker.schedule(plan)
        tracker.verify_rows(np.array([3]), np.array([1]))
        tracker.draft_rows(np.array([3]), np.array([[5]]))
        moved = StepPlan(1, np.array([3]), np.array([True]), np.array([13]),
                         np.array([2]), np.array([[5]]), np.array([1]))
        with pytest.raises(contracts.ContractViolation) as caught:
            tracker.schedule(moved)
    assert "SG601 a seq resumes where its previous step left off" in str(caught.value)
    assert ("seq 3 at batch position 0: starts at position 13, but its previous step "
            "(row 0) left it at 12") in str(caught.value)


def _plan(ids: list[int], decode: list[bool], starts: list[int], scheduled: list[int]
          ) -> StepPlan:
    d = sum(decode)
    return StepPlan(_K, np.array(ids), np.array(decode), np.array(starts),
                    np.array(scheduled), np.zeros((d, _K), dtype=np.int64),
                    np.full(d, _K, dtype=np.int64))


@pytest.mark.parametrize("start", [4, 6])
def test_a_chunk_the_runner_did_not_keep_moves_its_seq_on_for_the_kernel_too(start: int
                                                                           ) -> None:
    """A prefill chunk of a batch the runner did not keep as its previous forward moves
    its seq on (ATOM's middle chunks): its first decode resumes it from the memory (6),
    not from the previous forward (4), in both paths."""
    require("compiled")
    chunks = [
        {"plan": _plan([1], [False], [0], [4]), "forwarded": True},
        {"plan": _plan([1], [False], [4], [2]), "forwarded": False},  # 4 -> 6, not kept
        {"plan": _plan([1], [True], [start], [1 + _K]), "forwarded": True},
    ]
    for chunk in chunks:
        chunk.update(refilled=None, verify=(np.zeros(0, np.int64), np.zeros(0, np.int64)),
                     draft=(np.array([1]), np.zeros((1, _K), np.int64), None))
    fused = _drive(chunks, "essential")
    with _compiled.switched_off():
        plain = _drive(chunks, "essential")
    assert fused == plain
    raised = [outcome for outcome in fused[::4] if outcome is not None]
    if start == 6:
        assert raised == []
    else:
        assert len(raised) == 1
        assert "seq 1 at batch position 0: starts at position 4" in raised[0]
        assert "(expected 6; actual 4)" in raised[0]


_IDS = st.lists(st.integers(-2, 9) | st.sampled_from([2**40, -(2**40)]), max_size=12)


@settings(max_examples=max(settings().max_examples, 300))
@given(reference=_IDS, ids=_IDS, dtype=st.sampled_from([np.int64, np.int32]),
       same=st.booleans())
def test_the_compiled_lookup_finds_the_rows_the_sorted_one_does(
        reference: list[int], ids: list[int], dtype: Any, same: bool) -> None:
    require("compiled")
    from specguard.adapters._step_plan import IdLookup

    kernels = _compiled.load_kernels()
    assert kernels is not None
    with np.errstate(over="ignore"):
        ref = np.array(reference, dtype=np.int64).astype(dtype)
    look = ref.copy() if same else np.array(ids, dtype=np.int64)
    rows = np.full(look.shape[0], 99, dtype=np.int64)
    found = kernels.id_rows(ref, look, rows)
    with _compiled.switched_off():
        expected_rows, expected_same = IdLookup(ref).links(look)
    assert found is expected_same
    assert rows.tolist() == expected_rows.tolist()


@settings(max_examples=max(settings().max_examples, 300))
@given(known=st.lists(st.integers(0, 9), max_size=6, unique=True), ids=st.lists(
    st.integers(0, 9), max_size=8), data=st.data())
def test_the_compiled_touch_leaves_the_memory_the_python_touch_does(
        known: list[int], ids: list[int], data: st.DataObject) -> None:
    require("compiled")
    from specguard.adapters._seq_memory import SeqMemory, _touch_all

    n = len(ids)
    starts = data.draw(st.lists(st.integers(-1, 20), min_size=n, max_size=n))
    moved = data.draw(st.lists(st.integers(-1, 4), min_size=n, max_size=n))
    limit = data.draw(st.integers(len(known), 20))
    compiled, plain = SeqMemory(limit), SeqMemory(limit)
    for memory in (compiled, plain):
        memory._ends.update((seq, seq * 10) for seq in known)
    kernels = _compiled.load_kernels()
    assert kernels is not None
    answer = kernels.touch_ends(
        compiled._ends, np.array(ids, dtype=np.int64), np.array(starts, dtype=np.int64),
        np.array(moved, dtype=np.int64), limit - len(known))
    _touch_all(plain, ids, [s + m if s >= 0 and m >= 0 else -1
                            for s, m in zip(starts, moved, strict=True)])
    if answer is None:  # past the room: seqs would be forgotten, which Python does
        assert len(known) + n > limit
        assert compiled._ends == dict((seq, seq * 10) for seq in known)
    else:
        assert list(compiled._ends.items()) == list(plain._ends.items())


@settings(max_examples=max(settings().max_examples, 300))
@given(batches=st.lists(st.tuples(
    st.lists(st.tuples(st.integers(-3, 40) | st.sampled_from([2**40, -(2**62)]),
                       st.booleans(), st.integers(-1, 3)), max_size=8),
    st.booleans(), st.booleans()), max_size=5), dtype=st.sampled_from([np.int64, np.int32]))
def test_the_compiled_seen_seqs_pass_is_the_numpy_one(batches: list[Any], dtype: Any) -> None:
    """The filter's lookups before its records, only the seqs absent from the previous
    forward, on a filter small enough for ids to share slots."""
    require("compiled")
    from specguard.adapters._seen_seqs import SeenSeqs

    compiled, plain = SeenSeqs(64), SeenSeqs(64)
    for rows, linked, wanted in batches:
        with np.errstate(over="ignore"):
            ids = np.array([r[0] for r in rows], dtype=np.int64).astype(dtype)
        decode = np.array([r[1] for r in rows], dtype=bool)
        prev_rows = np.array([r[2] for r in rows], dtype=np.int64) if linked else None
        d = int(decode.sum())
        first = np.ones(d, dtype=bool) if wanted else None
        assert compiled.record_batch(ids, decode, prev_rows, first)
        absent = prev_rows < 0 if prev_rows is not None else np.ones(len(rows), dtype=bool)
        expected = np.zeros(d, dtype=bool)
        at = absent[decode].nonzero()[0]
        expected[at] = plain.unseen(ids[decode][at])
        plain.add(ids[absent])
        if first is not None:
            assert first.tolist() == expected.tolist()
        assert compiled._bits.tolist() == plain._bits.tolist()
