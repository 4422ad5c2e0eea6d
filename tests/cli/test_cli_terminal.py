"""The ``specguard`` command at a terminal: one line and an exit status, never a traceback."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specguard import cli
from specguard.cli import main

ROOT = Path(__file__).resolve().parents[2]
BAD_DEPTH = ("specguard: SPECGUARD_DEPTH must be one of 'metadata', 'essential', 'full'; "
             "got 'deep'\n")


def _python(code: str, *, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPECGUARD_")}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, cwd=cwd,
                          capture_output=True, text=True, timeout=180, check=False)


@pytest.mark.parametrize("argv", [["--help"], ["rules"], ["run", "--help"], ["check", "x.json"]])
def test_bad_settings_variable_is_one_line_and_exit_2(argv):
    """A bad SPECGUARD_* value: one line naming the variable and its values, exit 2."""
    done = _python(f"from specguard.cli import main; raise SystemExit(main({argv!r}))",
                   SPECGUARD_DEPTH="deep")
    assert (done.returncode, done.stderr, done.stdout) == (2, BAD_DEPTH, "")


def test_bad_settings_variable_is_a_pytest_usage_error(tmp_path):
    """The auto-loaded pytest plugin turns a bad value into a usage error, not a traceback."""
    (tmp_path / "test_nothing.py").write_text("def test_nothing():\n    pass\n")
    done = _python("import pytest; raise SystemExit(pytest.main(['-q', '-p', 'no:cacheprovider',"
                   " 'test_nothing.py']))", cwd=tmp_path, SPECGUARD_MODE="bogus")
    assert done.returncode == pytest.ExitCode.USAGE_ERROR
    assert ("ERROR: specguard: SPECGUARD_MODE must be one of 'off', 'warn', 'strict'; "
            "got 'bogus'") in done.stderr
    assert "Traceback" not in done.stderr + done.stdout


def test_help_and_commands_that_run_no_engine_do_not_import_torch(tmp_path):
    """--help, rules, faults, check and every subcommand's help leave torch unloaded."""
    code = (
        "import contextlib, io, sys\n"
        "from specguard.cli import main\n"
        "for argv in (['--help'], ['run', '--help'], ['bench', '--help'], ['docs', '--help'],"
        " ['rules'], ['rules', 'SG101'], ['faults', '-v'], ['check', 'missing.json']):\n"
        "    with contextlib.redirect_stdout(io.StringIO()), "
        "contextlib.redirect_stderr(io.StringIO()):\n"
        "        try:\n"
        "            main(argv)\n"
        "        except SystemExit:\n"
        "            pass\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'tqdm')))\n"
    )
    done = _python(code, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


class _ClosedPipe:
    """A stdout whose reader went away (``specguard rules | head -1``)."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")


def test_closed_pipe_ends_quietly(monkeypatch, capsys):
    """Writing into a closed pipe ends the command with 141 and no traceback."""
    monkeypatch.setattr(sys, "stdout", _ClosedPipe())
    assert main(["rules"]) == cli.EXIT_BROKEN_PIPE
    assert capsys.readouterr().err == ""


def test_closed_pipe_of_a_real_process_prints_nothing_on_stderr():
    """A reader that stops after one line leaves no BrokenPipeError on stderr."""
    code = ("from specguard._cli import faults\n"
            "from specguard.cli import main\n"
            "def long_listing(args):\n"
            "    for line in range(200_000):\n"
            "        print(f'line {line}')\n"
            "    return 0\n"
            "faults.run = long_listing\n"
            "raise SystemExit(main(['faults']))\n")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("SPECGUARD_")}
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=clean) as process:
        assert process.stdout is not None and process.stderr is not None
        process.stdout.readline()
        process.stdout.close()
        error = process.stderr.read().decode()
        status = process.wait(timeout=120)
    assert "Traceback" not in error and "BrokenPipeError" not in error
    assert status == cli.EXIT_BROKEN_PIPE


def test_ctrl_c_in_any_command_exits_130_with_one_line(monkeypatch, capsys):
    """KeyboardInterrupt outside the engine: 'specguard: interrupted', exit 130."""
    from specguard._cli import faults

    def interrupted(args: object) -> int:
        raise KeyboardInterrupt

    monkeypatch.setattr(faults, "run", interrupted)
    assert main(["faults"]) == cli.EXIT_INTERRUPTED
    assert capsys.readouterr().err == "specguard: interrupted\n"


def test_subcommands_are_modules_imported_by_name():
    """One module of specguard._cli per subcommand, imported statically; no importlib."""
    source = (ROOT / "specguard" / "cli.py").read_text(encoding="utf-8")
    assert "importlib" not in source
    imported = {alias.name for node in ast.walk(ast.parse(source))
                if isinstance(node, ast.ImportFrom) and node.module == "specguard._cli"
                for alias in node.names}
    assert imported == {"run", "rules", "faults", "check", "bench", "docs"}
    parser = cli._parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert isinstance(commands, dict)
    for name, sub in commands.items():
        module = sub.get_default("command_module")
        assert module.__name__ == f"specguard._cli.{name}"
        assert sub.description == module.HELP
    assert not list((ROOT / "runner").glob("_cmd_*.py"))
