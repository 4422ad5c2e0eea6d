"""``specguard faults``: the fault catalogue of the reference engine, one fault a line."""

from __future__ import annotations

import argparse
import dataclasses
import json

from specguard.runner.faults import FAULTS

__all__ = ["HELP", "add_arguments", "run"]

HELP = "list the fault catalogue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard faults``."""
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="also print where each fault lives and the bug it reproduces")
    parser.add_argument("--json", action="store_true",
                        help="machine-readable output: every fault with all its fields")


def run(args: argparse.Namespace) -> int:
    """Print the catalogue, one fault a line (or all of it as JSON)."""
    if args.json:
        print(json.dumps([{**dataclasses.asdict(fault), "rules": list(fault.rules)}
                          for fault in FAULTS.values()], indent=2))
        return 0
    width = max(len(name) for name in FAULTS)
    for fault in FAULTS.values():
        print(f"{fault.name:<{width}}  {fault.summary}")
        if args.verbose:
            print(f"{'':<{width}}    in {', '.join(fault.sites)}; caught by "
                  f"{' or '.join(fault.rules)} on {fault.subject}")
            print(f"{'':<{width}}    from: {fault.origin}")
            print(f"{'':<{width}}    contracts off: {fault.unguarded}")
            if fault.across_ranks:
                print(f"{'':<{width}}    needs --dp 2 or more; injected on the last rank")
    return 0
