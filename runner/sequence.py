"""A request's state on the scheduler's side: known tokens, prefill progress, KV blocks."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

import numpy as np

from specguard.runner.workload import Request

__all__ = ["Seq", "Status"]

_NO_DRAFTS = np.zeros(0, dtype=np.int64)


class Status(enum.Enum):
    """Where a seq is: queued, holding KV blocks, or done."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class Seq:
    """One request as the scheduler tracks it.

    ``token_ids`` holds the tokens known on the host: the prompt and every output token
    delivered so far. Outputs arrive one step late (deferred output), so the step in
    flight may add up to ``pending`` more tokens that the scheduler cannot see yet.
    """

    seq_id: int
    arrival: int
    """Order of arrival; preemption takes the latest arrival first."""
    prompt_len: int
    max_tokens: int
    token_ids: list[int]
    status: Status = Status.WAITING
    prefill_len: int = 0
    """Tokens to prefill since the last admission (the prompt, or everything on recompute)."""
    num_computed: int = 0
    """Tokens of the prefill already written to the KV cache."""
    pending: int = 0
    """The most tokens the step in flight can still deliver: 0, 1 (prefill) or mtp_k + 1."""
    drafts: np.ndarray = field(default_factory=lambda: _NO_DRAFTS)
    """Draft tokens proposed after the last known token (delivered with it)."""
    block_table: list[int] = field(default_factory=list)
    num_preemptions: int = 0
    remote_prefill: bool = False
    """Its prompt is to be prefilled elsewhere when it is admitted (P/D)."""
    drafts_handed_over: bool = False
    """Its drafts came with it from the instance that prefilled it, and its first decode
    here has not been scheduled yet."""

    @classmethod
    def from_request(cls, request: Request, arrival: int) -> Seq:
        """A waiting seq for a new request, the ``arrival``-th to come."""
        return cls(request.request_id, arrival, request.prompt_len, request.max_tokens,
                   [int(t) for t in request.prompt], remote_prefill=request.remote_prefill)

    @property
    def num_tokens(self) -> int:
        """Tokens known on the host."""
        return len(self.token_ids)

    @property
    def num_output(self) -> int:
        """Output tokens known on the host."""
        return len(self.token_ids) - self.prompt_len

    @property
    def is_prefilling(self) -> bool:
        """Running, with prompt (or recompute) tokens not yet in the KV cache."""
        return self.status is Status.RUNNING and self.num_computed < self.prefill_len

    @property
    def finishes_in_flight(self) -> bool:
        """The step in flight is sure to deliver the last token this seq needs."""
        return self.pending > 0 and self.num_output + 1 >= self.max_tokens

    def output_tokens(self) -> np.ndarray:
        """The tokens the request was given (the delivery trims them to its stop id and
        its ``max_tokens``)."""
        return np.array(self.token_ids[self.prompt_len:], dtype=np.int64)
