"""``specguard bench``: validation cost against the numpy floor, in one run."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from specguard._cli._common import at_least

__all__ = ["HELP", "add_arguments", "run"]

HELP = "measure validation cost against the numpy floor"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``specguard bench``."""
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--quick", action="store_true",
                        help="a fast smoke run: small batches, few short repeats")
    parser.add_argument("--repeats", type=at_least(1), default=None,
                        help="timings per figure (the median is reported; default 21)")
    parser.add_argument("--wall", action="store_true",
                        help="time with the wall clock instead of the process's CPU time")


def run(args: argparse.Namespace) -> int:
    """Measure, then print the table (or the JSON report) on stdout."""
    from specguard.benchmarks.report import format_report
    from specguard.benchmarks.suite import Settings, run_suite

    settings = Settings.quick() if args.quick else Settings()
    if args.repeats is not None:
        settings = dataclasses.replace(settings, repeats=args.repeats)
    if args.wall:
        settings = dataclasses.replace(settings, clock=time.perf_counter)
    report = run_suite(settings, lambda line: print(f"bench: {line}", file=sys.stderr))
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        print(format_report(report))
    return 0
