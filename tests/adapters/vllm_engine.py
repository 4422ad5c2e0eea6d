"""vLLM V1's spec-decode objects as the tests build them: vLLM's names, types and meanings.

Written from the description of vLLM 0.11.x (``vllm/v1/core/sched/output.py``,
``vllm/v1/spec_decode/eagle.py``); nothing here imports vLLM. The two
``next_token_ids`` functions are the drafter's next-token choice before (0.11.0) and
after (0.11.1) the fix of PR #26231.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

VOCAB = 1000
PLACEHOLDER_TOKEN_ID = -1


@dataclass
class NewRequestData:
    """A request scheduled for the first time (the worker caches it)."""

    req_id: str
    prompt_token_ids: list[int] | None
    mm_features: list[Any]
    sampling_params: Any
    pooling_params: Any
    block_ids: tuple[list[int], ...]
    num_computed_tokens: int
    lora_request: Any = None


@dataclass
class CachedRequestData:
    """Diffs for requests the worker already holds: parallel lists indexed like req_ids."""

    req_ids: list[str]
    resumed_from_preemption: list[bool]
    new_token_ids: list[list[int]]
    new_block_ids: list[tuple[list[int], ...] | None]
    num_computed_tokens: list[int]


@dataclass
class SchedulerOutput:
    """What vLLM's scheduler hands the worker for one step."""

    scheduled_new_reqs: list[NewRequestData]
    scheduled_cached_reqs: CachedRequestData
    num_scheduled_tokens: dict[str, int]
    total_num_scheduled_tokens: int
    scheduled_spec_decode_tokens: dict[str, list[int]]
    scheduled_encoder_inputs: dict[str, list[int]] = field(default_factory=dict)
    num_common_prefix_blocks: list[int] = field(default_factory=list)
    finished_req_ids: set[str] = field(default_factory=set)
    free_encoder_mm_hashes: list[str] = field(default_factory=list)
    kv_connector_metadata: Any = None


def scheduler_output(decode: dict[str, list[int]], prefill: dict[str, int] | None = None,
                     computed: dict[str, int] | None = None) -> SchedulerOutput:
    """Cached decode requests (1 + len(drafts) tokens each) then new prefill requests."""
    prefill = prefill or {}
    computed = computed or {}
    counts = {r: 1 + len(d) for r, d in decode.items()} | dict(prefill)
    cached = CachedRequestData(
        req_ids=list(decode), resumed_from_preemption=[False] * len(decode),
        new_token_ids=[[] for _ in decode], new_block_ids=[None for _ in decode],
        num_computed_tokens=[computed.get(r, 50) for r in decode])
    new = [NewRequestData(r, list(range(n)), [], None, None, ([0],), computed.get(r, 0))
           for r, n in prefill.items()]
    return SchedulerOutput(
        scheduled_new_reqs=new, scheduled_cached_reqs=cached, num_scheduled_tokens=counts,
        total_num_scheduled_tokens=sum(counts.values()),
        scheduled_spec_decode_tokens={r: list(d) for r, d in decode.items() if d})


def attention_metadata(counts: list[int]) -> SimpleNamespace:
    """The ``CommonAttentionMetadata`` fields the drafter reads."""
    starts = torch.zeros(len(counts) + 1, dtype=torch.int32)
    starts[1:] = torch.cumsum(torch.tensor(counts, dtype=torch.int32), 0)
    return SimpleNamespace(query_start_loc=starts, query_start_loc_cpu=starts.clone(),
                           num_reqs=len(counts), num_actual_tokens=int(starts[-1]),
                           max_query_len=max(counts))


def _sampled_with_discards(sampled: torch.Tensor, discard: list[int]) -> torch.Tensor:
    """The runner marks discarded (partial-prefill) rows with -1 (``index_fill_``)."""
    out = sampled.clone()
    if discard:
        out.index_fill_(0, torch.tensor(discard), PLACEHOLDER_TOKEN_ID)
    return out


def next_token_ids_0_11_0(sampled: torch.Tensor, discard: list[int],
                          backup: torch.Tensor) -> torch.Tensor:
    """0.11.0 ``prepare_next_token_ids_padded``: one sampled column means 'all valid'."""
    sampled = _sampled_with_discards(sampled, discard)
    if sampled.shape[1] == 1:
        valid = torch.ones_like(sampled, dtype=torch.bool)
    else:
        valid = (sampled != PLACEHOLDER_TOKEN_ID) & (sampled < VOCAB)
    return _last_valid_or_backup(sampled, valid, backup)


def next_token_ids_0_11_1(sampled: torch.Tensor, discard: list[int],
                          backup: torch.Tensor) -> torch.Tensor:
    """0.11.1: the valid mask is always computed, so discarded rows take the backup token."""
    sampled = _sampled_with_discards(sampled, discard)
    valid = (sampled != PLACEHOLDER_TOKEN_ID) & (sampled < VOCAB)
    return _last_valid_or_backup(sampled, valid, backup)


def _last_valid_or_backup(sampled: torch.Tensor, valid: torch.Tensor,
                          backup: torch.Tensor) -> torch.Tensor:
    count = valid.sum(1)
    last = (count - 1).clamp(min=0)
    picked = sampled.gather(1, last.unsqueeze(1)).squeeze(1)
    return torch.where(count > 0, picked, backup).to(torch.int32)
