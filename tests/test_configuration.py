"""The configuration is declared once (jobs/config.py) and its page generated from it: the committed
docs/configuration.md is current, every EPISODES_* variable the code reads is on it and every one on
it is read and used, there are at most 30 of them and none is a test hook, and a variable that is no
longer read warns once, naming what replaced it."""

from __future__ import annotations

import ast
import logging
import re
from dataclasses import fields
from pathlib import Path

import pytest

from jobs import config, config_docs, config_fixed

ROOT = Path(__file__).resolve().parent.parent
JOBS = ROOT / "jobs"
PAGE = ROOT / "docs" / "configuration.md"
NAME = re.compile(r"EPISODES_[A-Z0-9_]*[A-Z0-9]")


def documented() -> set[str]:
    names = {f.metadata["env"] for f in fields(config.Settings) if f.metadata.get("env")}
    return names | set(config.OTHER_VARIABLES)


def names_read_in_code() -> set[str]:
    """Every string constant in jobs/ that is a whole variable name: what config.load, config.env and
    the hooks' carried settings read (docstrings and messages that mention a name are not reads)."""
    found: set[str] = set()
    for path in JOBS.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                found.add(node.value)
    return found - set(config.removed_variables())


def test_the_page_is_generated_from_the_settings() -> None:
    assert PAGE.read_text("utf-8") == config_docs.render(), (
        "docs/configuration.md is stale: run `python -m jobs.config_docs > docs/configuration.md`"
    )


def test_every_variable_read_is_documented_and_every_documented_one_is_read() -> None:
    episodes = {n for n in documented() if n.startswith("EPISODES_")}
    assert names_read_in_code() == episodes
    page = PAGE.read_text("utf-8")
    assert {n for n in documented() if f"`{n}`" not in page} == set()
    assert len(episodes) <= 30, sorted(episodes)


def test_every_setting_with_a_variable_is_used_outside_the_settings() -> None:
    sources = "\n".join(
        p.read_text("utf-8") for p in JOBS.rglob("*.py") if p.name not in {"config.py", "config_docs.py"}
    )
    unused = [
        f.name for f in fields(config.Settings) if f.metadata.get("env") and not re.search(rf"\.{f.name}\b", sources)
    ]
    assert unused == []


def test_messages_and_help_name_only_variables_that_are_read() -> None:
    """A help text or error message naming a variable that is gone sends a user to a dead end."""
    stale = sorted(
        f"{p.relative_to(ROOT)}: {name}"
        for p in JOBS.rglob("*.py")
        if p.name not in {"config.py", "config_fixed.py"}  # the settings, and the variables that once set fixed values
        for name in NAME.findall(p.read_text("utf-8"))
        if name not in documented()
    )
    assert stale == []


def test_no_page_names_a_variable_that_is_gone() -> None:
    pages = [ROOT / "README.md", *(p for p in (ROOT / "docs").rglob("*.md") if p != PAGE)]
    gone = config.removed_variables()
    stale = sorted(
        f"{p.relative_to(ROOT)}: {name}" for p in pages for name in NAME.findall(p.read_text("utf-8")) if name in gone
    )
    assert stale == []


def test_config_py_declares_the_environment_and_config_fixed_the_fixed_values() -> None:
    """jobs/config.py holds the settings a variable sets; the fixed values (and the variables they replaced) are
    declared in jobs/config_fixed.py, and Settings still carries them, so tests shrink them as before."""
    fixed = {f.name for f in fields(config_fixed.FixedValues)}
    declared_here = [f for f in fields(config.Settings) if f.name not in fixed]
    assert [f.name for f in declared_here if not f.metadata["env"]] == []
    assert [f.name for f in fields(config_fixed.FixedValues) if f.metadata["env"]] == []
    assert fixed <= {f.name for f in fields(config.Settings)} and len(fixed) == 24
    assert config.Settings().with_(lease_seconds=5, api_max_body=1024).lease_seconds == 5
    assert config.removed_variables() is not config_fixed.GONE_ELSEWHERE
    assert set(config_fixed.GONE_ELSEWHERE) < set(config.removed_variables())


def test_no_test_hook_is_a_setting() -> None:
    assert "crash_at" not in {f.name for f in fields(config.Settings)}
    assert "EPISODES_CRASH_AT" in config.removed_variables()


