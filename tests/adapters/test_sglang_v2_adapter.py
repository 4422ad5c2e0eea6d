"""SglangV2View's rules (SG650-SG658) both ways, on objects with SGLang 0.5.23's field
names: the clean step of ``specguard.adapters.examples`` passes, each broken one is its
rule with the message pinned, caught at the default settings, and nothing is read with
the checks off."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import SglangV2View, StepTracker
from specguard.adapters import examples as ex
from specguard.adapters.examples import EXAMPLES

PINNED = [
    ("SG650", 1, "request 'req-b': relay key 7 for pool row 3",
     "key 3, the request's own pool row"),
    ("SG651", 1, "request 'req-b': bonus token is -3", "0 <= id < vocab_size=1000"),
    ("SG652", 0, "request 'req-a': node 1 has retrieve_next_sibling 2",
     "retrieve_next_sibling -1"),
    ("SG653", 1, "request 'req-b': slot 0 at position 8", "seq_len + 0 = 9"),
    ("SG654", 1, "request 'req-b': row starts with 501", "the bonus token 601"),
    ("SG655", 1, "request 'req-b': accept_len is 0", "1 <= accept_len <= spec_steps + 1 = 4"),
    ("SG656", 1, "request 'req-b': column 0 is 0", "4"),
    ("SG657", 0, "request 'req-a': new_seq_len 22 after 20 + 3 accepted",
     "seq_len + accept_len"),
    ("SG658", 1, "request 'req-b': bonus token 0", "predict[4] = 88"),
]


def test_the_clean_step_passes_at_full_depth():
    with contracts.checking(mode="strict", depth="full"):
        ex._sglang_v2(ex._sglang_v2_entry(), ex._sglang_v2_verify_input(), ex._sglang_v2_result())


@pytest.mark.parametrize("code, position, reason, expected", PINNED,
                         ids=[p[0] for p in PINNED])
def test_each_rule_is_caught_at_the_default_settings_with_its_message(
        code, position, reason, expected):
    with pytest.raises(contracts.ContractViolation) as raised:
        EXAMPLES[code].build()
    (violation,) = raised.value.violations
    assert (violation.code, violation.position) == (code, position)
    assert (violation.reason, violation.expected) == (reason, expected)
    assert contracts.REGISTRY[code].depth is contracts.Depth.ESSENTIAL


@pytest.mark.parametrize("code", [p[0] for p in PINNED])
def test_metadata_depth_and_mode_off_pass_every_example(code):
    with contracts.checking(depth="metadata"):
        EXAMPLES[code].build()
    with contracts.checking(mode="off"):
        EXAMPLES[code].build()


def test_an_extend_batch_names_the_request_of_an_out_of_vocabulary_token():
    """A pad sentinel in the second request's prompt: SG651 names it and its row."""
    batch = ex._sglang_v2_entry(
        forward_mode=SimpleNamespace(name="EXTEND", is_extend=lambda: True),
        spec_info=None, input_ids=np.array([5, 6, 7, 8, 1003, 9]), extend_lens=[3, 3],
        prefix_lens=[0, 0], seq_lens=np.array([3, 3]), seq_lens_cpu=np.array([3, 3]))
    with pytest.raises(contracts.ContractViolation) as raised:
        SglangV2View(spec_steps=3, vocab_size=1000).schedule(batch)
    (violation,) = raised.value.violations
    assert (violation.code, violation.position, violation.token) == ("SG651", 1, 4)
    assert violation.reason == "request 'req-b': input id is 1003"


def test_a_tree_is_not_held_to_the_chain_rule():
    """topk > 1 builds a tree: SG652 asks the chain of topk 1 only."""
    with contracts.checking(mode="strict", depth="full"):
        view = SglangV2View(spec_steps=3, vocab_size=1000)
        step = view.schedule(ex._sglang_v2_entry())
        view.verify_input(step, ex._sglang_v2_verify_input(
            topk=2, retrieve_next_sibling=np.array([[-1, 2, -1, -1], [-1] * 4])))


def _at(lens: list[int]) -> tuple[SimpleNamespace, SimpleNamespace]:
    entry = ex._sglang_v2_entry(seq_lens=np.array(lens), seq_lens_cpu=np.array(lens))
    positions = np.concatenate([np.arange(n, n + 4) for n in lens])
    return entry, ex._sglang_v2_verify_input(positions=positions)


