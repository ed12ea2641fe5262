"""No message or page advises installing a name we do not own (issue 35, item 5).

The name `episodes` on PyPI belongs to another project, so `pip install -U episodes` (which an error
used to advise) installs a stranger's code. Every module of jobs/ (its messages), every doc page and the
README are scanned for advice to install the bare name from a package index, in any of the usual
spellings; installing from the clone (`pip install -e .`, `pip install --no-deps .`) is how we install.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT

from jobs.errors import UPGRADE, SchemaTooNew

# pip / pip3 / python -m pip / uv pip / uv add / uv tool install / pipx / poetry add, any options, then
# the bare name (with extras, a version or quotes), ending the word
_S = r"[ \t]+"  # advice is on one line
_INSTALLER = (
    rf"(?:(?:python3?{_S}-m{_S})?pip3?{_S}install|uv{_S}pip{_S}install|uv{_S}add|uv{_S}tool{_S}install"
    rf"|pipx{_S}install|poetry{_S}add)"
)
ADVICE = re.compile(
    _INSTALLER + rf"(?:{_S}-{{1,2}}[\w-]+(?:=\S+)?)*{_S}[\"']?episodes(?:\[[\w,-]*\])?"
    r"(?:[ \t]*[=<>~!]=?[ \t]*[\w.*]+)?[\"']?(?![\w./-])",
    re.IGNORECASE,
)


def scanned() -> list[Path]:
    files = [*sorted((ROOT / "jobs").rglob("*.py")), *sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    assert len(files) > 100
    return files


@pytest.mark.parametrize(
    "text",
    [
        "pip install -U episodes",
        "pip install episodes",
        "uv pip install episodes",
        "pip3 install --upgrade episodes",
        "python -m pip install 'episodes[voyage]'",
        "pipx install episodes",
        "uv add episodes",
        "pip install episodes==0.2",
        "`pip install --user -U episodes`",
        "(pip install -U episodes)",
        "uv tool install episodes",
    ],
)
def test_the_pattern_finds_the_advice(text: str) -> None:
    assert ADVICE.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "pip install -e .",
        "pip install --require-hashes -r requirements/runtime.txt && pip install --no-deps .",
        'pip install -e ".[test]"',
        "pip install voyageai",
        "pip install episodes-helper",
        "pip install ./episodes",
        "pip install -e episodes/",
        "the package named episodes on PyPI is another project's",
    ],
)
def test_the_pattern_leaves_installs_from_the_clone_alone(text: str) -> None:
    assert not ADVICE.search(text)


def test_no_message_or_page_advises_installing_episodes_by_name() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group()}"
        for path in scanned()
        for text in [path.read_text(encoding="utf-8")]
        for m in ADVICE.finditer(text)
    ]
    assert not found, found


def test_the_upgrade_advice_installs_from_the_clone() -> None:
    message = str(SchemaTooNew())
    assert UPGRADE in message and "pip install -e ." in message and "--require-hashes" in message
    assert not ADVICE.search(message)
