"""MkDocs hook: the HTTP reference, generated from the service's own OpenAPI document at build time.

Why generated: FastAPI derives the document from the same pydantic models and routes that validate
requests, so a reference rendered from it cannot drift from what `episodes api` accepts. The hook
builds the app without a database (nothing in the document needs one), writes the document into the
site as ``openapi.json`` and replaces the marker line of ``http-reference.md`` with one section per
route and one per schema. Offline: no script, no CDN.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # render() needs no mkdocs: the tests import this module with the test extra alone
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

PAGE = "http-reference.md"
MARKER = "<!-- generated: the routes and schemas of openapi.json -->"
_METHODS = ("get", "post", "put", "patch", "delete")
_document: dict[str, Any] | None = None


def openapi_document() -> dict[str, Any]:
    """The service's OpenAPI document, built once per build from the app itself."""
    global _document
    if _document is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's code, not another install
        from jobs import config
        from jobs.db import Database
        from jobs.errors import DatabaseError
        from jobs.service.app import create_app

        class NoDatabase(Database):
            """Building the app must not connect anywhere: whatever asks for a connection gets an error
            at once (the metrics collector asks at registration and leaves its gauge out)."""

            @property
            def pool(self) -> Any:
                raise DatabaseError("the documentation build has no database")

        # A placeholder that is never reached: without one, asking for the URL would start the embedded server.
        os.environ.setdefault("DATABASE_URL", "postgresql://docs@127.0.0.1:1/none")
        _document = create_app(NoDatabase(config.load())).openapi()
    return _document


def on_files(files: Files, config: MkDocsConfig) -> Files:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "openapi.json", content=json.dumps(openapi_document(), indent=2) + "\n"))
    return files


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lost its marker line {MARKER!r}: put it back where the reference goes")
    return markdown.replace(MARKER, render(openapi_document()))


def render(doc: dict[str, Any]) -> str:
    """Markdown for every route (grouped by tag, in the document's order) and every schema."""
    groups: dict[str, list[str]] = {}
    for path, item in doc["paths"].items():
        for method in _METHODS:
            if method in item:
                operation = item[method]
                tag = (operation.get("tags") or ["other"])[0]
                groups.setdefault(tag, []).append(_operation(method, path, operation))
    out = []
    for tag, sections in groups.items():
        out.append(f"## {tag.capitalize()}\n")
        out.extend(sections)
    out.append("## Schemas\n")
    for name, schema in doc.get("components", {}).get("schemas", {}).items():
        out.append(_schema(name, schema))
    return "\n".join(out)


def _operation(method: str, path: str, op: dict[str, Any]) -> str:
    lines = [f"### {method.upper()} `{path}`\n", _text(op.get("description") or op.get("summary", "")) + "\n"]
    if op.get("security"):
        lines.append("Needs an API key: `Authorization: Bearer ep_…` (from `episodes keys create`).\n")
    params = op.get("parameters", [])
    if params:
        lines += ["| parameter | in | type | required | description |", "| --- | --- | --- | --- | --- |"]
        for p in params:
            schema = p.get("schema", {})
            lines.append(
                f"| `{p['name']}` | {p['in']} | {_type(schema)} | {'yes' if p.get('required') else 'no'} "
                f"| {_cell(_described(p.get('description') or schema.get('description', ''), schema))} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        schema = body.get("content", {}).get("application/json", {}).get("schema", {})
        lines.append(f"JSON body: {_type(schema)}{'' if body.get('required') else ' (optional)'}.\n")
    lines += ["| status | meaning | body |", "| --- | --- | --- |"]
    for status, response in op.get("responses", {}).items():
        schema = response.get("content", {}).get("application/json", {}).get("schema")
        lines.append(f"| {status} | {_cell(response.get('description', ''))} | {_type(schema) if schema else ''} |")
    return "\n".join(lines) + "\n"


def _schema(name: str, schema: dict[str, Any]) -> str:
    lines = [f"### {name} {{#{_anchor(name)}}}\n"]
    if schema.get("description"):
        lines.append(_text(schema["description"]) + "\n")
    properties = schema.get("properties", {})
    if properties:
        required = set(schema.get("required", []))
        lines += ["| field | type | required | description |", "| --- | --- | --- | --- |"]
        for field, spec in properties.items():
            # An answer's field that is always sent (required) has no default to speak of.
            described = (
                spec.get("description", "") if field in required else _described(spec.get("description", ""), spec)
            )
            lines.append(f"| `{field}` | {_type(spec)} | {'yes' if field in required else 'no'} | {_cell(described)} |")
    return "\n".join(lines) + "\n"


def _described(description: str, schema: dict[str, Any]) -> str:
    """A field's description with its default, when it has one."""
    if "default" not in schema:
        return description
    return f"{description} Default: `{json.dumps(schema['default'])}`.".strip()


def _type(schema: dict[str, Any]) -> str:
    """A schema in a few words: a link for a named one, the alternatives of anyOf, the constraints."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_anchor(name)})"
    if "anyOf" in schema:
        kinds = [s for s in schema["anyOf"] if s.get("type") != "null"]
        text = " or ".join(_type(s) for s in kinds)
        return text + (" or null" if len(kinds) < len(schema["anyOf"]) else "")
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    kind = schema.get("type", "any")
    if kind == "array":
        text = f"array of {_type(schema.get('items', {}))}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        text = f"object of {_type(schema['additionalProperties'])}"
    else:
        text = kind + (f" ({schema['format']})" if "format" in schema else "")
    limits = [
        f"{label} {_number(schema[key])}"
        for key, label in (
            ("minLength", "≥"),
            ("maxLength", "≤"),
            ("minimum", "≥"),
            ("maximum", "≤"),
            ("minItems", "≥"),
            ("maxItems", "≤"),
            ("maxProperties", "≤"),
        )
        if key in schema
    ]
    unit = " items" if kind == "array" else " keys" if kind == "object" else " chars" if kind == "string" else ""
    if limits:
        text += f" ({', '.join(limits)}{unit})"
    if "pattern" in schema and schema["pattern"] != "^[^\\x00]*$":
        text += f", pattern `{schema['pattern']}`"
    return text


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else str(value)


def _anchor(name: str) -> str:
    return "schema-" + name.lower()


def _text(text: str) -> str:
    """A docstring as Markdown: FastAPI cuts at a form feed; reStructuredText's ``x`` becomes `x`."""
    return text.split("\f")[0].strip().replace("``", "`")


def _cell(text: str) -> str:
    return " ".join(_text(text).split()).replace("|", "\\|")
