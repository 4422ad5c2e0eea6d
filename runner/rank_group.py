"""One data-parallel rank's view of its group: the collectives of a step, on torch.distributed.

Three collectives, in this order every step:

1. :meth:`RankGroup.gather_counts`: every rank's token count and whether it still has
   work (the engine's own, also with contracts off). From it each rank derives the padded
   size of the step and whether the group is done.
2. :meth:`RankGroup.gather_rows`: the contracts' row of metadata per rank
   (:class:`specguard.adapters.RankStep`), made only when contracts are on.
3. :meth:`RankGroup.exchange`: the step's forward collective. Under DP attention the MoE
   layers all-gather every rank's hidden states padded to the agreed size; the tiny model
   has no experts, so each rank keeps its own rows, but the shapes must agree exactly as
   they must in a real engine, or the collective fails.

The first two always have the same shape on every rank (two int64 values, and a row
whose width follows the shared contract settings), so they cannot mismatch; only the
third depends on what the ranks agreed. On a GPU the metadata goes through gloo on the
host and the exchange through NCCL on the device (the process group is created with
both backends), so checking the metadata adds no device sync.
"""

from __future__ import annotations

import datetime

import numpy as np
import torch
import torch.distributed as dist

__all__ = ["RankGroup"]


class RankGroup:
    """The process group of ``world`` data-parallel ranks, seen from ``rank``."""

    def __init__(self, rank: int, world: int) -> None:
        self.rank = rank
        self.world = world

    @classmethod
    def join(cls, rank: int, world: int, init_method: str, *, device: str = "cpu",
             timeout_s: float = 60.0) -> RankGroup:
        """Join the group (every rank must call this); collectives fail after ``timeout_s``.

        The timeout is the backstop: a rank that stops joining collectives at all (it
        crashed without closing its connections) makes the others raise after it.
        """
        backend = "cpu:gloo,cuda:nccl" if device.startswith("cuda") else "gloo"
        dist.init_process_group(backend, init_method=init_method, rank=rank,
                                world_size=world,
                                timeout=datetime.timedelta(seconds=timeout_s))
        return cls(rank, world)

    @staticmethod
    def leave() -> None:
        """Tear the process group down, if there is one."""
        if dist.is_initialized():
            dist.destroy_process_group()

    def gather_counts(self, num_tokens: int, busy: bool) -> np.ndarray:
        """``[world, 2]``: each rank's token count and whether it still has work."""
        mine = torch.tensor([num_tokens, int(busy)], dtype=torch.int64)
        return self._gather(mine).numpy()

    def gather_rows(self, row: np.ndarray) -> np.ndarray:
        """``[world, width]``: every rank's row of step metadata, in rank order."""
        return self._gather(torch.from_numpy(np.ascontiguousarray(row, dtype=np.int64))).numpy()

    def exchange(self, hidden: torch.Tensor, padded: int) -> torch.Tensor:
        """Join the step's forward collective with ``hidden`` padded to ``padded`` rows.

        Returns ``hidden`` itself: the reference model has no experts to hand the other
        ranks' tokens to. A rank whose rows exceed the padded size would lose them: that
        is an error, not a truncation.
        """
        rows = hidden.shape[0]
        if rows > padded:
            raise ValueError(f"rank {self.rank} runs {rows} tokens, more than the padded "
                             f"size {padded}")
        buffer = hidden.new_zeros((padded, *hidden.shape[1:]))
        buffer[:rows] = hidden
        gathered = [torch.empty_like(buffer) for _ in range(self.world)]
        dist.all_gather(gathered, buffer)
        return hidden

    def _gather(self, mine: torch.Tensor) -> torch.Tensor:
        gathered = [torch.empty_like(mine) for _ in range(self.world)]
        dist.all_gather(gathered, mine)
        return torch.stack(gathered)
