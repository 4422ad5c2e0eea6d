"""Block allocation and slot arithmetic of the paged KV cache."""

from __future__ import annotations

import pytest
import torch

from specguard.runner.kv_cache import BlockAllocator, KVCache, blocks_for, slot_matrix


@pytest.mark.parametrize(("tokens", "blocks"), [(0, 0), (1, 1), (16, 1), (17, 2), (33, 3)])
def test_blocks_for_rounds_up(tokens, blocks):
    """A partly filled block still counts as a whole block."""
    assert blocks_for(tokens, 16) == blocks


def test_allocator_hands_out_blocks_first_in_first_out():
    """Freed blocks go to the back of the queue, so runs are reproducible."""
    allocator = BlockAllocator(4)
    first = allocator.allocate(3)
    allocator.free(first[:1])
    assert first == [0, 1, 2]
    assert allocator.allocate(2) == [3, 0]
    assert allocator.num_free == 0


def test_allocator_refuses_more_blocks_than_are_free():
    """Over-allocation is an error, not a silent short list."""
    allocator = BlockAllocator(2)
    with pytest.raises(MemoryError, match="3 KV blocks requested, 2 free"):
        allocator.allocate(3)


def test_slot_matrix_follows_the_block_table():
    """Token i of a seq lives at table[i // size] * size + i % size."""
    tables = torch.tensor([[2, 0, -1], [1, -1, -1]])
    slots = slot_matrix(tables, 4, 6)
    assert slots[0].tolist() == [8, 9, 10, 11, 0, 1]
    assert slots[1, :4].tolist() == [4, 5, 6, 7]


def test_padding_slot_writes_land_in_the_scratch_slot():
    """Slot -1 means "do not write": real slots keep their values."""
    cache = KVCache(num_layers=1, num_slots=4, num_heads=1, head_dim=2, device="cpu")
    keys = torch.ones(2, 1, 2, dtype=torch.float64)
    cache.write(0, torch.tensor([1, -1]), keys, 2 * keys)
    assert cache.keys[0, :4].sum().item() == 2.0
    assert cache.values[0, 1].tolist() == [[2.0, 2.0]]
    assert cache.keys[0, 4].tolist() == [[1.0, 1.0]]
