"""The wheel's package list, found in the folders instead of kept by hand.

``package-dir`` in pyproject.toml maps each layer's folder onto its subpackage
(``contracts/`` is ``specguard.contracts``); every folder with an ``__init__.py`` below a
mapped folder is a package of the wheel, so a new subpackage cannot be left out.
Everything else about the build is declared in pyproject.toml.
"""

from __future__ import annotations

import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup

if sys.version_info >= (3, 11):
    import tomllib
else:  # a build requirement on Python 3.10 (pyproject.toml)
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent


def package_dir(root: Path = ROOT) -> dict[str, str]:
    """Package name → its folder, as pyproject.toml declares them."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    mapping: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    return mapping


def packages(root: Path = ROOT) -> list[str]:
    """Every mapped package and every package found in its folder.

    A subpackage mapped to a folder of its own is found there, never through the link
    to it under ``specguard/`` (find_packages follows links).
    """
    mapping = package_dir(root)
    found = set(mapping)
    for name, folder in mapping.items():
        mapped = [other[len(name) + 1:] for other in mapping if other.startswith(f"{name}.")]
        skip = [pattern for sub in mapped for pattern in (sub, f"{sub}.*")]
        found.update(f"{name}.{sub}" for sub in find_packages(str(root / folder), exclude=skip))
    return sorted(found)


def project_urls(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The wheel's Project-URLs, from where its docs site is published.

    The same variable the site is built with (``SPECGUARD_SITE_URL``, see mkdocs.yml)
    names the docs, the changelog page and the rule catalogue of the release build; a
    build without it carries none rather than an address that was never published.
    """
    import os

    site = (environ if environ is not None else dict(os.environ)).get(
        "SPECGUARD_SITE_URL", "").strip()
    if not site.startswith(("https://", "http://")):
        return {}
    site = site if site.endswith("/") else site + "/"
    return {"Documentation": site, "Changelog": f"{site}changelog/",
            "Rules": f"{site}rules/"}


def extensions() -> list[Extension]:
    """The compiled clearances and step-tracker kernels (``contracts/_core/_kernels.c``).

    Optional: where no C compiler is at hand the build goes on without them, and every
    clearance answers in numpy instead (the same verdicts, at a higher cost per step).
    """
    return [Extension("specguard.contracts._core._kernels", ["contracts/_core/_kernels.c"],
                      optional=True)]


if __name__ == "__main__":  # how setuptools runs it; tests import packages() alone
    setup(packages=packages(), project_urls=project_urls(), ext_modules=extensions())
