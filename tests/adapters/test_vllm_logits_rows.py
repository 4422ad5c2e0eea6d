"""vLLM V1's grammar bitmask against the runner's ``1 + K`` logits rows per request.

The bitmask arrives in ``GrammarOutput``, ordered by ``structured_output_request_ids``,
``1 + K`` rows per request (``K`` its scheduled drafts): packed before 0.33.0, in blocks
of ``rows // requests`` from it on. ``VllmView.logits_rows`` reads it as
``apply_grammar_bitmask`` does and builds a ``LogitsRows``; the default depth checks it.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from vllm_engine import VOCAB, scheduler_output

from specguard import contracts
from specguard.adapters import VllmView

K = 3


def _step(version: str):
    view = VllmView(mtp_k=K, vocab_size=VOCAB, version=version)
    # Request a: 3 drafts, b: 1, c: a prefill (no drafts); a and c follow a grammar.
    output = scheduler_output({"a": [5, 6, 7], "b": [8]}, {"c": 12})
    return view, view.schedule(output)


def _grammar(ids: list[str], rows: int) -> SimpleNamespace:
    return SimpleNamespace(structured_output_request_ids=ids,
                           grammar_bitmask=np.zeros((rows, 4), dtype=np.int32))


@pytest.mark.parametrize(("version", "rows", "starts"), [
    ("0.11.1", 5, [1, -1, 0]),   # c's one row, then a's four, packed
    ("0.24.0", 5, [1, -1, 0]),
    ("0.33.0", 8, [4, -1, 0]),   # blocks of 1 + mtp_k = 4 rows
])
def test_a_bitmask_laid_out_as_the_runner_reads_it_passes(version, rows, starts):
    """Rows where the runner looks for them: clean at the default depth."""
    view, step = _step(version)
    with contracts.checking(mode="strict"):
        found = view.logits_rows(step, _grammar(["c", "a"], rows))
    assert found.row_starts.tolist() == starts
    assert found.row_counts.tolist() == [4, 0, 1]
    assert (found.num_logits, found.num_drafts.tolist()) == (7, [3, 1, 0])


def test_drafts_trimmed_in_the_runner_misalign_the_bitmask():
    """vLLM #49694: the runner trimmed a's drafts to 2, the bitmask kept a's 4 rows."""
    view, step = _step("0.11.1")
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        view.logits_rows(step, _grammar(["c", "a"], 5), num_draft_tokens=np.array([2, 1, 0]),
                         num_logits=6)
    assert caught.value.codes == ("SG312",)
    assert ("SG312 per-row data gives each request its 1 + K rows, inside the data "
            "[LogitsRows.row_counts, runner → target model]: seq 0 at batch position 0: "
            "request 'a': the data holds 4 rows for it, the logits 3 (expected 1 + num_drafts)"
            ) in str(caught.value)


def test_a_bitmask_short_of_a_request_s_rows_is_caught_before_an_index_error():
    """A packed bitmask laid out without a's drafts: a's rows run past its end."""
    view, step = _step("0.24.0")
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        view.logits_rows(step, _grammar(["c", "a"], 2))
    assert caught.value.codes == ("SG312",)
    assert "its rows 1..5 run past the 2 rows of the data" in str(caught.value)


def test_logits_with_another_row_count_are_caught():
    """Logits of one row per request, as if nothing were drafted: SG311."""
    view, step = _step("0.33.0")
    with contracts.checking(mode="strict"), pytest.raises(contracts.ContractViolation) as caught:
        view.logits_rows(step, _grammar(["a"], 4), num_logits=3)
    assert caught.value.codes == ("SG311",)


def test_a_structured_request_no_longer_in_the_batch_keeps_its_rows():
    """The consumer skips a request it has no logits for, but its rows still count."""
    view, step = _step("0.11.1")
    with contracts.checking(mode="strict"):
        found = view.logits_rows(step, _grammar(["gone", "a"], 5))
    assert found.row_starts.tolist() == [1, -1, -1]


def test_contracts_off_checks_nothing():
    """Mode off: a misaligned bitmask is handed on unchecked."""
    view, step = _step("0.11.1")
    with contracts.checking(mode="off"):
        view.logits_rows(step, _grammar(["c", "a"], 1))
