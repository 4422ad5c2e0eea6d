"""The wheel installs one namespace, typed, licensed, with torch only in the engine extra."""

from __future__ import annotations

import email.message
import importlib.util
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from conftest import build_wheel

ROOT = Path(__file__).resolve().parents[2]
#: The public packages; py.typed covers their private subpackages too (PEP 561).
PACKAGES = ("specguard", "specguard/contracts", "specguard/adapters", "specguard/runner",
            "specguard/benchmarks")


def _folders(root: Path) -> dict[str, str]:
    """Folder → the package path it becomes in the wheel (package-dir in pyproject.toml,
    as setup.py reads it)."""
    spec = importlib.util.spec_from_file_location("specguard_setup", root / "setup.py")
    assert spec is not None and spec.loader is not None
    setup_py = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_py)  # defines package_dir(); setup() runs only as __main__
    mapping: dict[str, str] = setup_py.package_dir(root)
    return {folder: name.replace(".", "/") for name, folder in mapping.items()}


def _modules(root: Path) -> dict[str, str]:
    """Each module of the source tree (walked without following links) → its wheel path."""
    found = {}
    for folder, package in _folders(root).items():
        for here, dirs, files in os.walk(root / folder):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                if name.endswith(".py"):
                    source = (Path(here) / name).relative_to(root)
                    found[source.as_posix()] = "/".join(
                        (package, *source.relative_to(folder).parts))
    return found


def _missing_folders(modules: dict[str, str], wheel_names: list[str]) -> list[str]:
    """The source folders some of whose modules the wheel lacks."""
    present = set(wheel_names)
    return sorted({source.rsplit("/", 1)[0] for source, path in modules.items()
                   if path not in present})


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(archive.read(name))


def _requirements(wheel: Path) -> tuple[set[str], dict[str, set[str]]]:
    """Core requirement names, and the requirement names of each extra."""
    core: set[str] = set()
    extras: dict[str, set[str]] = {}
    for requirement in _metadata(wheel).get_all("Requires-Dist") or []:
        spec, _, marker = requirement.partition(";")
        name = spec.split("[")[0].split(">")[0].split("=")[0].split("<")[0].strip().lower()
        if "extra ==" in marker:
            extra = marker.split("extra ==")[1].strip().strip("'\"")
            extras.setdefault(extra, set()).add(name)
        else:
            core.add(name)
    return core, extras


def test_only_the_specguard_namespace_is_installed(wheel_names):
    """The wheel's top level is specguard/ and its dist-info: no contracts/, adapters/,
    runner/ or benchmarks/ to clash with other distributions."""
    tops = {name.split("/")[0] for name in wheel_names}
    assert tops == {"specguard", "specguard-0.1.0.dist-info"}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_package_is_marked_typed(wheel_names, package):
    """Each package carries py.typed, so mypy users get the annotations of guard & co."""
    assert f"{package}/__init__.py" in wheel_names
    assert f"{package}/py.typed" in wheel_names


def test_the_license_ships_in_the_dist_info(wheel, wheel_names):
    """The Apache-2.0 text is in the wheel, and the metadata names it."""
    assert "specguard-0.1.0.dist-info/licenses/LICENSE" in wheel_names
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read("specguard-0.1.0.dist-info/licenses/LICENSE").decode()
    assert "Apache License" in text and "Version 2.0" in text
    assert _metadata(wheel)["License-Expression"] == "Apache-2.0"


def test_core_needs_no_torch_and_the_engine_extra_adds_it(wheel):
    """torch and tqdm are requirements of the engine extra only."""
    core, extras = _requirements(wheel)
    assert core == {"numpy", "pydantic", "jaxtyping", "beartype", "typing-extensions"}
    assert {"torch", "tqdm"} <= extras["engine"]


def test_long_description_is_the_user_facing_one(wheel):
    """PyPI shows DESCRIPTION.md (what it is, install, an example), not the developer setup."""
    metadata = _metadata(wheel)
    assert metadata["Description-Content-Type"] == "text/markdown"
    body = metadata.get_payload()
    assert isinstance(body, str)  # one part: the description
    assert body.strip() == (ROOT / "DESCRIPTION.md").read_text(encoding="utf-8").strip()
    assert "pip install specguard" in body
    assert "tools/check" not in body and ".venv" not in body


def test_no_project_url_is_made_up(wheel):
    """No public home of the project is known yet, so the metadata names none."""
    assert _metadata(wheel).get_all("Project-URL") is None


def test_entry_points_declare_the_command_the_plugin_and_the_rule_modules(wheel):
    """The console script, the pytest plugin and the rule catalogue's modules are declared."""
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read("specguard-0.1.0.dist-info/entry_points.txt").decode()
    assert "specguard = specguard.cli:main" in text
    assert "[pytest11]\nspecguard = specguard._pytest_entry" in text
    assert "[specguard.rules]\nadapters = specguard.adapters" in text


def test_entry_points_declare_the_sglang_plugin(wheel):
    """SGLang's load_plugins() finds specguard under its general plugin group."""
    with zipfile.ZipFile(wheel) as archive:
        text = archive.read("specguard-0.1.0.dist-info/entry_points.txt").decode()
    assert ("[sglang.srt.plugins]\n"
            "specguard = specguard.adapters.engines.sglang.v2.plugin:register") in text


def test_every_module_of_every_package_folder_is_in_the_wheel_once(wheel_names):
    """Each module under the mapped folders is in the wheel, at its namespace path, and
    no module is there twice (the links under specguard/ add nothing)."""
    modules = _modules(ROOT)
    assert _missing_folders(modules, wheel_names) == []
    in_wheel = sorted(n for n in wheel_names if n.endswith(".py"))
    assert in_wheel == sorted(modules.values())
    assert len(wheel_names) == len(set(wheel_names))


def test_the_missing_folder_check_names_the_folder():
    """The check is not vacuous: a wheel without one subpackage's modules names it."""
    modules = {"adapters/__init__.py": "specguard/adapters/__init__.py",
               "adapters/engines/vllm/__init__.py": "specguard/adapters/engines/vllm/__init__.py",
               "adapters/engines/vllm/view.py": "specguard/adapters/engines/vllm/view.py"}
    assert _missing_folders(modules, ["specguard/adapters/__init__.py"]) == [
        "adapters/engines/vllm"]


def test_a_subpackage_added_to_a_copy_is_in_its_wheel(source_tree, tmp_path):
    """Built for real: a new subpackage under a layer reaches the wheel with no list to
    edit (setup.py finds it)."""
    copy = tmp_path / "source"
    shutil.copytree(source_tree, copy, symlinks=True,
                    ignore=shutil.ignore_patterns("tests", "docs", "tools"))
    engine = copy / "adapters" / "engines" / "probe"
    engine.mkdir(parents=True)
    for path in (engine.parent / "__init__.py", engine / "__init__.py", engine / "view.py"):
        path.write_text("")
    with zipfile.ZipFile(build_wheel(copy, tmp_path / "wheel")) as archive:
        names = archive.namelist()
    assert _missing_folders(_modules(copy), names) == []
    assert "specguard/adapters/engines/probe/view.py" in names
