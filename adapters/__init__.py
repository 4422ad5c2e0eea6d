"""specguard adapters: how engines adopt the contracts.

Decorators and guards for runner methods, engine adapters (ATOM, vLLM), step-to-step
state, the pytest plugin and violation snapshots. Knows the contracts; knows no runner.
"""

from adapters._guard import guard as guard

__all__ = ["guard"]
