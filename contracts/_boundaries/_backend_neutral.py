"""Backend-neutral helpers that the boundary objects' rules share, numpy and torch alike.

The implementation behind the public :mod:`specguard.contracts.ops`, which publishes the
ones any rule author needs; this module also holds the ones only these rules use.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specguard.contracts._core._arrays import UNSIGNED, array_kind, host_value

__all__ = [
    "arange_like",
    "ceil_div",
    "clip_columns",
    "host_value",
    "last_block",
    "number_text",
    "row_col",
    "row_entries",
    "value_text",
    "within_columns",
]


_INT32_MAX = 2**31 - 1


def arange_like(a: Any, n: int) -> Any:
    """``arange(n)`` on the backend and device of ``a``: a tensor's device, else numpy."""
    if array_kind(a) != "torch":
        return np.arange(n)
    import torch

    return torch.arange(n, device=a.device)


def last_block(lengths: Any, block_size: int) -> Any:
    """``(lengths - 1) // block_size``: the last block a context needs (-1 when empty).

    ``ceil(n / size) - 1`` computed without ever going past ``n``, so int32 lengths near
    2**31 cannot wrap (``n + size - 1`` would); a shift (the same floor) for powers of two.
    """
    size = int(block_size)
    if size > _INT32_MAX:  # a divisor past the dtype's range: every length needs 1 block
        size = min(size, _int_max(lengths))
    if size > 0 and size & (size - 1) == 0:
        return (lengths - 1) >> (size.bit_length() - 1)
    return (lengths - 1) // size


def ceil_div(a: Any, divisor: int) -> Any:
    """``ceil(a / divisor)`` for non-negative ``a``, as :func:`last_block` plus one: it
    cannot wrap where ``a + divisor - 1`` would."""
    return last_block(a, divisor) + 1


def _int_max(a: Any) -> int:
    if isinstance(a, np.ndarray):
        return int(np.iinfo(a.dtype).max)
    import torch

    return int(torch.iinfo(a.dtype).max)


def within_columns(columns: Any, width: int) -> bool:
    """True when every column is known, on the host, to lie in ``[0, width)``.

    False means "not known": some column is outside, there are none, or they live on a
    device (reading the answer would sync). One unsigned maximum answers: negative
    columns wrap to huge unsigned values.
    """
    if not isinstance(columns, np.ndarray) or columns.size == 0:
        return False
    unsigned = UNSIGNED.get(columns.dtype)
    # A width past the signed range would let a negative column's unsigned image pass.
    return unsigned is not None and width <= 2 ** (8 * columns.itemsize - 1) and bool(
        np.maximum.reduce(columns.view(unsigned), None) < width)


def clip_columns(columns: Any, width: int) -> Any:
    """``columns`` clipped to ``[0, width)`` in place: callers pass a temporary."""
    if isinstance(columns, np.ndarray):
        np.maximum(columns, 0, out=columns)
        return np.minimum(columns, width - 1, out=columns)
    return columns.clamp_(0, width - 1)


def row_entries(table: Any, columns: Any) -> Any:
    """``table[i, columns[i]]`` for every row ``i``; ``columns`` must be in range.

    A 2-D fancy index costs several times one gather from the flattened table, which a
    C-contiguous numpy table offers without a copy; torch has ``gather`` for this.
    """
    rows, width = table.shape[0], table.shape[1]
    if isinstance(table, np.ndarray):
        if not table.flags.c_contiguous:
            return table[np.arange(rows), columns]
        index = np.arange(0, rows * width, width)
        index += columns
        return table.reshape(-1)[index]
    import torch

    return table.gather(1, columns.to(torch.int64).unsqueeze(1)).squeeze(1)


def row_col(flat_index: int, width: int) -> tuple[int, int]:
    """Row and column of a flat index into a row-major matrix of ``width`` columns."""
    return divmod(flat_index, max(width, 1))


def value_text(a: Any, flat_index: int) -> str:
    """`` is -1`` when the value is readable on the host, else the empty string."""
    value = host_value(a, flat_index)
    return "" if value is None else f" is {value}"


def number_text(a: Any, flat_index: int) -> str:
    """`` -1`` when the value is readable on the host, else the empty string."""
    value = host_value(a, flat_index)
    return "" if value is None else f" {value}"
