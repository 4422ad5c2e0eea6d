"""The built site works offline and under a sub-path: nothing is loaded from another host."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None,
                                reason="mkdocs not installed")

ROOT = Path(__file__).resolve().parents[2]
SITE_URL = "https://docs.example.invalid/specguard/"
#: What a page loads: scripts, stylesheets, fonts and other linked resources.
_LOADS = re.compile(
    r"<script\b[^>]*\bsrc=\"([^\"]+)\""
    r"|<link\b(?=[^>]*\brel=\"(?:stylesheet|preload|preconnect|modulepreload|icon)\")"
    r"[^>]*\bhref=\"([^\"]+)\"")
_CSS_URL = re.compile(r"url\(\s*['\"]?([^'\")]+)")
_MERMAID_PAGES = ("why/index.html", "step/index.html", "design/index.html")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The docs site, built strictly for a sub-path deploy into a temporary folder."""
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "SPECGUARD_SITE_URL": SITE_URL, "NO_MKDOCS_2_WARNING": "1"}
    subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                    "--site-dir", str(out)], cwd=ROOT, env=env, check=True, timeout=600)
    return out


def _foreign(url: str, page_url: str) -> bool:
    """True when ``url``, read on the page at ``page_url``, points at another host."""
    return urlsplit(urljoin(page_url, url)).netloc != urlsplit(SITE_URL).netloc


def test_no_page_loads_a_script_or_stylesheet_from_another_host(site):
    """Every page's scripts, stylesheets and fonts come from the site itself."""
    pages = sorted(site.rglob("*.html"))
    assert len(pages) > 10
    foreign = []
    for page in pages:
        page_url = urljoin(SITE_URL, page.relative_to(site).as_posix())
        for match in _LOADS.finditer(page.read_text(encoding="utf-8")):
            url = match.group(1) or match.group(2)
            if _foreign(url, page_url):
                foreign.append(f"{page.relative_to(site)}: {url}")
    assert foreign == []


def test_no_stylesheet_imports_from_another_host(site):
    """The site's stylesheets pull no font or image from a CDN either."""
    foreign = [f"{css.relative_to(site)}: {url}"
               for css in site.rglob("*.css")
               for url in _CSS_URL.findall(css.read_text(encoding="utf-8"))
               if not url.startswith("data:") and _foreign(url, SITE_URL)]
    assert foreign == []


def test_the_foreign_host_check_is_not_vacuous():
    """A CDN script is foreign; a relative or root-relative asset is not."""
    assert _foreign("https://unpkg.com/mermaid@11/dist/mermaid.min.js", SITE_URL)
    assert _foreign("//fonts.googleapis.com/css", SITE_URL)
    assert not _foreign("../assets/javascripts/bundle.js", SITE_URL + "why/")
    assert not _foreign("/specguard/assets/x.css", SITE_URL)
    assert [m.group(1) or m.group(2) for m in _LOADS.finditer(
        '<script src="a.js"></script><link rel="stylesheet" href="b.css">')] == ["a.js", "b.css"]


@pytest.mark.parametrize("page", _MERMAID_PAGES)
def test_diagram_pages_ship_mermaid_with_the_site(site, page):
    """The pages with diagrams load mermaid from the site, and the file is there."""
    text = (site / page).read_text(encoding="utf-8")
    assert 'class="mermaid"' in text
    scripts = re.findall(r"<script\b[^>]*\bsrc=\"([^\"]*mermaid[^\"]*)\"", text)
    assert len(scripts) == 1
    shipped = (site / page).parent / scripts[0]
    assert shipped.resolve().is_file()
    assert shipped.stat().st_size > 1_000_000  # the real library, not a stub
    assert (site / "javascripts" / "vendor" / "mermaid-LICENSE.txt").is_file()


def test_404_and_sitemap_work_under_a_sub_path(site):
    """site_url's sub-path reaches the 404 page's links and every sitemap entry."""
    not_found = (site / "404.html").read_text(encoding="utf-8")
    assets = re.findall(r"(?:src|href)=\"(/[^\"]*assets/[^\"]+)\"", not_found)
    assert assets and all(a.startswith("/specguard/") for a in assets)
    sitemap = (site / "sitemap.xml").read_text(encoding="utf-8")
    locations = re.findall(r"<loc>([^<]+)</loc>", sitemap)
    assert locations and all(loc.startswith(SITE_URL) for loc in locations)


def test_long_messages_wrap_and_wide_tables_scroll(site):
    """The site's stylesheet wraps code blocks, scrolls tables in place and keeps names whole."""
    css = (site / "stylesheets" / "specguard.css").read_text(encoding="utf-8")
    rules = {selector.strip(): body for selector, body in
             re.findall(r"([^{}]+)\{([^}]*)\}", re.sub(r"/\*.*?\*/", "", css, flags=re.S))}
    assert "white-space: pre-wrap" in rules[".md-typeset pre > code"]
    table = rules[".md-typeset table:not([class])"]
    assert "overflow-x: auto" in table and "max-width: 100%" in table
    names = next(body for selector, body in rules.items() if "td:first-child code" in selector)
    assert "white-space: nowrap" in names
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="stylesheets/specguard.css"' in index


def test_a_site_built_without_its_url_names_no_local_server(monkeypatch):
    """Without SPECGUARD_SITE_URL the site has no address (no canonical link, an empty
    sitemap), rather than one pointing readers at 127.0.0.1; with it, the address is its."""
    from mkdocs.config import load_config

    root = Path(__file__).resolve().parents[2]
    monkeypatch.delenv("SPECGUARD_SITE_URL", raising=False)
    assert load_config(str(root / "mkdocs.yml"))["site_url"] is None
    monkeypatch.setenv("SPECGUARD_SITE_URL", "https://docs.example.org/specguard/")
    assert load_config(str(root / "mkdocs.yml"))["site_url"] == \
        "https://docs.example.org/specguard/"