def test_a_decode_step_without_its_verify_rows_unlinks_the_verify_tracker():
    """Each request resumes at the new_seq_lens its last step published (SG601); a decode
    entry whose verify input never came (drafting skipped) breaks the link instead of
    comparing the next step with stale rows."""
    def run(steps: list[tuple[list[int], bool]]) -> None:
        view = SglangV2View(spec_steps=3, vocab_size=1000, tracker=StepTracker())
        with contracts.checking(mode="strict", depth="full"):
            step = view.schedule(ex._sglang_v2_entry())
            view.verify_input(step, ex._sglang_v2_verify_input())
            view.verified(step, ex._sglang_v2_result())  # new_seq_lens 23 and 10
            for lens, rows in steps:
                entry, verify_input = _at(lens)
                step = view.schedule(entry)
                if rows:
                    view.verify_input(step, verify_input)

    with pytest.raises(contracts.ContractViolation) as raised:
        run([([40, 10], True)])
    (violation,) = raised.value.violations
    assert (violation.code, violation.position) == ("SG601", 0)
    assert violation.reason.startswith("request 'req-a': starts at position 40")
    run([([23, 10], False), ([40, 10], True)])


@pytest.mark.parametrize("idle", [{"depth": "metadata"}, {"mode": "off"}],
                         ids=["metadata", "off"])
def test_trackers_left_idle_start_afresh_when_checks_resume(idle):
    """At metadata depth, or with contracts off, no tracker rule runs: the trackers are
    left alone and forget what they knew. The first step checked after it is related to
    nothing (a step from before would be stale), and the one after that is checked."""
    view = SglangV2View(spec_steps=3, vocab_size=1000, tracker=StepTracker(),
                        carried=StepTracker(progress=False))
    assert view.tracker is not None and view.carried is not None
    with contracts.checking(mode="strict", depth="essential"):
        step = view.schedule(ex._sglang_v2_entry())
        view.verify_input(step, ex._sglang_v2_verify_input())
        view.verified(step, ex._sglang_v2_result())  # new_seq_lens 23 and 10
        with contracts.checking(**idle):
            entry, verify_input = _at([40, 10])
            view.verify_input(view.schedule(entry), verify_input)
        assert view.tracker.previous is None and view.carried.previous_ids is None
        entry, verify_input = _at([60, 10])  # not where step 1 left req-a: no longer known
        step = view.schedule(entry)
        view.verify_input(step, verify_input)
        view.verified(step, ex._sglang_v2_result(new_seq_lens=np.array([63, 11])))
        entry, verify_input = _at([70, 11])
        step = view.schedule(entry)
        with pytest.raises(contracts.ContractViolation) as raised:
            view.verify_input(step, verify_input)
    (violation,) = raised.value.violations
    assert (violation.code, violation.position) == ("SG601", 0)
    assert violation.reason.startswith("request 'req-a': starts at position 70")


def test_an_idle_batch_of_data_parallel_attention_passes():
    """A DP rank with no request runs an IDLE batch: zero rows everywhere, and
    eagle_sample's idle accept_index is flat (``torch.empty(0)``), which is legal."""
    import torch

    empty = torch.empty
    batch = SimpleNamespace(
        reqs=[], forward_mode=SimpleNamespace(name="IDLE", is_extend=lambda: False),
        seq_lens=empty(0, dtype=torch.int64), seq_lens_cpu=empty(0, dtype=torch.int64),
        req_pool_indices=empty(0, dtype=torch.int64),
        spec_info=SimpleNamespace(future_indices=None, bonus_tokens=empty(0, dtype=torch.int32),
                                  topk_index=empty((0, 1), dtype=torch.int64)))
    view = SglangV2View(spec_steps=3, vocab_size=1000, tracker=StepTracker(),
                        carried=StepTracker(progress=False))
    with contracts.checking(mode="strict", depth="full"):
        step = view.schedule(batch)
        view.verify_input(step, ex._sglang_v2_verify_input(
            draft_token=empty(0, dtype=torch.int64), positions=empty(0, dtype=torch.int64),
            retrieve_index=torch.full((0, 4), -1), retrieve_next_token=torch.full((0, 4), -1),
            retrieve_next_sibling=torch.full((0, 4), -1)))
        view.verified(step, SimpleNamespace(
            next_token_ids=empty(0, dtype=torch.int32), accept_lens=empty(0, dtype=torch.int32),
            accept_index=empty(0, dtype=torch.int32), new_seq_lens=empty(0, dtype=torch.int64),
            next_draft_input=SimpleNamespace(bonus_tokens=empty(0, dtype=torch.int32))))
        view.drafted(step, SimpleNamespace(bonus_tokens=empty(0, dtype=torch.int32),
                                           topk_index=empty((0, 1), dtype=torch.int64)))
    assert step.rids == ()
