"""The front door stays short and its links lead somewhere.

`mkdocs build --strict` (.ci/run) checks the links, anchors and navigation of the pages under docs/;
these checks cover what it cannot see: the README and the CHANGELOG live outside docs/, and nothing
else stops the README from growing back into a lab notebook. Plain file reads, no mkdocs needed.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*(?:\{#([\w-]+)\})?\s*$")


def _slug(heading: str) -> str:
    """The anchor Python-Markdown's toc extension (MkDocs) gives a heading. GitHub's differs only where
    punctuation stands between words ("A / B": `a--b` there, `a-b` here); a link to such a heading cannot
    work on both, so the check rejects it."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading)
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def _anchors(page: Path) -> set[str]:
    anchors, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
        match = None if fenced else _HEADING.match(line)
        if match:
            anchors.add(match.group(2) or _slug(match.group(1)))
    return anchors


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # code is not a link
    return [target for target in _LINK.findall(text) if not re.match(r"[a-z]+:", target)]


def test_readme_is_short() -> None:
    lines = len((ROOT / "README.md").read_text(encoding="utf-8").splitlines())
    assert lines <= README_MAX_LINES, (
        f"README.md has {lines} lines (at most {README_MAX_LINES}): move the detail into a page under docs/"
    )


@pytest.mark.parametrize("name", ["README.md", "CHANGELOG.md"])
def test_links_lead_to_files_and_headings_that_exist(name: str) -> None:
    page = ROOT / name
    broken = []
    for target in _links(page):
        path, _, anchor = target.partition("#")
        file = (page.parent / path).resolve() if path else page
        if not file.exists():
            broken.append(f"{target}: no file {path}")
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(f"{target}: no heading #{anchor} in {path or name}")
    assert not broken, f"{name} links to what is not there: " + "; ".join(broken)


def test_every_page_is_in_the_navigation() -> None:
    def pages(nav: object) -> list[str]:
        if isinstance(nav, str):
            return [nav]
        if isinstance(nav, list):
            return [page for item in nav for page in pages(item)]
        if isinstance(nav, dict):
            return [page for value in nav.values() for page in pages(value)]
        return []

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(ROOT / "docs")) for p in (ROOT / "docs").rglob("*.md")}
    assert on_disk - listed == set(), "pages missing from mkdocs.yml's nav (readers cannot reach them)"
    assert listed - on_disk == set(), "mkdocs.yml's nav names pages that do not exist"


def test_the_slug_rule_matches_the_pages_anchors() -> None:
    # The rule the link check relies on, on headings of the kinds the pages use.
    assert _slug("The embedded PostgreSQL") == "the-embedded-postgresql"
    assert _slug("`episodes serve`") == "episodes-serve"
    assert _slug("Correcting and forgetting one episode") == "correcting-and-forgetting-one-episode"
    assert _slug("Claude Code, over stdio") == "claude-code-over-stdio"
