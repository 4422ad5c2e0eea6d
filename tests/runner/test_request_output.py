"""What each request is given at the end of a step: trimmed at its stop id and its limit.

The delivery builds a ``RequestOutput`` for every forward; the ``untrimmed-output``
fault gives every verified token instead, which the default settings stop (SG402,
SG403) and which, unchecked, hands requests tokens plain greedy decoding never gives.
"""

from __future__ import annotations

import numpy as np
import pytest
from engine_builders import MODEL, SMALL, chunk_boundary, divergence, requests_of, run

from specguard import contracts
from specguard.runner import faults
from specguard.runner.engine import Engine
from specguard.runner.oracle import greedy_reference
from specguard.runner.request_output import given_tokens
from specguard.runner.workload import Request

_ROWS = np.array([[5, 9, 7, 8], [4, 6, -1, -1], [3, 2, 1, 0], [-1, -1, -1, -1]])


def _given(fault: str | None = None, **changes: np.ndarray):
    fields = {"seq_ids": np.array([0, 1, 2, 3]), "token_ids": _ROWS,
              "num_generated": np.array([0, 3, 10, 2]), "max_tokens": np.array([16, 16, 12, 8]),
              "stop_token_ids": np.array([[9, -1], [2, 3], [-1, -1], [9, -1]])}
    return given_tokens(**{**fields, **changes}, vocab_size=32, fault=fault)


def test_rows_are_trimmed_through_the_stop_and_within_the_limit():
    """Row 0 stops at its stop id 9 (kept); row 1 has no stop; row 2 has two tokens left
    to its limit; row 3 (a middle prefill chunk) is given nothing and keeps running."""
    with contracts.checking(mode="strict", depth="full"):
        given = _given()
    assert given.num_given.tolist() == [2, 2, 2, 0]
    assert given.finished.tolist() == [True, False, True, False]


def test_without_stop_ids_only_the_limit_trims():
    """A forward of requests without stop ids: the stop table has no columns."""
    given = _given(stop_token_ids=np.zeros((4, 0), dtype=np.int64))
    assert given.num_given.tolist() == [4, 2, 2, 0]
    assert given.finished.tolist() == [False, False, True, False]


def test_the_untrimmed_fault_is_stopped_at_the_hand_over():
    """Every verified token given: row 0 runs on after its stop id (SG402 first)."""
    with pytest.raises(contracts.ContractViolation) as caught:
        _given(faults.UNTRIMMED_OUTPUT)
    assert caught.value.codes == ("SG402",)
    assert (caught.value.violations[0].seq_id, caught.value.violations[0].position) == (0, 0)
    with contracts.checking(mode="off"):
        assert _given(faults.UNTRIMMED_OUTPUT).num_given.tolist() == [4, 2, 4, 0]


def _stopping_workload() -> list[Request]:
    """The chunk-boundary requests, each stopping at the token greedy decoding gives it
    sixth (so that a decode span can carry the stop and more after it)."""
    requests = chunk_boundary()[1]
    greedy = greedy_reference(MODEL, requests)
    return [Request(r.request_id, r.prompt, r.max_tokens, (int(greedy[r.request_id][5]),))
            for r in requests]


def test_a_clean_engine_gives_each_request_its_tokens_through_its_stop():
    """Stop ids end requests early, exactly where plain greedy decoding ends them."""
    requests = _stopping_workload()
    with contracts.checking(mode="strict", depth="full"):
        _, result = run(SMALL, requests)
    assert result.stats.violations == 0
    assert divergence(result, requests) is None
    for request in requests:
        output = result.outputs[request.request_id]
        assert output[-1] == request.stop_token_ids[0]
        assert request.stop_token_ids[0] not in output[:-1].tolist()


def test_without_contracts_the_untrimmed_fault_gives_tokens_past_the_stop():
    """Contracts off: some request is given tokens after its stop id."""
    requests = _stopping_workload()
    with contracts.checking(mode="off"):
        _, result = run(SMALL, requests, faults.UNTRIMMED_OUTPUT)
    assert divergence(result, requests) is not None
    past = [r.request_id for r in requests
            if r.stop_token_ids[0] in result.outputs[r.request_id][:-1].tolist()]
    assert past


@pytest.mark.parametrize(("workload", "codes"), [
    (lambda: chunk_boundary()[1], {"SG403"}),
    (_stopping_workload, {"SG402", "SG404"}),
], ids=["limit", "stop"])
def test_the_default_settings_stop_the_untrimmed_fault(workload, codes):
    """Strict at the default depth: the RequestOutput rule names the request and row."""
    requests = workload()
    engine = Engine(SMALL, fault=faults.UNTRIMMED_OUTPUT, model=MODEL)
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        engine.generate(requests)
    violation = caught.value.violations[0]
    assert violation.code in codes and violation.subject == "RequestOutput"
    assert violation.seq_id is not None and violation.position is not None


def test_requests_without_stop_ids_get_max_tokens_exactly():
    """The limit is exact: a decode span that would overshoot it is cut."""
    requests = requests_of([20, 30, 40], max_tokens=7)
    _, result = run(SMALL, requests)
    assert [len(result.outputs[r.request_id]) for r in requests] == [7, 7, 7]
