"""The `vgpu` command line's own help (issue 14, item 6): `vgpu --help` lists every subcommand with
one line each, through the installed console script and `python -m vgpu.cli`."""
import os
import shutil
import subprocess
import sys

import pytest

from vgpu import cli

COMMANDS = ["info", "server", "stats", "ops", "bench", "trace"]


def _vgpu(*args):
    script = shutil.which("vgpu", path=os.path.dirname(sys.executable))
    assert script is not None
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=120,
                          check=False)


def _command_lines(text):
    lines = text.splitlines()
    start = lines.index("commands:") + 1
    end = lines.index("", start)
    return lines[start:end]


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_subcommand_on_one_line_each(flag):
    done = _vgpu(flag)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: vgpu <command> [flags]")
    entries = _command_lines(done.stdout)
    assert [line.split()[0] for line in entries] == COMMANDS
    for line in entries:
        assert line.startswith("  ") and len(line.split(maxsplit=1)) == 2, line


def test_help_through_python_dash_m_is_the_same():
    done = subprocess.run([sys.executable, "-m", "vgpu.cli", "--help"], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == cli.usage_text()


def test_an_unknown_or_missing_command_prints_the_list_and_fails():
    for args in ([], ["frobnicate"]):
        done = _vgpu(*args)
        assert done.returncode == 2
        assert [line.split()[0] for line in _command_lines(done.stderr)] == COMMANDS


def test_every_dispatched_command_has_a_summary():
    summarised = [name for name, _ in cli.COMMAND_SUMMARIES]
    assert sorted(summarised) == sorted([*cli._COMMANDS, "trace"])  # noqa: SLF001
