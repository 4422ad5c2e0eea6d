"""Warn mode hands on what the contract refused: the views must go on without crashing.

In strict mode a violation stops the hand-over before a view computes anything further
with the refused values. In warn mode (the always-on production setting that logs) the
view goes on: its trackers and later objects then meet the same values, and must not
turn them into a foreign exception that stops the engine. Each case here was a crash
found by sweeping every field of each view's hand-overs with hostile values in warn
mode.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from atom_engine import BLOCK_SIZE, VOCAB, decode_batch, sequence
from hypothesis import given
from hypothesis import strategies as st
from vllm_traffic import scheduler_output

from specguard import contracts
from specguard.adapters import AtomView, Mrv2View, SglangView, StepTracker
from specguard.adapters import examples as ex
from specguard.adapters.corpus import corpus_files, read_corpus

K = 3


def _warned(step: Any) -> None:
    """Run ``step`` in warn mode at full depth, numpy warnings as errors: it must end
    without an exception."""
    with warnings.catch_warnings(), contracts.checking(mode="warn", depth="full"):
        warnings.simplefilter("error", RuntimeWarning)
        step()


@pytest.mark.parametrize(("field", "value"), [
    ("context_lens", np.full((4, 3), 7)),
    ("num_scheduled_tokens", np.array(list("abcd"))),
    ("num_scheduled_tokens", np.full((4, 3), 4)),
], ids=["2-D context", "string counts", "2-D counts"])
def test_atom_view_with_a_tracker_goes_on_in_warn_mode(field, value):
    """A batch the contract refused reaches the tracker's plan, which reads no plan from
    it (the tracker forgets the step) instead of subtracting arrays that do not fit."""
    seqs = [sequence(i, 40, drafts=K) for i in range(4)]
    view = AtomView(mtp_k=K, vocab_size=VOCAB, block_size=BLOCK_SIZE, tracker=StepTracker())

    def steps() -> None:
        view(decode_batch(seqs, dense=True))
        broken = decode_batch(seqs, dense=True)
        setattr(broken, field, value)
        view(broken)
        view(decode_batch(seqs, dense=True))

    _warned(steps)


def test_sglang_v1_view_goes_on_in_warn_mode():
    """A draft_token_num of 10**19 (SG641) no longer overflows the verify forward's
    spans, and a prefill's float extend_lens no longer reach the tracker's plan."""
    view = SglangView(spec_steps=3, vocab_size=1000, tracker=StepTracker())
    verify_input = ex._sglang_verify_input(draft_token_num=10**19)
    prefill = SimpleNamespace(
        reqs=ex._sglang_reqs(), forward_mode=SimpleNamespace(name="EXTEND"),
        input_ids=np.arange(10, 18), extend_lens=3.5, prefix_lens=[0, 0],
        out_cache_loc=np.arange(1, 9))

    def steps() -> None:
        view.schedule(prefill)
        for _ in range(2):
            decode = ex._sglang_decode()
            view.schedule(decode)
            view.drafted(decode, verify_input)
            view.verified(SimpleNamespace(reqs=ex._sglang_reqs(False, False)), verify_input,
                          ex._sglang_verify_output(),
                          SimpleNamespace(out_cache_loc=np.arange(9, 17)))
            view.draft_extend(ex._sglang_draft_extend())

    _warned(steps)


_MRV2 = sorted(corpus_files(Path(__file__).parents[1] / "conformance" / "corpus"
                            / "vllm-mrv2"))


class _RaisingIndex:
    def __index__(self) -> int:
        raise ValueError("no index today")


@given(field=st.sampled_from(["num_draft_tokens_per_req", "query_start_loc_np",
                              "cu_num_logits_np", "num_computed_tokens_np",
                              "prefill_len_np", "num_scheduled_tokens"]),
       value=st.sampled_from([None, "text", -7, 3.5, True, 10**23, object(), {"a": 1},
                              [[]], [["a"]], [_RaisingIndex()] * 2, np.array(["a", "b"]),
                              np.full(2, np.nan), np.array(5), np.zeros((2, 2))]))
def test_mrv2_view_goes_on_in_warn_mode(field, value):
    """MRV2's host arrays replaced by hostile values: the view reports them and hands the
    next steps a batch of one logits row per request, instead of casting strings or NaN
    or slicing a 0-d array."""
    corpus = read_corpus(_MRV2[0])
    config: dict[str, Any] = dict(corpus.config)
    view = Mrv2View(mtp_k=config["mtp_k"], vocab_size=config["vocab_size"])
    changed = False

    def steps() -> None:
        nonlocal changed
        batch = None
        for event in corpus.events[:12]:
            fields = event.values()
            if event.event == "input_batch" and not changed:
                fields[field] = value
                changed = True
            if event.event == "schedule":
                view.scheduler_view.schedule(scheduler_output(fields),
                                             req_ids=fields["req_ids"])
            elif event.event == "input_batch":
                batch = view.schedule(SimpleNamespace(**fields),
                                      max_num_reqs=config["max_num_reqs"])
            elif event.event == "sampled" and batch is not None:
                view.verified(batch, SimpleNamespace(**fields))
            elif event.event == "drafted" and batch is not None:
                view.drafted(batch, fields["draft_tokens"],
                             num_speculative_tokens=fields["num_speculative_tokens"])

    _warned(steps)
    assert changed
