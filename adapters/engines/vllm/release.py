"""Which vLLM release a runner is, and what that changes in how the view reads it.

A release is ``"X.Y.Z"``. What vLLM reports as its ``__version__`` may carry more: a
nightly or a fork's ``0.11.1.dev42+gabc1234``, a candidate ``0.24.0rc1``, a local build
``0.33.0+cu130``; each is read as the release it names (:func:`release_of`).
``SPECGUARD_VLLM_VERSION=<release>`` overrides what vLLM reports, for the plugin path,
where no ``version=`` can be passed from code (:func:`release_from_environment`).
"""

from __future__ import annotations

import os
import re

from specguard.contracts import ConfigError

__all__ = ["ENV_VERSION", "KNOWN_VERSIONS", "LATEST", "MASKING_SINCE", "MRV2_SINCE",
           "STRIDED_BITMASK_SINCE", "parse_version", "release_from_environment", "release_of"]

#: vLLM releases whose traffic the conformance corpus holds, oldest first.
KNOWN_VERSIONS = ("0.11.0", "0.11.1", "0.17.1", "0.21.0", "0.24.0", "0.29.0", "0.33.0")
#: The release a view reads by default: the newest known one.
LATEST = KNOWN_VERSIONS[-1]
#: The first release whose ``GPUModelRunner`` clamps ``-1`` draft slots to 0 before the
#: target embeds them (``_preprocess``), whose rejection sampler rejects a ``-1`` draft,
#: and whose scheduler pads a new request that decodes at once with ``[-1] * k`` (to keep
#: the batch's drafts uniform for full CUDA graphs). Read from the sources: 0.24.0 has
#: neither the clamp nor the padding, 0.25.0 and every later release have both.
MASKING_SINCE = (0, 25, 0)
#: The first release whose Model Runner V2 hands over what the MRV2 view reads: the
#: sampler output's ``num_sampled`` and ``num_rejected`` (before, ``sample()`` returns
#: them beside it, and up to 0.17 the output has neither), and the input batch's
#: per-request ``num_draft_tokens_per_req``, ``cu_num_logits_np`` and prefill progress
#: (before 0.21 a scalar draft count only). Read from the sources of 0.12.0 to 0.33.0.
MRV2_SINCE = (0, 24, 0)
#: The first recorded release whose grammar bitmask gives every structured-output request
#: a block of the same number of rows (``rows // requests``, of which the runner takes the
#: request's ``1 + K``); before it the blocks are packed, ``1 + K`` rows each.
STRIDED_BITMASK_SINCE = (0, 33, 0)
#: The environment variable that names the release on the plugin path.
ENV_VERSION = "SPECGUARD_VLLM_VERSION"

# X.Y[.Z], then PEP 440 pre, post and dev parts in any spelling vLLM's builds use, then
# a +local label: 0.11.1, 0.11.1.dev42+gabc1234, 0.24.0rc1, 0.33.0.post1+cu130.
_VERSION = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?"
                      r"(?:[.-]?(?:a|b|c|rc|alpha|beta|pre|preview|post|dev)\.?\d*)*"
                      r"(?:\+[A-Za-z0-9.]+)?", re.IGNORECASE)


def release_of(version: str) -> str:
    """The release ``version`` names: ``"0.11.1.dev42+gabc"`` and ``"0.11.1"`` are
    ``"0.11.1"``, ``"0.24.0rc1"`` is ``"0.24.0"``. ValueError if it names none."""
    found = _VERSION.fullmatch(str(version).strip())
    if found is None:
        raise ValueError(f"{version!r} is not a vLLM version (expected X.Y.Z, optionally "
                         "with rc, dev, post or +local parts)")
    major, minor, patch = found.group(1), found.group(2), found.group(3) or "0"
    return f"{int(major)}.{int(minor)}.{int(patch)}"


def parse_version(version: str) -> tuple[int, int, int]:
    """``"0.11.1"``, ``"0.33.0+cu130"`` or ``"0.12.0rc1"`` as ``(0, 11, 1)`` and so on;
    a string that names no release reads as ``(0, 0, 0)``."""
    try:
        release = release_of(version)
    except ValueError:
        return 0, 0, 0
    major, minor, patch = (int(part) for part in release.split("."))
    return major, minor, patch


def release_from_environment() -> str | None:
    """The release ``SPECGUARD_VLLM_VERSION`` names, or None when it is unset or empty.

    A value that names no release is a :class:`~specguard.contracts.ConfigError`, as a
    bad ``SPECGUARD_MODE`` is: a typo must not silently fall back to what vLLM reports.
    """
    value = os.environ.get(ENV_VERSION, "").strip()
    if not value:
        return None
    try:
        return release_of(value)
    except ValueError as error:
        raise ConfigError(f"{ENV_VERSION}: {error}") from None
