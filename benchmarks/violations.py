"""One broken batch per rule: the proof that the floor and the baseline check what specguard does.

Each mutation breaks exactly one rule of a clean decode batch (the others still hold),
for numpy and torch fields alike. Before anything is timed, every checker must accept
the clean batch and reject each of these.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from specguard import contracts
from specguard.benchmarks.workload import Fields

__all__ = ["MUTATIONS", "VARIANTS", "broken", "unbroken_rules"]

Mutation = Callable[[Fields], Fields]


def _copy(a: Any) -> Any:
    return a.copy() if isinstance(a, np.ndarray) else a.clone()


def _set(fields: Fields, name: str, index: Any, value: int | bool) -> Fields:
    array = _copy(fields[name])
    array[index] = value
    return {**fields, name: array}


def _other_backend(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        import torch

        return torch.from_numpy(a.copy())
    return a.numpy().copy()


def _as_float(a: Any) -> Any:
    return a.astype(np.float64) if isinstance(a, np.ndarray) else a.double()


def _short_decode_span(f: Fields) -> Fields:
    changed = _set(f, "num_scheduled_tokens", -1, f["mtp_k"])
    return {**changed, "num_tokens": f["num_tokens"] - 1, "token_ids": f["token_ids"][:-1]}


def _extra_token(f: Fields) -> Fields:
    tokens = f["token_ids"]
    longer = np.concatenate([np.asarray(tokens), np.asarray(tokens[:1])])
    as_backend = longer if isinstance(tokens, np.ndarray) else _other_backend(longer)
    return {**f, "num_tokens": f["num_tokens"] + 1, "token_ids": as_backend}


def _first_decode(f: Fields) -> int:
    return int(np.flatnonzero(np.asarray(f["is_decode"]))[0])


def _block_missing(f: Fields) -> Fields:
    """The last needed block of one seq is padding: the table ends before the context."""
    row = f["context_lens"].shape[0] // 2
    last = (int(f["context_lens"][row]) - 1) // f["block_size"]
    return _set(f, "block_tables", (row, last), -1)


def _middle_block_missing(f: Fields) -> Fields:
    """A block between the first and the last one a seq needs is padding; the seq that
    needs the most blocks is chosen (the benchmark batches have seqs needing 3 or more)."""
    needed = -(-f["context_lens"] // f["block_size"])
    row = int(needed.argmax())
    return _set(f, "block_tables", (row, max(int(needed[row]) // 2, 1)), -1)


def _repeated_id(f: Fields) -> Fields:
    """The last seq takes the first one's id; its draft row's owner follows (no SG115)."""
    changed = _set(f, "seq_ids", -1, int(f["seq_ids"][0]))
    if f.get("draft_seq_ids") is None or not bool(f["is_decode"][-1]):
        return changed
    return {**changed, "draft_seq_ids": _set(f, "draft_seq_ids", -1, int(f["seq_ids"][0]))[
        "draft_seq_ids"]}


def _swapped_owners(f: Fields) -> Fields:
    """The first two draft rows claim each other's seq: right count, wrong order (with one
    decode seq, its row claims a seq of no row)."""
    owners = _copy(f["draft_seq_ids"])
    if owners.shape[0] >= 2:
        owners[[0, 1]] = owners[[1, 0]]
    else:
        owners[0] = int(f["seq_ids"].max()) + 1
    return {**f, "draft_seq_ids": owners}


#: rule code → how to break only that rule. SG000 and SG004 cannot be broken through a
#: ScheduledBatch's fields (every named dimension of it has a more specific rule).
MUTATIONS: dict[str, Mutation] = {
    "SG001": lambda f: {**f, "token_ids": f["token_ids"].tolist()},
    "SG002": lambda f: {**f, "token_ids": _as_float(f["token_ids"])},
    "SG003": lambda f: {**f, "token_ids": f["token_ids"].reshape(-1, 1)},
    "SG005": lambda f: {**f, "context_lens": _other_backend(f["context_lens"])},
    "SG006": lambda f: {**f, "block_size": 0},
    "SG010": lambda f: _repeated_id(f),
    "SG101": lambda f: {**f, "draft_token_ids": f["draft_token_ids"][:-1]},
    "SG102": lambda f: {**f, "draft_token_ids": f["draft_token_ids"][:, :-1]},
    "SG103": _short_decode_span,
    "SG104": lambda f: {**f, "token_ids": f["token_ids"][:-1]},
    "SG105": lambda f: {**f, "context_lens": f["context_lens"][:-1]},
    "SG106": _extra_token,
    "SG107": lambda f: {**_set(f, "is_decode", _first_decode(f), False),
                        "draft_seq_ids": None},  # the rows' owners would disagree too
    "SG108": lambda f: _set(f, "draft_token_ids", (-1, 1), -1),
    "SG109": lambda f: _set(f, "num_drafts", 0, f["mtp_k"] + 1),
    "SG110": _block_missing,
    "SG111": lambda f: _set(f, "context_lens", -1, 1),
    "SG112": lambda f: _set(f, "token_ids", -1, f["vocab_size"]),
    "SG113": lambda f: _set(f, "state_slots", -1, -1),
    "SG115": lambda f: _swapped_owners(f),
}


#: Further ways to break a rule, by label: ``label → (rule code, mutation)``.
VARIANTS: dict[str, tuple[str, Mutation]] = {
    "SG110 (a middle block)": ("SG110", _middle_block_missing),
}


def broken(fields: Fields, code: str) -> Fields:
    """``fields`` with rule ``code`` (and only it) broken."""
    return MUTATIONS[code](fields)


def unbroken_rules() -> list[str]:
    """Value rules of ScheduledBatch in the registry that no mutation exercises.

    Non-empty means a rule was added without teaching the floor and the baseline about
    it: the comparison would no longer be fair.
    """
    return sorted(
        code for code, rule in contracts.REGISTRY.items()
        if rule.check is not None and "ScheduledBatch" in rule.applies_to
        and code not in MUTATIONS
    )
