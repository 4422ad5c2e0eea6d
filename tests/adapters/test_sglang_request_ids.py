"""SGLang's request ids are read only where something needs them: a tracker, a rule that
follows requests, or the message of a violation."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from specguard import contracts
from specguard.adapters import SglangV2View, SglangView
from specguard.adapters import examples as ex
from specguard.adapters.engines.sglang._rids import Picked, RequestIds


class _CountedReq:
    """A ``Req`` that counts the reads of its ``rid``."""

    reads = 0

    def __init__(self, rid: str, finished: bool = False) -> None:
        self._rid, self._finished, self.is_chunked = rid, finished, 0

    @property
    def rid(self) -> str:
        _CountedReq.reads += 1
        return self._rid

    def finished(self) -> bool:
        return self._finished


@pytest.fixture
def reqs():
    _CountedReq.reads = 0
    return [_CountedReq("req-a"), _CountedReq("req-b")]


def test_request_ids_are_read_on_first_use_and_once(reqs):
    ids = RequestIds(reqs)
    assert len(ids) == 2 and _CountedReq.reads == 0
    assert ids[1] == "req-b" and list(ids) == ["req-a", "req-b"]
    assert _CountedReq.reads == 2
    assert ids == ("req-a", "req-b") and ids != ("req-b", "req-a")
    assert RequestIds(list(reqs)) == ids  # the same Req objects: equal without a read
    assert _CountedReq.reads == 2
    assert RequestIds([SimpleNamespace(), SimpleNamespace(rid="x")]).ids() == ("0", "x")


def test_picked_names_are_the_kept_positions(reqs):
    picked = Picked(RequestIds(reqs), [1])
    assert len(picked) == 1 and _CountedReq.reads == 0
    assert picked[0] == "req-b" and list(picked) == ["req-b"] and picked[:1] == ["req-b"]


def test_the_overlap_worker_view_reads_no_rid_of_a_clean_batch_without_a_tracker(reqs):
    with contracts.checking(mode="strict"):
        SglangV2View(spec_steps=3, vocab_size=1000).schedule(ex._sglang_v2_entry(reqs=reqs))
    assert _CountedReq.reads == 0


def test_the_overlap_worker_view_reads_no_rid_at_metadata_depth_with_its_trackers(reqs):
    """No tracker rule runs at metadata depth: the trackers are left alone, and the
    request ids stay unread."""
    from specguard.adapters import StepTracker

    view = SglangV2View(spec_steps=3, vocab_size=1000, tracker=StepTracker(),
                        carried=StepTracker(progress=False))
    with contracts.checking(mode="strict", depth="metadata"):
        view.schedule(ex._sglang_v2_entry(reqs=reqs))
    assert _CountedReq.reads == 0
    with contracts.checking(mode="strict"):  # the default depth: followed by id
        view.schedule(ex._sglang_v2_entry(reqs=reqs))
    assert _CountedReq.reads == 2


def _extend_with_a_pad_id(reqs: list[Any]) -> SimpleNamespace:
    """An extend batch of two requests whose second prompt holds 1003 (SG651)."""
    return ex._sglang_v2_entry(
        reqs=reqs, forward_mode=SimpleNamespace(name="EXTEND", is_extend=lambda: True),
        spec_info=None, input_ids=np.array([5, 6, 7, 8, 1003, 9]), extend_lens=[3, 3],
        prefix_lens=[0, 0], seq_lens=np.array([3, 3]), seq_lens_cpu=np.array([3, 3]))


def test_a_violation_still_names_its_request(reqs):
    """The ids are read for the message: SG651 names the second request, as always."""
    batch = _extend_with_a_pad_id(reqs)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as raised:
        SglangV2View(spec_steps=3, vocab_size=1000).schedule(batch)
    assert raised.value.violations[0].reason == "request 'req-b': input id is 1003"
    assert _CountedReq.reads == 2


def _decode(reqs: list[_CountedReq]) -> SimpleNamespace:
    batch = ex._sglang_decode()
    batch.reqs = reqs
    return batch


def test_the_v1_view_reads_no_rid_at_metadata_depth(reqs):
    view = SglangView(spec_steps=3, vocab_size=1000)
    with contracts.checking(mode="strict", depth="metadata"):
        view.schedule(_decode(reqs))
        view.drafted(_decode(reqs), ex._sglang_verify_input())
        view.verified(_decode(reqs), ex._sglang_verify_input(), ex._sglang_verify_output())
        view.draft_extend(ex._sglang_draft_extend())
    assert _CountedReq.reads == 0
    with contracts.checking(mode="strict"):  # the default depth follows requests by id
        view.schedule(_decode(reqs))
    assert _CountedReq.reads == 2


def _prefilled(view: SglangView) -> None:
    """The two requests' prefill, sampling 31 and 41: what SG647 holds their rows to."""
    prefill = SimpleNamespace(
        reqs=ex._sglang_reqs(), forward_mode=SimpleNamespace(name="EXTEND"),
        input_ids=np.arange(10, 18), extend_lens=[5, 3], prefix_lens=[0, 0],
        out_cache_loc=np.arange(1, 9))
    with contracts.checking(mode="strict"):
        view.schedule(prefill)
        view.draft_prefill(prefill, np.array([31, 41]))


def test_steps_at_metadata_depth_drop_what_the_v1_view_knew():
    """The view remembers nothing at metadata depth, so a deeper check afterwards holds no
    request to a token from before: swapped rows are SG647 right after the prefill, and
    pass after a metadata-depth step (the view knows nothing of them then)."""
    swapped = ex._sglang_decode(verified_id=np.array([41, 31], np.int32))
    view = SglangView(spec_steps=3, vocab_size=1000)
    _prefilled(view)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as raised:
        view.schedule(swapped)
    assert raised.value.codes == ("SG647",)
    view = SglangView(spec_steps=3, vocab_size=1000)
    _prefilled(view)
    with contracts.checking(mode="strict", depth="metadata"):
        view.schedule(ex._sglang_decode())
    with contracts.checking(mode="strict"):
        view.schedule(swapped)


class _BrokenReq:
    @property
    def rid(self) -> str:
        raise RuntimeError("rid is gone")


def test_a_request_whose_rid_cannot_be_read_is_named_by_its_position():
    """The ids may be read while a violation is reported: a Req that raises reading its
    rid is named by its batch position, and the violation is still the one delivered."""
    reqs = [_BrokenReq(), _BrokenReq()]
    assert RequestIds(reqs).ids() == ("0", "1")
    batch = _extend_with_a_pad_id(reqs)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as raised:
        SglangV2View(spec_steps=3, vocab_size=1000).schedule(batch)
    assert raised.value.violations[0].reason == "request '1': input id is 1003"
