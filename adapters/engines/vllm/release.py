"""Which vLLM release a runner is, and what that changes in how the view reads it."""

from __future__ import annotations

__all__ = ["KNOWN_VERSIONS", "LATEST", "MASKING_SINCE", "parse_version"]

#: vLLM releases whose traffic the conformance corpus holds, oldest first.
KNOWN_VERSIONS = ("0.11.0", "0.11.1", "0.33.0")
#: The release a view reads by default: the newest known one.
LATEST = KNOWN_VERSIONS[-1]
#: The first recorded release whose ``GPUModelRunner`` clamps ``-1`` draft slots to 0
#: before the target embeds them (``_preprocess``), whose rejection sampler rejects a
#: ``-1`` draft, and whose scheduler pads a fully cached new request with ``[-1] * k``.
MASKING_SINCE = (0, 33, 0)


def parse_version(version: str) -> tuple[int, int, int]:
    """``"0.11.1"``, ``"0.33.0+cu130"`` or ``"0.12.0rc1"`` as ``(0, 11, 1)`` and so on."""
    parts = str(version).split("+")[0].split(".")
    numbers = []
    for part in [*parts, "0", "0", "0"][:3]:
        digits = ""
        for char in part:
            if not char.isdigit():
                break
            digits += char
        numbers.append(int(digits or 0))
    return numbers[0], numbers[1], numbers[2]
