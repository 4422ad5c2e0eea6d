"""Paged KV cache: a block allocator on the host and the key/value storage on the device.

Slots are numbered ``block * block_size + offset``. One scratch slot sits past the last
real one, so a slot of ``-1`` (padding, "do not write") lands there without a mask and
without a device sync.
"""

from __future__ import annotations

from collections import deque

import torch

__all__ = ["BlockAllocator", "KVCache", "blocks_for", "slot_matrix"]


def blocks_for(num_tokens: int, block_size: int) -> int:
    """Blocks needed to hold ``num_tokens`` tokens."""
    return -(-num_tokens // block_size)


class BlockAllocator:
    """Hands out free block ids first-in first-out, so runs are reproducible."""

    def __init__(self, num_blocks: int) -> None:
        self.num_blocks = num_blocks
        self._free: deque[int] = deque(range(num_blocks))

    @property
    def num_free(self) -> int:
        """Blocks not held by any seq."""
        return len(self._free)

    def allocate(self, count: int) -> list[int]:
        """Take ``count`` blocks; the caller checks ``num_free`` first."""
        if count > len(self._free):
            raise MemoryError(f"{count} KV blocks requested, {len(self._free)} free")
        return [self._free.popleft() for _ in range(count)]

    def free(self, blocks: list[int]) -> None:
        """Return blocks to the pool."""
        self._free.extend(blocks)


class KVCache:
    """Keys and values of every layer, indexed by slot: ``[layers, slots + 1, heads, dim]``."""

    def __init__(
        self, *, num_layers: int, num_slots: int, num_heads: int, head_dim: int,
        device: torch.device | str, dtype: torch.dtype = torch.float64,
    ) -> None:
        shape = (num_layers, num_slots + 1, num_heads, head_dim)
        self.num_slots = num_slots
        self.keys = torch.zeros(shape, dtype=dtype, device=device)
        self.values = torch.zeros(shape, dtype=dtype, device=device)

    def write(self, layer: int, slots: torch.Tensor, keys: torch.Tensor,
              values: torch.Tensor) -> None:
        """Store one layer's keys and values at ``slots`` (``-1`` goes to the scratch slot)."""
        self.keys[layer].index_copy_(0, _scratch(slots, self.num_slots), keys)
        self.values[layer].index_copy_(0, _scratch(slots, self.num_slots), values)


def _scratch(slots: torch.Tensor, num_slots: int) -> torch.Tensor:
    return torch.where(slots < 0, num_slots, slots)


def slot_matrix(block_tables: torch.Tensor, block_size: int, length: int) -> torch.Tensor:
    """Per seq, the slots of its first ``length`` tokens: ``[num_seqs, length]``.

    Padding entries of a block table (``-1``) read as block 0; attention masks every key
    past a seq's context, so their contents never matter.
    """
    offsets = torch.arange(block_size, device=block_tables.device)
    slots = block_tables.clamp(min=0)[:, :, None] * block_size + offsets
    return slots.reshape(block_tables.shape[0], -1)[:, :length]
