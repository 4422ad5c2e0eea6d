"""The vLLM seed: a ``-1`` from a discarded chunked-prefill row reached the MTP head.

Padded speculation marks a discarded row's next token with ``-1``; the MTP head embeds
its input ids directly, so the lookup failed (a device assert at TP=1). At full depth the
DrafterInput contract names the token, its seq and position before any lookup happens.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from contract_builders import BACKENDS, ID_DTYPES, convert

from specguard import contracts

torch = pytest.importorskip("torch")

VOCAB = 32
# Seq 101 is a chunked prefill whose row was discarded: its sampled token is the -1.
_FIELDS = {
    "vocab_size": VOCAB,
    "num_tokens": 10,
    "seq_ids": np.array([100, 101, 102]),
    "input_ids": np.array([3, 4, 5, 6, 7, 8, -1, 9, 10, 11]),
    "positions": np.array([10, 11, 12, 0, 1, 2, 3, 20, 21, 22]),
    "query_start_loc": np.array([0, 3, 7, 10]),
    "sample_indices": np.array([2, 6, 9]),
}
_MESSAGE = (
    "SG301 no sentinel reaches an embedding [DrafterInput.input_ids, runner → drafter]: "
    "seq 101 at batch position 1, token 6: input id is -1 (expected 0 <= id < vocab_size=32)"
)


def _drafter_input(backend: str, dtype: str) -> contracts.DrafterInput:
    return contracts.DrafterInput(
        **{name: convert(value, backend, dtype) for name, value in _FIELDS.items()})


def _propose(backend: str, dtype: str, embed) -> object:
    """What a drafter does: build its input at the hand-over, then embed the ids."""
    drafter_input = _drafter_input(backend, dtype)
    return embed(torch.as_tensor(np.asarray(drafter_input.input_ids)).long())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", ID_DTYPES)
def test_sentinel_raises_sg301_naming_token_seq_and_position(backend, dtype):
    """At full depth the -1 is SG301 at token 6, owned by seq 101 at batch position 1."""
    with contracts.checking(depth="full"), pytest.raises(contracts.ContractViolation) as caught:
        _drafter_input(backend, dtype)
    assert caught.value.codes == ("SG301",)
    assert re.search(re.escape(_MESSAGE), str(caught.value))
    violation = caught.value.violations[0]
    assert (violation.token, violation.seq_id, violation.position) == (6, 101, 1)


def test_embedding_would_have_raised_on_the_same_ids():
    """Without the contract the same ids fail inside the embedding, far from their cause."""
    embed = torch.nn.Embedding(VOCAB, 4)
    with pytest.raises(IndexError, match="index out of range"):
        embed(torch.as_tensor(_FIELDS["input_ids"]))


def test_contract_fires_before_any_embedding_lookup():
    """The violation is raised at the hand-over; the embedding is never called."""
    calls = []
    embed = torch.nn.Embedding(VOCAB, 4)

    def counting_embed(ids):
        calls.append(ids)
        return embed(ids)

    with contracts.checking(depth="full"), pytest.raises(
        contracts.ContractViolation, match=re.escape(_MESSAGE)
    ):
        _propose("torch", "int64", counting_embed)
    assert calls == []


def test_clean_drafter_input_reaches_the_embedding():
    """With the discarded row's token replaced by a valid id, the lookup runs."""
    ids = _FIELDS["input_ids"].copy()
    ids[6] = 0
    with contracts.checking(depth="full"):
        drafter_input = contracts.DrafterInput(**{**_FIELDS, "input_ids": ids})
    embedded = torch.nn.Embedding(VOCAB, 4)(torch.as_tensor(drafter_input.input_ids))
    assert tuple(embedded.shape) == (10, 4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_default_depth_catches_the_sentinel(backend):
    """Out of the box (depth essential) the -1 is SG301, with the same message as at full."""
    assert contracts.current_config().depth is contracts.Depth.ESSENTIAL
    assert contracts.REGISTRY["SG301"].depth is contracts.Depth.ESSENTIAL
    with pytest.raises(contracts.ContractViolation) as caught:
        _drafter_input(backend, "int64")
    assert caught.value.codes == ("SG301",)
    assert re.search(re.escape(_MESSAGE), str(caught.value))


def test_metadata_depth_leaves_values_unread():
    """Opting down to depth metadata checks shapes only: the sentinel passes unread."""
    with contracts.checking(depth="metadata"):
        drafter_input = _drafter_input("numpy", "int64")
    assert int(drafter_input.input_ids[6]) == -1
