"""SglangView on SGLang's objects (stand-ins with SGLang 0.5.10's field names): a clean
step passes, each SGLang layout rule is caught with its message, and hostile input becomes
a violation, never a foreign exception."""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import EngineView, SglangView, StepTracker
from specguard.adapters.examples import (
    _sglang,
    _sglang_decode,
    _sglang_draft_extend,
    _sglang_reqs,
    _sglang_verify_input,
    _sglang_verify_output,
    example_message,
)

PINNED = {
    "SG640": "spec_info.verified_id has 3 rows for 2 requests (expected 2 rows, one per "
             "request in batch.reqs; actual 3 rows)",
    "SG641": "request 'req-b': tree row 1 node 0 reads draft token 0 (expected token 4, its "
             "own row's)",
    "SG642": "request 'req-b': chain node 0 at position 4 (expected seq_len + 0 = 3)",
    "SG643": "request 'req-b': verify row 1 starts with token 31 (expected verified_id 41)",
    "SG644": "request 'req-b': accepted 4 drafts (expected 0..spec_steps=3 (the bonus token "
             "is not counted))",
    "SG645": "the next draft input's row 0 accepted 3 drafts (expected 2, the accept "
             "length of unfinished request 0 in batch order)",
    "SG646": "request 'req-b': token 3 of the draft extend at position 4 (expected "
             "position 3)",
    "SG647": "request 'req-a': draft row 0 starts from token 31 (expected token 41, the last "
             "one the request was given; actual 31)",
}


def test_the_view_is_an_engine_view():
    assert isinstance(SglangView(spec_steps=3, vocab_size=1000), EngineView)


@pytest.mark.parametrize("depth", ["metadata", "essential", "full"])
def test_a_clean_step_passes_at_every_depth(depth):
    with contracts.checking(mode="strict", depth=depth):
        _sglang(previous=[31, 41])


@pytest.mark.parametrize("code", sorted(PINNED))
def test_each_layout_rule_is_caught_by_default_with_its_message(code):
    """Each broken example raises its rule, at the default depth, with the message pinned."""
    message = example_message(code)
    assert f"{code} " in message and PINNED[code] in message
    from specguard.adapters.examples import EXAMPLES

    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        EXAMPLES[code].build()
    assert caught.value.codes == (code,)


def test_metadata_depth_runs_no_layout_rule():
    """At metadata depth no value or cross-field rule runs: a swapped row (SG647) and an
    extra draft row (SG640) pass there, and the default depth catches both."""
    extra = _sglang_decode(verified_id=np.array([1, 2, 3], np.int32))
    with contracts.checking(mode="strict", depth="metadata"):
        _sglang(previous=[41, 31])
        _sglang(decode=extra)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        _sglang(decode=extra)
    assert caught.value.codes == ("SG640",)


def test_rows_follow_requests_by_rid_not_by_pool_index():
    """A request prefilled again after a retract gets a new req_pool_indices row; the view
    follows it by rid, so the next step's check still knows its last token."""
    view = SglangView(spec_steps=3, vocab_size=1000, tracker=StepTracker())
    with contracts.checking(mode="strict", depth="full"):
        prefill = SimpleNamespace(
            reqs=_sglang_reqs(), forward_mode=SimpleNamespace(name="EXTEND"),
            input_ids=np.arange(10, 18), extend_lens=[5, 3], prefix_lens=[0, 0],
            out_cache_loc=np.arange(1, 9))
        view.schedule(prefill)
        view.draft_prefill(prefill, np.array([31, 41]))
        moved = _sglang_decode()
        moved.req_pool_indices = np.array([7, 3])
        view.schedule(moved)
        swapped = _sglang_decode(verified_id=np.array([41, 31], np.int32))
        with pytest.raises(contracts.ContractViolation, match=re.escape("SG647")):
            view.schedule(swapped)


def test_the_tracker_follows_positions_from_step_to_step():
    """SG601 at full depth: a decode step whose seq_lens did not advance by accepted + 1
    after the verify is caught against the step before."""
    view = SglangView(spec_steps=3, vocab_size=1000, tracker=StepTracker())
    with contracts.checking(mode="strict", depth="full"):
        batch = _sglang_decode()
        view.schedule(batch)
        view.drafted(batch, _sglang_verify_input())
        view.verified(SimpleNamespace(reqs=_sglang_reqs(False, False)), _sglang_verify_input(),
                      _sglang_verify_output(), SimpleNamespace(out_cache_loc=np.arange(9, 17)))
        view.draft_extend(_sglang_draft_extend())
        stale = _sglang_decode(verified_id=np.array([99, 7], np.int32),
                               topk_index=np.array([[1], [2]]))
        stale.seq_lens = stale.seq_lens_cpu = np.array([8, 6])  # req-b: 3 + 3 + 1 is 7
        view.schedule(stale)
        chain = _sglang_verify_input(
            draft_token=np.array([99, 1, 5, 6, 7, 2, 5, 6]),
            positions=np.array([8, 9, 10, 11, 6, 7, 8, 9]))
        with pytest.raises(contracts.ContractViolation) as caught:
            view.drafted(stale, chain)
    assert caught.value.codes == ("SG601",)
    assert "request 'req-b'" in str(caught.value)


@pytest.mark.parametrize("broken", [
    lambda: _sglang(decode=SimpleNamespace(reqs=_sglang_reqs(),
                                           forward_mode=SimpleNamespace(name="DECODE"))),
    lambda: _sglang(verify_input=SimpleNamespace()),
    lambda: _sglang(verify_output=_sglang_verify_output(accept_length_per_req_cpu=["2", 3])),
    lambda: _sglang(verify_input=_sglang_verify_input(draft_token=np.zeros((2, 2, 2)))),
    lambda: _sglang(extend=_sglang_draft_extend(positions=None)),
    lambda: _sglang(decode=_sglang_decode(verified_id=np.array([1.5, 2.5]))),
], ids=["no-spec-info", "empty-verify-input", "text-counts", "cube-tokens", "no-positions",
        "float-ids"])
def test_hostile_objects_become_violations(broken):
    with contracts.checking(mode="strict", depth="full"), \
            pytest.raises(contracts.ContractViolation):
        broken()
