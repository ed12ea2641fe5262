"""Files shipped beside the code: prompts/, sql/, reports/ and examples/.

They live at the top of the repository and are mapped into the wheel as the packages
``jobs.prompt_templates``, ``jobs.sql_files``, ``jobs.reports`` and ``jobs.examples`` (pyproject.toml), so one
code path reads them in a checkout, an editable install and an installed wheel.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable


def sql_dir() -> Traversable:
    return files("jobs.sql_files")


def prompts_dir() -> Traversable:
    return files("jobs.prompt_templates")


def reports_dir() -> Traversable:
    return files("jobs.reports")


def examples_dir() -> Traversable:
    return files("jobs.examples")
