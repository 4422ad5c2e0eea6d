"""What every engine adapter provides, stated once: the hand-overs of its views, its
installer, and the range of rule codes it owns.

An engine lives in a folder of its own, ``adapters/engines/<engine>/``:

``view.py``
    a view class per runner the engine has (:class:`EngineView`): it reads the
    engine's own objects at each hand-over, by duck typing (the engine is never
    imported), and turns them into boundary objects;
``install.py``
    ``install`` / ``uninstall`` / ``installed`` on a live runner (:class:`EngineInstaller`):
    every method to wrap and every configuration value is checked before the first one
    is wrapped, and a shape it does not know is refused with :class:`UnsupportedEngine`;
``layout.py``
    the engine's own layout rules, with codes inside its range;

and its ``__init__`` registers one :class:`Engine` in :data:`ENGINES`. The architecture
tests hold every registered engine to this shape (see "Adding an engine" in the design
page).
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol, runtime_checkable

from specguard.adapters._install import UnsupportedEngine
from specguard.contracts import REGISTRY, Rule

__all__ = ["ENGINES", "Engine", "EngineInstaller", "EngineView", "UnsupportedEngine",
           "engine_of", "register_engine"]


@runtime_checkable
class EngineView(Protocol):
    """The hand-overs of one speculative step, as a view of one engine's runner reads them.

    Each method takes the engine's own objects at one hand-over, builds the boundary
    objects they carry (so they are validated under the current mode, and a violation
    names the rule, the engine's request id and its batch position), tells the step
    tracker when there is one, and returns what the next hand-over of the step needs.
    A view keeps state from step to step: one view per runner.
    """

    mtp_k: int
    """Draft tokens per decode seq (``num_speculative_tokens``)."""
    vocab_size: int
    """The target model's vocabulary size: every embedded id is in ``[0, vocab_size)``."""
    tracker: Any
    """The :class:`~specguard.adapters.StepTracker` following the steps, or None."""

    def schedule(self, *handed: Any, **context: Any) -> Any:
        """Scheduler → runner: the step's batch, before the forward reads it.

        Contract: one row per scheduled seq in the runner's batch order; each decode
        seq's drafts are its own; every id the forward embeds is in the vocabulary.
        Returns the checked step, which the later hand-overs of the step take.
        """
        ...

    def verified(self, *handed: Any, **context: Any) -> Any:
        """Verifier → scheduler: the rejection sampler's rows for the step.

        Contract: each row is the seq's accepted drafts, then one sampled token, then
        padding; accepted counts are within the drafts the row carried.
        """
        ...

    def drafted(self, *handed: Any, **context: Any) -> Any:
        """Drafter → next step: the proposals, one row per seq of the step, in order.

        Contract: the rows are the step's seqs in batch order, of the step's draft
        width, every proposal in the vocabulary.
        """
        ...


@runtime_checkable
class EngineInstaller(Protocol):
    """Putting an engine's view around a live runner, and taking it off again.

    ``install`` checks everything it will wrap first, then wraps, so a failure leaves
    the runner untouched and raises :class:`UnsupportedEngine`; ``uninstall`` restores
    the runner exactly; ``installed`` is the two as a context manager.
    """

    def install(self, runner: Any, /, *args: Any, **options: Any) -> Any:
        """Wrap the runner's hand-over methods; return the view (or installation)."""
        ...

    def uninstall(self, runner: Any, /) -> None:
        """Undo :meth:`install` on the runner."""
        ...

    def installed(self, runner: Any, /, *args: Any,
                  **options: Any) -> AbstractContextManager[Any]:
        """:meth:`install` for the duration of a ``with`` block."""
        ...


@dataclass(frozen=True)
class Engine:
    """One supported engine: what the catalogue, the docs and the tests read about it."""

    name: str
    """Its folder under ``adapters/engines/`` (``"atom"``, ``"vllm"``)."""
    title: str
    """How the docs name it (``"ATOM"``, ``"vLLM"``)."""
    codes: range
    """The rule codes it owns (``range(610, 620)`` is SG610-SG619): its layout rules
    are declared inside it, and no two engines' ranges overlap."""
    views: tuple[type, ...]
    """Its view classes, one per runner kind (each an :class:`EngineView`)."""
    installer: ModuleType
    """Its ``install`` module (an :class:`EngineInstaller`)."""
    corpus: Mapping[str, str]
    """Its folders under ``tests/conformance/corpus/`` (recorded real traffic), each with
    the title the conformance page gives it."""
    guide: str
    """The section of ``docs/guides/engines.md`` that documents it."""

    @property
    def package(self) -> str:
        """The module path its code lives under."""
        return f"specguard.adapters.engines.{self.name}"

    def rules(self) -> tuple[Rule, ...]:
        """The rules declared by its modules, in code order."""
        prefix = self.package + "."
        return tuple(r for r in REGISTRY.values()
                     if getattr(r.check, "__module__", "").startswith(prefix))

    def owns(self, code: str) -> bool:
        """Whether ``code`` (``"SG612"``) is in its range."""
        return code[2:].isdigit() and int(code[2:]) in self.codes


#: Every supported engine, by name, in the order they registered.
ENGINES: dict[str, Engine] = {}


def register_engine(engine: Engine) -> Engine:
    """Add ``engine`` to :data:`ENGINES`; its name and code range must be its own."""
    for other in ENGINES.values():
        if other.name == engine.name:
            raise ValueError(f"engine {engine.name!r} is registered twice")
        if set(other.codes) & set(engine.codes):
            raise ValueError(f"engine {engine.name!r}: codes SG{engine.codes.start}-"
                             f"SG{engine.codes.stop - 1} overlap {other.name!r}'s")
    ENGINES[engine.name] = engine
    return engine


def engine_of(code: str) -> Engine | None:
    """The engine that owns rule ``code``, or None for an engine-neutral rule."""
    return next((e for e in ENGINES.values() if e.owns(code)), None)
