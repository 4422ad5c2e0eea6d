"""Recorded vLLM traffic turned back into objects with vLLM's own field names."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any


def scheduler_output(fields: dict[str, Any]) -> SimpleNamespace:
    """A SchedulerOutput with the recorded fields of one ``schedule`` event."""
    return SimpleNamespace(
        num_scheduled_tokens=fields["num_scheduled_tokens"],
        total_num_scheduled_tokens=fields["total_num_scheduled_tokens"],
        scheduled_spec_decode_tokens=fields["scheduled_spec_decode_tokens"],
        scheduled_new_reqs=[SimpleNamespace(**new) for new in fields["scheduled_new_reqs"]],
        scheduled_cached_reqs=SimpleNamespace(**fields["scheduled_cached_reqs"]),
        finished_req_ids=set(fields["finished_req_ids"]),
        num_spec_tokens_to_schedule=fields.get("num_spec_tokens_to_schedule"))