def test_a_removed_variable_warns_once_naming_what_replaced_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("EPISODES_LEASE_SECONDS", "5")
    monkeypatch.setenv("EPISODES_PRICE_INPUT_PER_MTOK", "3")
    monkeypatch.setattr(config, "_warned", set())
    with caplog.at_level(logging.WARNING, logger="jobs.config"):
        first = config.load()
        config.load()
    assert first.lease_seconds == 40  # no longer read
    warned = {
        vars(r)["variable"]: r.getMessage() for r in caplog.records if getattr(r, "action", None) == "removed_setting"
    }
    assert len([r for r in caplog.records if getattr(r, "action", None) == "removed_setting"]) == 2
    assert "lease_seconds" in warned["EPISODES_LEASE_SECONDS"]
    assert "jobs/llm/prices.py" in warned["EPISODES_PRICE_INPUT_PER_MTOK"]


def test_variables_still_parse_into_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPISODES_POOL_SIZE", "3")
    monkeypatch.setenv("EPISODES_REDACT", "off")
    monkeypatch.setenv("EPISODES_EXTRACTOR", "Offline")
    monkeypatch.setenv("EPISODES_HOME", "~/elsewhere")
    monkeypatch.setenv("EPISODES_MODEL", "  ")  # blank: the default
    settings = config.load()
    assert (settings.pool_size, settings.redact, settings.extractor) == (3, False, "offline")
    assert settings.home == Path("~/elsewhere").expanduser() and settings.model == "claude-haiku-4-5"
    monkeypatch.setenv("EPISODES_POOL_SIZE", "0")
    with pytest.raises(config.ConfigError, match="EPISODES_POOL_SIZE=0 must be at least 1"):
        config.load()
    monkeypatch.setenv("EPISODES_POOL_SIZE", "8")
    monkeypatch.setenv("EPISODES_EXTRACTOR", "gpt")
    with pytest.raises(config.ConfigError, match=r"use auto, anthropic, .*offline"):
        config.load()


@pytest.mark.parametrize("variable", ["EPISODES_COMPRESS_CRON", "EPISODES_PRUNE_CRON"])
@pytest.mark.parametrize(
    ("schedule", "reason"),
    [
        ("61 3 * * *", "higher than the maximum value (59)"),  # five fields, but no such minute
        ("0 3 1 13 *", "higher than the maximum value (12)"),
        ("0 3 * * 7", "higher than the maximum value (6)"),  # APScheduler counts weekdays 0-6 from Monday
        ("0 3 * *", "Wrong number of fields; got 4, expected 5"),
        ("0 3 * * someday", "someday"),
    ],
)
def test_a_schedule_apscheduler_refuses_stops_the_configuration_load(
    monkeypatch: pytest.MonkeyPatch, variable: str, schedule: str, reason: str
) -> None:
    """A wrong schedule fails when the settings are read, naming the variable, the value, APScheduler's reason
    and an example, not later when `episodes serve` starts its scheduler."""
    monkeypatch.setenv(variable, schedule)
    with pytest.raises(config.ConfigError) as caught:
        config.load()
    message = str(caught.value)
    assert message.startswith(f"{variable}={schedule!r} is not a schedule APScheduler accepts")
    assert reason in message and "e.g. '0 3 1 1 *'" in message


def test_a_schedule_apscheduler_accepts_is_kept_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPISODES_COMPRESS_CRON", "0 4 1 */6 *")
    monkeypatch.setenv("EPISODES_PRUNE_CRON", "15 2 * * mon-fri")
    settings = config.load()
    assert (settings.compress_cron, settings.prune_cron) == ("0 4 1 */6 *", "15 2 * * mon-fri")


def test_serve_refuses_a_wrong_compress_cron_flag_before_it_touches_anything(tmp_path: Path) -> None:
    """--compress-cron is checked as EPISODES_COMPRESS_CRON is: the command line stops (exit 2, click's usage
    error) naming the flag, APScheduler's reason and an example; no database is opened or created."""
    from click.testing import CliRunner

    from jobs.cli import cli

    home = tmp_path / "home"
    result = CliRunner().invoke(
        cli, ["serve", "--compress-cron", "61 3 * * *"], env={"EPISODES_HOME": str(home), "DATABASE_URL": ""}
    )
    assert result.exit_code == 2, result.output
    assert "--compress-cron='61 3 * * *' is not a schedule APScheduler accepts" in result.output
    assert "higher than the maximum value (59)" in result.output and "e.g. '0 3 1 1 *'" in result.output
    assert not home.exists()
