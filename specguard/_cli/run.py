"""``specguard run``: the reference MTP engine's main job (:mod:`specguard.runner.main_job`).

The options and exit codes belong to the job, which benchmarks and the docs read too;
the job imports the engine, and so torch, only once a run starts.
"""

from __future__ import annotations

from specguard.runner.main_job import add_arguments, run

__all__ = ["HELP", "add_arguments", "run"]

HELP = "run a synthetic workload through the reference MTP engine"
