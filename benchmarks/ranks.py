"""What checking data-parallel ranks costs: one small collective per step, against the step.

Two ranks (forked processes, gloo on the CPU) serve a small workload with strict
contracts at the default depth. Each rank times its step and, inside it, the contracts'
collective: gathering every rank's row of metadata and checking it. The slowest rank's
figures are reported, per step; the engine's own collectives (the token counts and the
step's exchange) are part of the step either way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["QUICK_RANKS", "RANKS_WORKLOAD", "rank_collective_cost"]

#: Small enough to stay cheap in every bench run.
RANKS_WORKLOAD = {"requests": 8, "max_prompt": 64, "max_tokens": 32}
QUICK_RANKS = {"requests": 4, "max_prompt": 32, "max_tokens": 8}


def rank_collective_cost(workload: dict[str, int] | None = None, ranks: int = 2) -> dict[str, Any]:
    """Per-step time and the share of it in the contracts' collective, or why not measured."""
    try:
        from specguard.runner.config import EngineConfig
        from specguard.runner.data_parallel import FINISHED, RankJob, run_ranks
        from specguard.runner.workload import synthetic_requests
    except ModuleNotFoundError as error:
        return {"available": False, "reason": f"{error.name} is not installed"}
    shape = workload or RANKS_WORKLOAD
    config = EngineConfig(num_blocks=256, max_num_seqs=8)
    requests = synthetic_requests(shape["requests"], vocab_size=config.model.vocab_size,
                                  max_prompt=shape["max_prompt"],
                                  max_tokens=shape["max_tokens"])
    outcomes = run_ranks(RankJob(config, tuple(requests), ranks, "strict", "metadata"))
    if any(o.status != FINISHED for o in outcomes):
        failed = next(o for o in outcomes if o.status != FINISHED)
        return {"available": False, "reason": f"rank {failed.rank} {failed.status}: "
                f"{failed.report}"}
    steps = max(o.step for o in outcomes)
    step_s = max(o.stats.step_seconds for o in outcomes)
    collective_s = max(o.agreement_seconds for o in outcomes)
    return {
        "available": True, "ranks": ranks, "steps": steps,
        "workload": ", ".join(f"{k} {v}" for k, v in shape.items()),
        "step_ms": step_s / steps * 1e3, "collective_ms": collective_s / steps * 1e3,
        "collective_share": collective_s / step_s if step_s else 0.0,
    }
