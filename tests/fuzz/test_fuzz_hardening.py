"""Generators for what the third hostile-use round broke: non-regular files for
``specguard check``, rank steps of any integer size, and engine objects that cannot hold
a wrapper. Each property holds for every example: a clean answer or a violation (or the
engines' common error), never a foreign exception, a hang or a half-done install."""

from __future__ import annotations

import os
import socket
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specguard import contracts
from specguard.adapters import RankStep, UnsupportedEngine, install_vllm, snapshots
from specguard.adapters.engines.vllm.install import installation_of
from specguard.adapters.ranks import HEADER

_KINDS = ["directory", "fifo", "socket", "device", "link-to-fifo", "regular-empty"]


def _make(kind: str, folder: Path) -> Path:
    path = folder / f"{kind}.json"
    if kind == "directory":
        path.mkdir()
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(path))
        server.close()
    elif kind == "device":
        return Path(os.devnull)
    elif kind == "link-to-fifo":
        target = folder / "target.fifo"
        os.mkfifo(target)
        path.symlink_to(target)
    else:
        path.write_bytes(b"")
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and sockets")
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(_KINDS))
def test_any_path_is_read_or_refused_as_a_snapshot_error_without_blocking(tmp_path, kind):
    folder = tmp_path / f"case-{len(list(tmp_path.iterdir()))}"
    folder.mkdir()
    path = _make(kind, folder)
    with pytest.raises(snapshots.SnapshotError) as refused:
        snapshots.load(path)
    message = str(refused.value)
    if kind == "regular-empty":
        assert "is not valid" in message
    else:
        assert "is not a regular file" in message


_COUNTS = st.one_of(st.integers(), st.integers(min_value=-(2**80), max_value=2**80),
                    st.sampled_from([2**63, -(2**63) - 1, 2**63 - 1, 10**30]))


@given(step=_COUNTS, num_tokens=_COUNTS, padded=_COUNTS,
       seq_ids=st.lists(_COUNTS, max_size=4))
def test_a_rank_step_of_any_integers_is_a_row_or_a_violation(step, num_tokens, padded, seq_ids):
    row_step = RankStep(step=step, mtp_k=2, num_tokens=num_tokens, padded_tokens=padded,
                        dummy=False, dummy_tokens=1, seq_ids=seq_ids)
    fits = all(-(2**63) <= v < 2**63 for v in (step, num_tokens, padded, *seq_ids))
    with contracts.checking(mode="strict"):
        try:
            row = row_step.row(4)
        except contracts.ContractViolation as error:
            assert not fits
            assert error.violations[0].code in {"SG001", "SG006"}
            return
    assert fits
    assert row.dtype == np.int64 and row.shape == (len(HEADER) + 4,)
    assert row[1] == step


class _Slotted:
    __slots__ = ("result",)

    def __init__(self) -> None:
        self.result: Any = None

    def _update_states(self, scheduler_output):
        return None

    def _sample(self, logits, spec_decode_metadata):
        return None

    def propose(self, target_token_ids, target_positions, target_hidden_states,
                next_token_ids, last_token_indices, common_attn_metadata,
                sampling_metadata):
        return None


class _Open:
    def propose(self, target_token_ids, target_positions, target_hidden_states,
                next_token_ids, last_token_indices, common_attn_metadata,
                sampling_metadata):
        return None


def _runner_class(slotted: bool) -> type:
    base: type = _Slotted if slotted else object
    body: dict[str, Any] = {"__slots__": ()} if slotted else {
        "_update_states": _Slotted._update_states, "_sample": _Slotted._sample}
    return type("GPUModelRunner", (base,), body)


@given(runner_slotted=st.booleans(), drafter_slotted=st.booleans())
def test_install_on_any_mix_of_slotted_objects_is_all_or_nothing(runner_slotted,
                                                                 drafter_slotted):
    runner = _runner_class(runner_slotted)()
    state = vars(runner) if hasattr(runner, "__dict__") else None
    for name, value in (("speculative_config", SimpleNamespace(num_speculative_tokens=2)),
                        ("model_config", SimpleNamespace(get_vocab_size=lambda: 100)),
                        ("input_batch", SimpleNamespace(req_ids=[])),
                        ("drafter", _Slotted() if drafter_slotted else _Open())):
        if state is not None:
            state[name] = value
        else:  # a slotted runner: its configuration on the class, as a stand-in
            setattr(type(runner), name, value)
    before = dict(state) if state is not None else None
    try:
        install_vllm(runner, version="0.11.1")
    except UnsupportedEngine as error:
        assert runner_slotted or drafter_slotted
        assert "keeps no attributes of its own" in str(error)
        assert installation_of(runner) is None
        if before is not None:
            assert vars(runner) == before  # nothing wrapped, nothing recorded
        return
    assert not (runner_slotted or drafter_slotted)
    assert installation_of(runner) is not None
