"""mkdocs hook: the contract pages and every generated block, built from live code.

Nothing generated is committed: object pages are added as in-memory files, and
``<!-- specguard:NAME -->`` markers in the hand-written pages are expanded while the page
is read, so a rule, field or message added to the code shows up in the next build.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

# The site documents the checkout it is built from, whatever else is installed: the
# checkout's root goes first on sys.path, so `specguard` is its `specguard/` folder, whose
# links (tools/layer_links.py) hold the layers; mkdocstrings reads the same folder
# (`paths` in mkdocs.yml).
_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import docs_pages  # noqa: E402  (a sibling: mkdocs puts this folder on sys.path for hooks)

_PERFORMANCE = "performance.md"
_PERFORMANCE_PENDING = """# Performance

The measured cost of each mode and depth is published here once the benchmark report
lands. Until then, measure it on your own hardware with `specguard bench`.
"""


def on_config(config: MkDocsConfig) -> MkDocsConfig:
    """Append one nav entry per boundary object under the Contracts section."""
    for entry in config.nav or []:
        if isinstance(entry, dict) and "Contracts" in entry:
            section: list[Any] = entry["Contracts"]
            known = {next(iter(item.values())) for item in section if isinstance(item, dict)}
            for path in docs_pages.object_pages():
                if path not in known:
                    section.append({docs_pages.title_of(path): path})
    return config


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated object pages (and a placeholder for a missing performance page)."""
    for path, build in docs_pages.object_pages().items():
        files.append(File.generated(config, path, content=build()))
    if files.get_file_from_path(_PERFORMANCE) is None:
        files.append(File.generated(config, _PERFORMANCE, content=_PERFORMANCE_PENDING))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Expand the specguard markers of a hand-written page."""
    return docs_pages.expand_markers(markdown, page.file.src_uri)
