"""``specguard docs``: no theme banner, and a served site that ends with its command."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from waiting import wait_for

pytest.importorskip("mkdocs")
pytest.importorskip("material")


@pytest.fixture
def tiny_site(tmp_path: Path) -> Path:
    """A one-page site with the theme the project uses: builds in about a second."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "index.md").write_text("# A page\n")
    config = tmp_path / "mkdocs.yml"
    config.write_text("site_name: tiny\ntheme:\n  name: material\n")
    return config


def _environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "NO_MKDOCS_2_WARNING"}
    return {**env, **extra}


def test_docs_prints_no_theme_banner_even_without_the_variable(tiny_site):
    done = subprocess.run(
        [sys.executable, "-m", "specguard", "docs", "--config-file", str(tiny_site),
         "--site-dir", str(tiny_site.parent / "site")],
        capture_output=True, text=True, env=_environment(NO_COLOR="1"), timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Material for MkDocs" not in done.stderr
    assert "\x1b[" not in done.stderr + done.stdout
    assert (tiny_site.parent / "site" / "index.html").is_file()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.2)
        return probe.connect_ex(("127.0.0.1", port)) == 0



def test_sigterm_to_docs_serve_stops_the_server_and_frees_the_port(tiny_site):
    port = _free_port()
    command = subprocess.Popen(
        [sys.executable, "-m", "specguard", "docs", "--serve", "--config-file",
         str(tiny_site), "--dev-addr", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_environment(),
        start_new_session=True)
    try:
        assert wait_for(lambda: _listening(port), 90), "the site was never served"
        command.send_signal(signal.SIGTERM)
        assert command.wait(timeout=30) == 128 + signal.SIGTERM
        assert wait_for(lambda: not _listening(port), 10), "mkdocs serve outlived specguard docs"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(command.pid, signal.SIGKILL)
        command.wait(timeout=30)

