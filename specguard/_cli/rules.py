"""``specguard rules``: the rule catalogue, read from the registry."""

from __future__ import annotations

import argparse
import json
import sys

from specguard import adapters as _adapters  # noqa: F401  (registers the adapters' rules)
from specguard import contracts

__all__ = ["HELP", "add_arguments", "run"]

HELP = "print the rule catalogue"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard rules``."""
    parser.add_argument("codes", nargs="*", metavar="CODE",
                        help="only these rules, with why they exist and the bug (e.g. SG101)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--verbose", "-v", action="store_true", help="also print why and the bug")


def run(args: argparse.Namespace) -> int:
    """Print the registered rules (all, or those named), in code order."""
    wanted = [code.upper() for code in args.codes]
    unknown = [code for code in wanted if code not in contracts.REGISTRY]
    if unknown:
        print(f"specguard rules: no rule {', '.join(unknown)}; `specguard rules` lists them",
              file=sys.stderr)
        return 2
    rules = [contracts.REGISTRY[code] for code in sorted(wanted or contracts.REGISTRY)]
    verbose = args.verbose or bool(wanted)
    if args.json:
        print(json.dumps([
            {"code": r.code, "title": r.title, "boundary": r.boundary.value,
             "depth": r.depth.value, "applies_to": list(r.applies_to), "why": r.why,
             "bug": r.bug, "at_full_depth": r.deeper or None}
            for r in rules
        ], indent=2, ensure_ascii=False))
        return 0
    for r in rules:
        print(f"{r.code}  {r.title}  [{r.boundary.value}, {r.depth.value}]")
        if verbose:
            print(f"        why: {' '.join(r.why.split())}")
            print(f"        bug: {r.bug}")
            if r.deeper:
                print(f"        at full depth: {' '.join(r.deeper.split())}")
    return 0
