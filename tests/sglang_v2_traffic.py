"""SGLang 0.5.23's recorded hand-overs as the objects the worker hands over: a corpus
event's fields back into stand-ins with SGLang's attribute names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

__all__ = ["batch", "result"]


class _Mode:
    """SGLang's ForwardMode as the view meets it: a name and ``is_extend()``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def is_extend(self) -> bool:
        return self.name == "EXTEND"


def batch(fields: dict[str, Any]) -> SimpleNamespace:
    """The recorded ScheduleBatch at the worker's entry, with SGLang's attribute names."""
    spec = None
    if fields["forward_mode"] != "EXTEND":
        spec = SimpleNamespace(future_indices=fields["future_indices"],
                               bonus_tokens=fields["bonus_tokens"],
                               topk_index=fields["topk_index"])
    return SimpleNamespace(
        reqs=[SimpleNamespace(rid=rid) for rid in fields["rids"]],
        forward_mode=_Mode(fields["forward_mode"]), spec_info=spec,
        seq_lens=fields["seq_lens"], seq_lens_cpu=fields["seq_lens_cpu"],
        req_pool_indices=fields["req_pool_indices"], input_ids=fields.get("input_ids"),
        prefix_lens=fields.get("prefix_lens"), extend_lens=fields.get("extend_lens"))


def result(fields: dict[str, Any]) -> SimpleNamespace:
    """The recorded GenerationBatchResult of run_eagle_verify."""
    return SimpleNamespace(
        next_token_ids=fields["next_token_ids"], accept_lens=fields["accept_lens"],
        accept_index=fields["accept_index"], new_seq_lens=fields["new_seq_lens"],
        next_draft_input=SimpleNamespace(bonus_tokens=fields["bonus_tokens"]))

