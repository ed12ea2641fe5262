"""Back ends by entry point (jobs.registry): the built-in ones as pyproject.toml declares them, a
third party's added by a distribution of its own, an unknown name's error, and what `auto` picks."""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

from jobs import config, registry
from jobs.compress.run import make_compressor
from jobs.embeddings import get_embedder
from jobs.errors import ConfigError
from jobs.extract import make_extractor

ROOT = Path(__file__).resolve().parent.parent
PLUGIN = """
from jobs.models import EpisodeExtraction, ExtractionResult


class Echo:
    name = "echo"
    prompt_version = "echo-1"

    def __init__(self, settings):
        self.settings = settings

    def extract(self, transcript, open_items=None):
        return ExtractionResult(EpisodeExtraction(summary=transcript.messages[0].content, importance=0.5, topic_tags=["plugin"]),
                                model=self.name, prompt_version=self.prompt_version)

    def close(self):
        pass


def make(settings):
    return Echo(settings)
"""


def install_plugin(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    entry_points: str,
    module: str = PLUGIN,
    name: str = "episodes-echo-plugin",
) -> None:
    """A distribution of a third party's, installed the way pip lays one out (a module and its
    .dist-info with entry_points.txt) on sys.path: what importlib.metadata finds, no stub."""
    (root / "episodes_echo_plugin.py").write_text(module)
    info = root / "episodes_echo_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(entry_points)
    monkeypatch.syspath_prepend(str(root))
    registry.refresh()


@pytest.fixture(autouse=True)
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    registry.refresh()
    yield
    sys.modules.pop("episodes_echo_plugin", None)
    registry.refresh()


def test_the_installed_back_ends_are_the_ones_pyproject_declares() -> None:
    """Fails on a stale editable install (entry points are package metadata: pip install -e . again)."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["entry-points"]
    for group in (registry.EXTRACTORS, registry.COMPRESSORS, registry.EMBEDDERS):
        assert set(declared[group]) <= set(registry.installed(group)), (
            f"{group}: reinstall episodes (pip install -e .) to register {sorted(declared[group])}"
        )


def test_every_declared_back_end_imports_and_is_callable() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["entry-points"]
    for group, names in declared.items():
        if group.startswith("episodes."):
            for name in names:
                assert callable(registry.load(group, name, "back end")), (group, name)


def test_an_unknown_name_says_which_back_ends_are_installed() -> None:
    settings = config.Settings()
    with pytest.raises(ConfigError, match=r"unknown extractor 'gpt'; installed: anthropic, .*offline"):
        make_extractor(settings, "gpt")
    with pytest.raises(ConfigError, match=r"unknown compressor 'gpt'; installed: anthropic, .*offline"):
        make_compressor(settings, "gpt")
    with pytest.raises(ConfigError, match=r"unknown embedder 'nope'; installed: hashing, minilm, minilm-fp32, voyage"):
        get_embedder("nope:3")


def test_the_built_in_embedders_and_compressors_come_through_the_registry() -> None:
    assert get_embedder("hashing:64").dim == 64
    with pytest.raises(ConfigError, match="between 8 and 4096"):
        get_embedder("hashing:5")
    assert make_compressor(config.Settings(), "offline").name == "offline"
    assert make_extractor(config.Settings(), "offline").name == "offline"


def test_a_third_party_adds_an_extractor_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from jobs.models import Message, Transcript

    install_plugin(tmp_path, monkeypatch, "[episodes.extractors]\necho = episodes_echo_plugin:make\n")
    assert "echo" in registry.installed(registry.EXTRACTORS)
    monkeypatch.setenv("EPISODES_EXTRACTOR", "echo")  # the setting accepts any installed name
    settings = config.load()
    extractor = make_extractor(settings)
    import datetime as dt

    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    transcript = Transcript(
        id=1,
        tenant_id="t",
        user_id="u",
        session_id="s",
        purpose="general",
        started_at=None,
        ended_at=now,
        messages=[Message(role="user", content="hello there, plugin")],
    )
    assert extractor.extract(transcript).extraction.summary == "hello there, plugin"


def test_a_third_party_cannot_replace_a_built_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(tmp_path, monkeypatch, "[episodes.extractors]\noffline = episodes_echo_plugin:make\n")
    assert make_extractor(config.Settings(), "offline").name == "offline"


@pytest.mark.parametrize("name", ["episodes", "Episodes", "episodes-echo-plugin"])
def test_a_plugin_claiming_a_built_in_name_is_refused_whatever_its_metadata_says(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 46 #13: a distribution whose metadata says ``Name: episodes`` replaced the offline extractor.
    Only the installed episodes whose files are this package provides a built-in name."""
    entry = "[episodes.extractors]\noffline = episodes_echo_plugin:make\n[episodes.compressors]\noffline = x:y\n"
    install_plugin(tmp_path, monkeypatch, entry, name=name)
    with caplog.at_level("WARNING", logger="jobs.registry"):
        assert make_extractor(config.Settings(), "offline").name == "offline"
        assert registry.load(registry.COMPRESSORS, "offline", "compressor").__module__ == "jobs.compress.registry"
    refused = [r for r in caplog.records if getattr(r, "action", None) == "plugin_refused"]
    assert {r.getMessage().split(" back end ")[0] for r in refused} == {registry.EXTRACTORS, registry.COMPRESSORS}
    assert "episodes_echo_plugin:make" in refused[0].getMessage() and str(tmp_path) in refused[0].getMessage()
    assert "episodes_echo_plugin" not in sys.modules  # the refused plugin is never imported


def test_a_back_end_whose_module_is_missing_names_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install_plugin(tmp_path, monkeypatch, "[episodes.extractors]\ngone = episodes_not_there:make\n")
    with pytest.raises(ConfigError, match=r"extractor 'gone' \(episodes_not_there:make\) cannot be imported"):
        make_extractor(config.Settings(), "gone")


def test_auto_picks_anthropic_then_openai_then_offline_never_claude_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert config.load().resolved_extractor == "offline"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    if "openai" not in registry.installed(registry.EXTRACTORS):
        # Not installed: OPENAI_BASE_URL alone does not pick a back end that is not there.
        assert config.load().resolved_extractor == "offline"
        install_plugin(tmp_path, monkeypatch, "[episodes.extractors]\nopenai = episodes_echo_plugin:make\n")
    assert config.load().resolved_extractor == "openai"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert config.load().resolved_extractor == "anthropic"
    # claude-code is never chosen by itself, whatever is installed or logged in: only by name.
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert config.load().resolved_extractor == "offline"
    monkeypatch.setenv("EPISODES_EXTRACTOR", "claude-code")
    if "claude-code" in registry.installed(registry.EXTRACTORS):
        assert config.load().resolved_extractor == "claude-code"


def test_an_unknown_extractor_setting_fails_when_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EPISODES_EXTRACTOR", "gpt")
    with pytest.raises(ConfigError, match=r"EPISODES_EXTRACTOR='gpt'; use auto, anthropic, .*offline"):
        config.load()


def test_a_run_says_which_back_end_made_its_episodes_and_how_to_get_better_ones(db: object) -> None:
    from click.testing import CliRunner

    from jobs.cli import cli

    result = CliRunner().invoke(cli, ["run", "--extractor", "offline"])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("· by offline")
    assert "--extractor claude-code summarises with your Claude Code login" in result.stderr
