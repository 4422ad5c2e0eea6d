"""Banned tokens: the bitmask's layout, its application to the logits, and the engine's
tokens against the oracle's under the same bans."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from engine_builders import SMALL, divergence, requests_of, run

from specguard import contracts
from specguard.runner import faults
from specguard.runner.token_bans import TokenBans, apply_bans
from specguard.runner.workload import Request, constrain, synthetic_requests

VOCAB = 10
K = 2


def _request(request_id: int, *banned: int) -> Request:
    return Request(request_id, np.arange(4, dtype=np.int64), 8, banned_token_ids=banned)


def _bans(fault: str | None = None) -> TokenBans:
    bans = TokenBans(VOCAB, K, torch.device("cpu"), fault)
    bans.add([_request(7, 1, 2), _request(3), _request(5, 9)])
    return bans


# A step's sampling requests in the runner's order: seq 7 decodes (K + 1 rows), seq 3
# (unconstrained) decodes, seq 5's prefill samples one row.
SEQ_IDS = np.array([7, 3, 5])
IS_DECODE = np.array([True, True, False])
SCHEDULED = np.array([K + 1, K + 1, 30])
LOGITS_COUNTS = np.array([K + 1, K + 1, 1])


def test_each_constrained_request_gets_its_rows_in_order():
    """1 + K rows for a decode span, 1 for a prefill, none for a request without bans;
    each row holds its own request's bans."""
    layout = _bans().layout(SEQ_IDS, IS_DECODE, SCHEDULED)
    assert layout.row_starts.tolist() == [0, -1, 3]
    assert layout.row_counts.tolist() == [3, 0, 1]
    assert layout.bitmask is not None and layout.num_rows == 4
    assert [np.flatnonzero(row).tolist() for row in layout.bitmask.numpy()] == [
        [1, 2], [1, 2], [1, 2], [9]]


def test_a_step_without_constrained_requests_has_no_bitmask():
    """No bans in the batch: no rows, nothing allocated, nothing applied."""
    layout = _bans().layout(np.array([3]), np.array([True]), np.array([K + 1]))
    assert (layout.bitmask, layout.num_rows) == (None, 0)
    assert layout.row_starts.tolist() == [-1] and layout.row_counts.tolist() == [0]
    logits = torch.zeros(K + 1, VOCAB, dtype=torch.float64)
    apply_bans(logits, layout, np.array([K + 1]))
    assert bool((logits == 0).all())


def test_bans_reach_exactly_their_requests_logits_rows():
    """Rows 0-2 (seq 7) lose tokens 1 and 2, row 6 (seq 5) token 9; seq 3's rows keep
    every token."""
    logits = torch.zeros(7, VOCAB, dtype=torch.float64)
    apply_bans(logits, _bans().layout(SEQ_IDS, IS_DECODE, SCHEDULED), LOGITS_COUNTS)
    banned = [np.flatnonzero(np.isinf(row)).tolist() for row in logits.numpy()]
    assert banned == [[1, 2], [1, 2], [1, 2], [], [], [], [9]]


def test_the_clean_layout_passes_logits_rows_and_the_misaligned_one_is_stopped():
    """The layout as LogitsRows at the default settings: clean, it is valid; laid out with
    K drafts for the prefill too (the fault), SG312 names seq 5 at batch position 2."""
    drafts = np.array([K, K, 0])

    def logits_rows(bans: TokenBans) -> contracts.LogitsRows:
        layout = bans.layout(SEQ_IDS, IS_DECODE, SCHEDULED)
        return contracts.LogitsRows(num_logits=7, num_rows=layout.num_rows, seq_ids=SEQ_IDS,
                                    num_drafts=drafts, row_starts=layout.row_starts,
                                    row_counts=layout.row_counts)

    with contracts.checking(mode="strict"):
        logits_rows(_bans())
        with pytest.raises(contracts.ContractViolation) as caught:
            logits_rows(_bans(faults.MISALIGNED_LOGITS_ROWS))
    assert caught.value.codes == ("SG312",)
    assert ("seq 5 at batch position 2: the data holds 3 rows for it, the logits 1"
            in str(caught.value))


def test_the_misaligned_layout_hands_the_next_request_its_neighbours_rows():
    """A prefill laid out K + 1 rows while the runner samples one: the request after it
    reads the prefill's bans, not its own."""
    bans = TokenBans(VOCAB, K, torch.device("cpu"), faults.MISALIGNED_LOGITS_ROWS)
    bans.add([_request(0, 4), _request(1, 6)])
    layout = bans.layout(np.array([0, 1]), np.array([False, False]), np.array([9, 9]))
    logits = torch.zeros(2, VOCAB, dtype=torch.float64)
    apply_bans(logits, layout, np.array([1, 1]))
    assert [np.flatnonzero(np.isinf(row)).tolist() for row in logits.numpy()] == [[4], [4]]


@pytest.mark.parametrize(("banned", "message"), [
    ((3, VOCAB), f"request 9 bans token {VOCAB}, outside the vocabulary \\[0, {VOCAB}\\)"),
    ((-1,), "request 9 bans token -1"),
    (tuple(range(VOCAB)), f"request 9 bans every token of the vocabulary \\({VOCAB}\\)"),
])
def test_bans_no_vocabulary_can_serve_are_refused(banned, message):
    """An id outside the vocabulary, or bans that leave no token, are a ValueError naming
    the request, never an indexing error deep in the runner."""
    with pytest.raises(ValueError, match=message):
        TokenBans(VOCAB, K, torch.device("cpu")).add([_request(9, *banned)])


def test_constrained_requests_decode_as_the_oracle_does_at_the_default_settings():
    """Half the requests ban half the vocabulary: the engine's tokens are the oracle's,
    none of them banned, and no contract is broken."""
    requests = synthetic_requests(6, vocab_size=SMALL.model.vocab_size, seed=4,
                                  min_prompt=8, max_prompt=90, max_tokens=12,
                                  constrained=0.5)
    assert any(r.banned_token_ids for r in requests)
    assert not all(r.banned_token_ids for r in requests)
    with contracts.checking(mode="strict"):
        _, result = run(SMALL, requests)
    assert result.stats.violations == 0
    assert divergence(result, requests) is None
    for request in requests:
        assert not set(result.outputs[request.request_id].tolist()) & set(
            request.banned_token_ids)


def test_the_bans_change_what_a_request_is_given():
    """The same requests without their bans decode to other tokens: the bans are applied,
    not merely carried."""
    plain = requests_of([20, 33], max_tokens=8)
    constrained = constrain(plain, vocab_size=SMALL.model.vocab_size)
    with contracts.checking(mode="off"):
        _, free = run(SMALL, plain)
        _, banned = run(SMALL, constrained)
    for request in constrained:
        assert not np.array_equal(free.outputs[request.request_id],
                                  banned.outputs[request.request_id])
