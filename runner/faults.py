"""The fault catalogue: real bugs of the scheduler/runner boundary, reproducible on demand.

Each fault switches one code path of the reference engine to the buggy variant that
shipped in a real engine; nothing builds a bad object directly. With contracts off the
engine then fails the way the original did (an IndexError deep in the runner, an
embedding lookup of ``-1``, or tokens that differ from plain greedy decoding); with strict
contracts at full depth it stops at the boundary the bad data crosses first, with a
violation naming the rule, the seq and its batch position.

``specguard faults`` lists them.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

__all__ = [
    "COMPACT_BLOCK_TABLES",
    "COMPACT_DRAFT_ROWS",
    "DUPLICATE_SEQ_ID",
    "FAULTS",
    "SENTINEL_IN_TARGET_INPUT",
    "SENTINEL_TO_EMBEDDING",
    "WRONG_DRAFT_WIDTH",
    "Fault",
    "add_arguments",
    "run",
]


@dataclass(frozen=True)
class Fault:
    """One injectable bug: what it does, where it lives, and what catches it."""

    name: str
    summary: str
    sites: tuple[str, ...]
    """The functions whose buggy variant the fault switches on."""
    origin: str
    rule: str
    """The rule that stops it under strict contracts at full depth."""


COMPACT_DRAFT_ROWS = "compact-draft-rows"
SENTINEL_TO_EMBEDDING = "sentinel-to-embedding"
COMPACT_BLOCK_TABLES = "compact-block-tables"
DUPLICATE_SEQ_ID = "duplicate-seq-id"
WRONG_DRAFT_WIDTH = "wrong-draft-width"
SENTINEL_IN_TARGET_INPUT = "sentinel-in-target-input"

FAULTS: dict[str, Fault] = {f.name: f for f in (
    Fault(COMPACT_DRAFT_ROWS,
          "draft rows only for decode seqs that have drafts, read by batch position",
          ("Scheduler._draft_rows",),
          "ATOM #1444: IndexError: index 127 is out of bounds for axis 0 with size 127",
          "SG101"),
    Fault(SENTINEL_TO_EMBEDDING,
          "a discarded chunked-prefill row's -1 reaches the MTP head's embed_tokens",
          ("drafter.next_token_ids",),
          "vLLM #26231: the max_gen_len == 1 fast path skipping the valid mask",
          "SG301"),
    Fault(COMPACT_BLOCK_TABLES,
          "block tables gathered before admissions are allocated, empty ones dropped",
          ("Scheduler._block_table_rows", "Scheduler.schedule"),
          "ATOM C12/C18: block_tables filtered by `if seq.block_table`, gathered before "
          "the scheduler's last mutation",
          "SG105"),
    Fault(DUPLICATE_SEQ_ID,
          "a preempted seq is queued to wait but never leaves the running list",
          ("Scheduler._preempt",),
          "ATOM C14 / SGLang #18984: retract paths that leave a request in two queues",
          "SG010"),
    Fault(WRONG_DRAFT_WIDTH,
          "a seq near its token limit is scheduled fewer than mtp_k drafts",
          ("Scheduler._decode_width",),
          "ATOM C2/C5: ragged draft rows in a runner that reshapes decode tokens to "
          "(num_decode, mtp_k + 1)",
          "SG103"),
    Fault(SENTINEL_IN_TARGET_INPUT,
          "-1 draft padding of a first decode is left in the target model's input ids",
          ("Scheduler._draft_rows", "ModelRunner._previous_rows"),
          "vLLM #47029: a first decode padded with -1 drafts; the runner refills from the "
          "device only the seqs it verified last step",
          "SG301"),
)}


def check_name(name: str | None) -> str | None:
    """``name`` if it is a known fault (or None); ValueError listing the known ones."""
    if name is not None and name not in FAULTS:
        raise ValueError(f"unknown fault {name!r}; known: {', '.join(FAULTS)}")
    return name


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard faults``."""
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="also print where each fault lives and the bug it reproduces")


def run(args: argparse.Namespace) -> int:
    """Print the catalogue, one fault a line."""
    width = max(len(name) for name in FAULTS)
    for fault in FAULTS.values():
        print(f"{fault.name:<{width}}  {fault.summary}")
        if args.verbose:
            print(f"{'':<{width}}    in {', '.join(fault.sites)}; caught by {fault.rule}")
            print(f"{'':<{width}}    from: {fault.origin}")
    return 0
