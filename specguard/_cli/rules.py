"""``specguard rules``: the rule catalogue, read from the registry."""

from __future__ import annotations

import argparse
import json

from specguard import adapters as _adapters  # noqa: F401  (registers the adapters' rules)
from specguard import contracts

__all__ = ["HELP", "add_arguments", "run"]

HELP = "print the rule catalogue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard rules``."""
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print why and the bug")


def run(args: argparse.Namespace) -> int:
    """Print every registered rule, in code order."""
    rules = [contracts.REGISTRY[code] for code in sorted(contracts.REGISTRY)]
    if args.json:
        print(json.dumps([
            {"code": r.code, "title": r.title, "boundary": r.boundary.value,
             "depth": r.depth.value, "applies_to": list(r.applies_to), "why": r.why,
             "bug": r.bug}
            for r in rules
        ], indent=2, ensure_ascii=False))
        return 0
    for r in rules:
        print(f"{r.code}  {r.title}  [{r.boundary.value}, {r.depth.value}]")
        if args.verbose:
            print(f"        why: {' '.join(r.why.split())}")
            print(f"        bug: {r.bug}")
    return 0
