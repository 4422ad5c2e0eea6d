"""Every engine has one shape: the "Adding an engine" checklist of the design page, each
step held by a test here (or by the named test of another suite)."""

from __future__ import annotations

import ast
import inspect
import re
import types
from pathlib import Path

import pytest

from specguard import contracts
from specguard.adapters import ENGINES, EngineInstaller, EngineView, UnsupportedEngine
from specguard.adapters.engines import Engine, engine_of, register_engine

ROOT = Path(__file__).resolve().parents[2]
ENGINES_DIR = ROOT / "adapters" / "engines"
GUIDE = ROOT / "docs" / "guides" / "engines.md"
CORPUS = ROOT / "tests" / "conformance" / "corpus"
NAMES = sorted(ENGINES)
HAND_OVERS = ("schedule", "verified", "drafted")


def test_every_engine_folder_registers_its_engine():
    """Step 1: a folder under adapters/engines/ is an engine, and registers one Engine."""
    folders = sorted(p.name for p in ENGINES_DIR.iterdir()
                     if (p / "__init__.py").is_file() and not p.name.startswith("_"))
    assert folders == NAMES
    for name in NAMES:
        assert ENGINES[name].name == name
        assert {"view.py", "install.py"} <= {p.name for p in (ENGINES_DIR / name).iterdir()}


@pytest.mark.parametrize("name", NAMES)
def test_every_view_has_the_hand_overs_of_the_interface(name):
    """Step 2: each view class is an EngineView: the three hand-overs, documented."""
    for view in ENGINES[name].views:
        for method in HAND_OVERS:
            member = getattr(view, method, None)
            assert callable(member), f"{view.__name__} has no {method}()"
            assert inspect.getdoc(member), f"{view.__name__}.{method}() states no contract"
        assert view.__module__.startswith(ENGINES[name].package + ".")


def test_the_view_protocol_tells_a_view_from_another_object():
    """isinstance against the protocol is not vacuous: a view passes, a plain object not."""
    from specguard.adapters import AtomView, Mrv2View, VllmView

    views = [AtomView(mtp_k=2, vocab_size=100, block_size=16),
             VllmView(mtp_k=2, vocab_size=100), Mrv2View(mtp_k=2, vocab_size=100)]
    assert all(isinstance(view, EngineView) for view in views)
    assert not isinstance(types.SimpleNamespace(schedule=len, mtp_k=2), EngineView)


@pytest.mark.parametrize("name", NAMES)
def test_every_installer_is_an_engine_installer(name):
    """Step 3: install / uninstall / installed, and a runner it does not know is refused
    with the engines' common error, under SpecguardError."""
    installer = ENGINES[name].installer
    assert isinstance(installer, EngineInstaller)
    assert not isinstance(types.SimpleNamespace(install=len), EngineInstaller)
    with pytest.raises(UnsupportedEngine) as raised:
        installer.install(object())
    assert isinstance(raised.value, contracts.SpecguardError)
    assert str(raised.value)  # one line naming what differs


def test_the_installers_error_sits_under_the_root_and_outside_the_other_branches():
    assert issubclass(UnsupportedEngine, contracts.SpecguardError)
    assert not issubclass(UnsupportedEngine, contracts.ContractViolation | contracts.ConfigError)


@pytest.mark.parametrize("name", NAMES)
def test_every_engine_rule_is_coded_inside_its_range(name):
    """Step 4: an engine declares its layout rules inside its own range."""
    engine = ENGINES[name]
    rules = engine.rules()
    assert rules, f"{name} declares no rule of its own"
    outside = [r.code for r in rules if not engine.owns(r.code)]
    assert outside == []


def test_no_rule_outside_an_engine_uses_an_engine_code():
    packages = tuple(e.package + "." for e in ENGINES.values())
    misplaced = [r.code for r in contracts.REGISTRY.values()
                 if engine_of(r.code) is not None
                 and not getattr(r.check, "__module__", "").startswith(packages)]
    assert misplaced == []


def test_ranges_are_refused_when_they_overlap():
    """The registry keeps ranges apart (and is not vacuous about it)."""
    first = ENGINES[NAMES[0]]
    clash = Engine(name="other", title="Other", codes=range(first.codes.start, first.codes.start
                                                                + 1),
                   views=(), installer=types.ModuleType("x"), corpus={}, guide="Other")
    with pytest.raises(ValueError, match="overlap"):
        register_engine(clash)
    assert "other" not in ENGINES
    assert engine_of(f"SG{first.codes.start}") is first
    assert engine_of("SG601") is None


@pytest.mark.parametrize("name", NAMES)
def test_every_engine_has_its_guide_section_and_recorded_traffic(name):
    """Steps 5 and 6: a section of the engines guide, and a conformance corpus per folder
    it claims (recorded from the engine's own code; replayed by tests/conformance)."""
    engine = ENGINES[name]
    headings = re.findall(r"^## (.+)$", GUIDE.read_text(encoding="utf-8"), flags=re.M)
    assert engine.guide in headings
    for folder in engine.corpus:
        assert any((CORPUS / folder).rglob("*.json")), f"no recorded traffic in {folder}/"
        assert (ROOT / "tests" / "conformance"
                / f"test_{folder.replace('-', '_')}_conformance.py").is_file()


def _imported(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_engines_know_the_neutral_adapters_and_not_each_other():
    """The neutral half of adapters/ knows no engine (but the package's curated API and
    the examples of the engines' rules), and no engine imports another."""
    wrong = []
    allowed = {"__init__.py", "examples.py"}
    for path in sorted((ROOT / "adapters").glob("*.py")):
        if path.name not in allowed and any(
                m.startswith("specguard.adapters.engines") for m in _imported(path)):
            wrong.append(path.name)
    for name in NAMES:
        others = [f"specguard.adapters.engines.{o}" for o in NAMES if o != name]
        for path in sorted((ENGINES_DIR / name).rglob("*.py")):
            wrong += [f"{path.relative_to(ROOT)} imports {m}" for m in _imported(path)
                      if any(m == o or m.startswith(o + ".") for o in others)]
    assert wrong == []


def test_the_error_tree_drawn_in_the_root_docstring_names_every_exception():
    """The tree in contracts/_core/_errors.py lists every SpecguardError subclass that
    the library defines, found by walking the subclasses once every layer is loaded."""
    import specguard.adapters
    import specguard.runner  # its exceptions join the walk
    from specguard.adapters import corpus
    from specguard.contracts._core import _errors

    def subclasses(root: type) -> list[type]:
        found = []
        for cls in root.__subclasses__():
            found += [cls, *subclasses(cls)]
        return found

    tree = _errors.__doc__ or ""
    ours = [cls for cls in subclasses(contracts.SpecguardError)
            if cls.__module__.startswith("specguard.")]
    assert {cls.__name__ for cls in ours} >= {
        "ContractViolation", "DeferredViolation", "ConfigError", "SnapshotError",
        "CorpusError", "UnsupportedEngine"}
    missing = [cls.__name__ for cls in ours if f"── {cls.__name__}" not in tree]
    assert missing == [], missing
    assert specguard.adapters.CorpusError is corpus.CorpusError
