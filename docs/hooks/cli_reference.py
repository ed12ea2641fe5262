"""MkDocs hook: the command reference, generated at build time from the commands' own --help.

Why generated: the help text is written beside each option in the code, so a reference built from it
cannot drift. The hook walks the click group (every command and subcommand, in the order
`episodes --help` lists them) and replaces the marker line of ``commands.md`` with each one's help.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

PAGE = "commands.md"
MARKER = "<!-- generated: the --help of every command -->"
WIDTH = 78  # what a code block of the page shows without scrolling


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker line {MARKER!r}: put it back where the reference goes")
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's code, not another install
    from jobs.cli import cli

    root = click.Context(cli, info_name="episodes", terminal_width=WIDTH, max_content_width=WIDTH)
    return markdown.replace(MARKER, "\n".join(_sections(cli, root, level=2)))


def _sections(command: click.Command, ctx: click.Context, level: int) -> list[str]:
    out = [f"{'#' * level} `{ctx.command_path}`\n", "```text", command.get_help(ctx), "```\n"]
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                out += _sections(sub, click.Context(sub, info_name=name, parent=ctx), min(level + 1, 3))
    return out
