"""`episodes --help` starts fast: commands come from the table in jobs/cli/commands.py and their modules
are imported only when a command runs or shows its own --help. These tests keep the table true and the
start light."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

import jobs.cli
from jobs.cli import cli
from jobs.cli.commands import COMMANDS
from jobs.db import Database

HEAVY = (
    "psycopg",
    "anthropic",
    "pandas",
    "numpy",
    "onnxruntime",
    "fastapi",
    "mcp",
    "pydantic",
    "jinja2",
    "uvicorn",
    "tqdm",
)
ROOT = Path(__file__).resolve().parent.parent


def _modules_after(*args: str) -> list[str]:
    """The top-level packages loaded by a fresh `episodes ARGS` process (run in-process by a wrapper)."""
    wrapper = (
        "import json, sys\n"
        "from jobs.cli import cli\n"
        "try:\n"
        f"    cli.main({list(args)!r}, prog_name='episodes')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_table_entry_is_the_command_with_its_own_short_help(name: str) -> None:
    entry = COMMANDS[name]
    module_name, _, attribute = entry.target.partition(":")
    command = getattr(importlib.import_module(module_name), attribute)
    assert isinstance(command, click.Command) and command.name == name
    assert not command.hidden  # the table's --help lists every command
    assert entry.short_help == command.get_short_help_str(10**6)
    assert cli.get_command(click.Context(cli), name) is command


def _top_level_commands() -> dict[str, click.Command]:
    """Every click command defined in a module of jobs/cli that is not a subcommand of a group there."""
    found: dict[str, click.Command] = {}
    nested: set[int] = set()
    for info in pkgutil.iter_modules(jobs.cli.__path__):
        if info.name == "__main__":  # runs the command line
            continue
        module = importlib.import_module(f"jobs.cli.{info.name}")
        for value in vars(module).values():
            if isinstance(value, click.Command) and value is not cli:
                found[f"{module.__name__}:{value.name}"] = value
                if isinstance(value, click.Group):
                    nested.update(id(sub) for sub in value.commands.values())
    return {key: command for key, command in found.items() if id(command) not in nested}


def test_every_command_module_command_is_in_the_table() -> None:
    ctx = click.Context(cli)
    registered = {id(cli.get_command(ctx, name)) for name in cli.list_commands(ctx)}
    missing = [key for key, command in _top_level_commands().items() if id(command) not in registered]
    assert not missing, f"add these to jobs/cli/commands.py: {missing}"
    assert len(_top_level_commands()) >= len(COMMANDS)


@pytest.mark.parametrize("width", [50, 80, 200])
def test_help_lists_the_commands_as_click_would_with_them_imported(width: int) -> None:
    """The lazy listing is the eager one: the same group with every command added renders the same."""
    eager = click.Group(
        cli.name, callback=cli.callback, params=cli.params, help=cli.help, context_settings=cli.context_settings
    )
    ctx = click.Context(cli)
    for name in cli.list_commands(ctx):
        command = cli.get_command(ctx, name)
        assert command is not None
        eager.add_command(command)
    fresh = type(cli)(
        cli.name,
        callback=cli.callback,
        params=cli.params,
        help=cli.help,
        context_settings=cli.context_settings,
        lazy=COMMANDS,
    )  # nothing imported through it yet
    lazy_help = CliRunner().invoke(fresh, ["--help"], prog_name="episodes", terminal_width=width)
    eager_help = CliRunner().invoke(eager, ["--help"], prog_name="episodes", terminal_width=width)
    assert lazy_help.exit_code == 0 and "ingest" in lazy_help.output and "vacuum" in lazy_help.output
    assert lazy_help.output == eager_help.output
    assert not fresh.commands  # listed from the table, not imported


def test_help_imports_no_heavy_package() -> None:
    loaded = _modules_after("--help")
    assert "jobs" in loaded and "click" in loaded
    assert [name for name in HEAVY if name in loaded] == []


@pytest.mark.parametrize(
    "command",
    [
        ["recall"],
        ["init"],
        ["status"],
        ["ingest"],
        ["mcp"],
        ["api"],
        ["keys", "create"],
        ["claude-code"],
        ["claude-code", "sync"],
    ],
    ids=" ".join,
)
def test_light_commands_help_imports_no_database_driver_or_model_sdk(command: list[str]) -> None:
    loaded = _modules_after(*command, "--help")
    assert [
        name
        for name in ("psycopg", "anthropic", "pandas", "numpy", "onnxruntime", "fastapi", "mcp", "uvicorn")
        if name in loaded
    ] == []


def test_status_imports_no_pydantic_model_numpy_or_template_engine(db: Database) -> None:
    """`episodes status` reads counts: it took 3 s when jobs.lifecycle imported every job (compress, the
    model client) to reach the re-embedding's progress."""
    wrapper = (
        "import json, sys\n"
        "from jobs.cli import cli\n"
        "cli.main(['status'], prog_name='episodes', standalone_mode=False)\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    done = subprocess.run([sys.executable, "-c", wrapper], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    *shown, modules = done.stdout.strip().splitlines()
    assert any(line.startswith("transcripts") for line in shown), done.stdout
    loaded = json.loads(modules)
    assert [
        name for name in ("pydantic", "numpy", "jinja2", "anthropic", "onnxruntime", "pandas") if name in loaded
    ] == []
