"""Jinja2 templates in prompts/, rendered with StrictUndefined so a missing variable fails loudly."""

from __future__ import annotations

import hashlib
from functools import cache
from typing import Any

import jinja2

from jobs.resources import prompts_dir


@cache
def environment() -> jinja2.Environment:
    loader = jinja2.FunctionLoader(_load)
    return jinja2.Environment(
        loader=loader,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # these are prompts and plain-text blocks, not HTML
        keep_trailing_newline=False,
        trim_blocks=False,
    )


def _load(name: str) -> str:
    path = prompts_dir() / name
    if not path.is_file():
        raise jinja2.TemplateNotFound(name)
    return path.read_text(encoding="utf-8")


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context).strip()


def source(name: str) -> str:
    return _load(name)


def template_names() -> list[str]:
    return sorted(p.name for p in prompts_dir().iterdir() if p.name.endswith(".j2"))


def fingerprint(*parts: str) -> str:
    """A short stable hash of template sources (and schemas): the prompt version."""
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\0")
    return digest.hexdigest()[:12]
