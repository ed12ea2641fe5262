"""How pydantic sees the recall result's dataclasses (:mod:`jobs.recall.result`): one typed object from
the recaller to the HTTP answer (and its OpenAPI document) and ``episodes recall --json``.

The result types stay plain dataclasses, because what builds and renders them must not import
pydantic: the Claude Code SessionStart hook recalls in a fresh process at every session start, and
pydantic is a third of such a start (tests/test_claude_code_fail_open.py checks that it is not loaded).
Pydantic reads them only where they are serialised or documented, through :class:`Wire`: its
``__get_pydantic_core_schema__`` runs at the first ``TypeAdapter`` (or FastAPI response model) that
names them, takes pydantic's own schema of the dataclass and adds what a dataclass cannot declare:

* ``computed``: properties sent with the fields (``when``, ``tokens``, ``block``), typed by their
  return annotation and described by their docstring, read-only in the JSON schema;
* ``hidden``: fields kept off the wire (they still validate).

Fields are described by the docstring under each one (pydantic's ``use_attribute_docstrings``), and
every field is required in the serialisation schema, since every answer carries every field.
"""

from __future__ import annotations

import typing
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from pydantic import GetCoreSchemaHandler
    from pydantic_core import CoreSchema


class Wire:
    """Base of the recall result's dataclasses: what pydantic adds to their fields (see the module)."""

    computed: ClassVar[tuple[str, ...]] = ()
    hidden: ClassVar[tuple[str, ...]] = ()
    __pydantic_config__: ClassVar[dict[str, Any]] = {
        "use_attribute_docstrings": True,
        "json_schema_serialization_defaults_required": True,
    }

    @classmethod
    def __get_pydantic_core_schema__(cls, source: type[Any], handler: GetCoreSchemaHandler) -> CoreSchema:
        from pydantic_core import core_schema

        schema = handler(source)
        dataclass = handler.resolve_ref_schema(schema)
        if dataclass["type"] != "dataclass" or dataclass["schema"]["type"] != "dataclass-args":
            raise TypeError(f"{cls.__name__}: expected pydantic's dataclass schema, got {dataclass['type']!r}")
        args = dataclass["schema"]
        for name in cls.hidden:
            (field,) = [f for f in args["fields"] if f["name"] == name]
            field["serialization_exclude"] = True
        computed = []
        for name in cls.computed:
            attribute = getattr(cls, name)
            getter = attribute.fget if isinstance(attribute, property) else attribute.func  # or a cached_property
            returns = typing.get_type_hints(getter)["return"]
            about = {"readOnly": True, "description": " ".join((getter.__doc__ or "").split())}
            computed.append(
                core_schema.computed_field(
                    name, handler.generate_schema(returns), metadata={"pydantic_js_updates": about}
                )
            )
        args["computed_fields"] = computed
        return schema
