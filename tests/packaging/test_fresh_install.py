"""``pip install <wheel>`` into a fresh virtual environment with no torch (``--packaging``).

One environment for the module: no system site-packages, the wheel and pytest installed
from the package index. It shows what a user who only wants the contracts gets: working
contracts, adapters and pytest plugin, torch never imported, and ``specguard run``
saying what it needs. A stand-in distribution named ``adapters`` (AdapterHub's import
name) is installed beside it and removed again, breaking nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest
from conftest import build_wheel


class Env:
    """A virtual environment and how to run its Python and its console scripts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.bin = root / ("Scripts" if os.name == "nt" else "bin")

    def run(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run ``bin/<args[0]> args[1:]`` with a clean environment; never raises on failure.

        It runs outside the checkout (in the environment's folder by default): from the
        repository root, ``python -c`` would import the checkout's ``specguard/`` folder.
        """
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SPECGUARD_", "PYTHON", "VIRTUAL_ENV"))}
        return subprocess.run([str(self.bin / args[0]), *args[1:]], cwd=cwd or self.root,
                              env=env,
                              capture_output=True, text=True, timeout=600)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        """Run ``code`` in the environment's interpreter."""
        return self.run("python", "-c", textwrap.dedent(code))

    def pip(self, *args: str) -> None:
        """``pip <args>`` in the environment; a failure fails the test with pip's output."""
        done = self.run("python", "-m", "pip", "--disable-pip-version-check", *args)
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.fixture(scope="module")
def fresh(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Env:
    """A fresh venv (no system site-packages) with the wheel and pytest, and no torch."""
    if not request.config.getoption("--packaging"):
        pytest.skip("installs from the package index: run with --packaging")
    wheel: Path = request.getfixturevalue("wheel")  # built only when the test runs
    root = tmp_path_factory.mktemp("fresh") / "venv"
    venv.EnvBuilder(with_pip=True, system_site_packages=False).create(root)
    env = Env(root)
    env.pip("install", "--quiet", str(wheel), "pytest")
    return env


def test_contracts_and_adapters_work_without_torch(fresh):
    """Objects build and validate, the adapters import, and torch is never imported."""
    done = fresh.python("""
        import json, sys
        import numpy as np
        from specguard import adapters, contracts as sg
        drafts = sg.DraftTokens.from_mapping([11, 12], {11: [5, 6]}, mtp_k=2,
                                             vocab_size=10, placeholder=0)
        try:
            sg.DraftTokens(mtp_k=2, vocab_size=10, seq_ids=np.array([11, 12]),
                           draft_token_ids=np.array([[5, 6]]), num_drafts=np.array([2]))
        except sg.ContractViolation as error:
            codes = list(error.codes)
        print(json.dumps({"rows": drafts.draft_token_ids.tolist(), "codes": codes,
                          "rules": len(sg.REGISTRY), "guard": callable(adapters.guard),
                          "torch": "torch" in sys.modules}))
    """)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen == {"rows": [[5, 6], [0, 0]], "codes": ["SG101"], "rules": seen["rules"],
                    "guard": True, "torch": False}
    assert seen["rules"] >= 41


def test_torch_is_not_installed(fresh):
    """The core install pulled no torch (a CUDA torch is gigabytes)."""
    done = fresh.python("import importlib.util; print(importlib.util.find_spec('torch'))")
    assert done.stdout.strip() == "None"


def test_the_pytest_plugin_makes_guards_strict(fresh, tmp_path):
    """The installed plugin loads through its entry point and records violations."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent("""
        import sys
        import numpy as np
        import pytest
        from specguard import contracts as sg

        def test_a_broken_object_is_caught(specguard_violations):
            with sg.checking(mode="warn"):
                sg.DraftTokens(mtp_k=2, vocab_size=10, seq_ids=np.array([11, 12]),
                               draft_token_ids=np.array([[5, 6]]), num_drafts=np.array([2]))
            assert [v.code for v in specguard_violations] == ["SG101"]
            assert "torch" not in sys.modules

        def test_strict_by_default():
            assert sg.current_config().mode is sg.Mode.STRICT
    """))
    done = fresh.run("python", "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path),
                     cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_specguard_run_names_the_engine_extra(fresh):
    """Without torch, `specguard run` exits 2 saying to install specguard[engine]."""
    done = fresh.run("specguard", "run")
    assert done.returncode == 2
    assert "pip install 'specguard[engine]'" in done.stderr
    assert "Traceback" not in done.stderr


def test_another_adapters_distribution_breaks_nothing(fresh, tmp_path):
    """A distribution with a top-level `adapters` package (AdapterHub's import name)
    installs beside specguard and uninstalls again; specguard.adapters works throughout."""
    stand_in = tmp_path / "stand-in"
    (stand_in / "adapters").mkdir(parents=True)
    (stand_in / "adapters" / "__init__.py").write_text('NAME = "stand-in"\n')
    (stand_in / "pyproject.toml").write_text(textwrap.dedent("""
        [build-system]
        requires = ["setuptools>=77"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "adapters"
        version = "9.9.9"
        [tool.setuptools]
        packages = ["adapters"]
    """))
    stand_in_wheel = build_wheel(stand_in, tmp_path / "dist")
    check = """
        import importlib.util, json
        from specguard.adapters import StepTracker, guard
        other = importlib.util.find_spec("adapters")
        print(json.dumps(other is not None and __import__("adapters").NAME))
    """
    fresh.pip("install", "--quiet", "--no-deps", "--no-index", str(stand_in_wheel))
    beside = fresh.python(check)
    fresh.pip("uninstall", "--yes", "--quiet", "adapters")
    after = fresh.python(check)
    assert (beside.returncode, beside.stdout.strip()) == (0, '"stand-in"'), beside.stderr
    assert (after.returncode, after.stdout.strip()) == (0, "false"), after.stderr


def test_the_environment_is_isolated(fresh):
    """The fresh venv sees neither the system's nor the test run's site-packages."""
    done = fresh.python("import sys; print(sys.prefix != sys.base_prefix)")
    assert done.stdout.strip() == "True"
    assert fresh.root.resolve() != Path(sys.prefix).resolve()
