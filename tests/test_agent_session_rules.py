"""The offline extractor's rules for coding-agent sessions (issue 30, deliver 6), sentence by sentence: working
narration, format tags, markup and notices that are nobody's words, and the names of code.

The sentences were written here, except Claude Code's own markers (``<command-name>``, "[Request interrupted by
user for tool use]") and "Phoenix server is starting in the background.", quoted from marot/spotter's Claude Code
fixtures (MIT; ../shared/data/claude-code/README.md names each file)."""

import datetime as dt

import pytest

from jobs.extract.rules.agent import clean_said, code_names, is_format_tag, is_narration


@pytest.mark.parametrize(
    ("sentence", "narration"),
    [
        ("Let me check the project structure.", True),
        ("I'll run the tests to see what fails.", True),
        ("Now I'll update the claim query.", True),
        ("Next, I need to read the config.", True),
        ("Great! Now let me draft the beads.", True),
        ("I'm going to look at the migrations.", True),
        ("Let the assistant check the MCP servers status.", True),
        ("I'll send you the report tomorrow.", False),
        ("I'll follow up with the security review by Friday.", False),
        ("I'll check with the billing team and email you.", False),
        ("The claim query locks rows without SKIP LOCKED.", False),
        ("Phoenix server is starting in the background.", False),
    ],
)
def test_narration_rule(sentence: str, narration: bool) -> None:
    assert is_narration(sentence, dt.date(2026, 2, 10)) is narration


@pytest.mark.parametrize(
    ("tag", "expected"),
    [
        ("tool", True),
        ("tool result", True),
        ("user", True),
        ("command-name", True),
        ("json", True),
        ("request interrupted", True),
        ("skip locked", False),
        ("queue", False),
        ("tool shed", False),
    ],
)
def test_format_tags(tag: str, expected: bool) -> None:
    assert is_format_tag(tag) is expected


def test_markup_and_notices_are_nobodys_words() -> None:
    assert (
        clean_said(
            "<command-name>/mcp</command-name>\n<command-message>mcp</command-message>\n"
            "<command-args>websearch xterm.js scrolling</command-args>"
        )
        == "websearch xterm.js scrolling"
    )
    assert clean_said("[Request interrupted by user for tool use]") == ""
    assert clean_said("Fixed it.\n[tool result Bash: ok]") == "Fixed it."


def test_code_names() -> None:
    found = dict(
        code_names(
            "mix phx.server doesnt start; see `git rebase -i main`, mix.exs and node.js. Mix well, version 1.2.3."
        )
    )
    assert found == {"git rebase -i main": "other", "mix phx.server": "other", "mix.exs": "other", "node.js": "product"}
