"""The wheel installs one namespace, typed, licensed, with torch only in the engine extra."""

from __future__ import annotations

import email.message
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The public packages; py.typed covers their private subpackages too (PEP 561).
PACKAGES = ("specguard", "specguard/contracts", "specguard/adapters", "specguard/runner",
            "specguard/benchmarks")


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
