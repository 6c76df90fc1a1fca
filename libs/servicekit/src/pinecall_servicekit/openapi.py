"""The OpenAPI a service serves says what the service enforces (issue 21: "a client generated
from our OpenAPI must work: make the schemas exact"), where Litestar's generation says otherwise.

:func:`exact` corrects, once, the schema Litestar made of an app's routes:

- A contract's tag (``"type": "fleet.cordon_request.v1"``) is optional: msgspec decodes a body
  without it into the tagged Struct (the route names the one type), and a body that names another
  is refused. The schema kept it required.
- A body declared ``SomeStruct | None = None`` may be left out, and is never ``null``
  (:class:`~pinecall_servicekit.body.StrictBody` decodes the Struct alone): the schema said a
  required body of the Struct or ``null``.
"""

from __future__ import annotations

from litestar.openapi.spec import OpenAPI, Operation, Reference, Schema
from litestar.openapi.spec.enums import OpenAPIType

_METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def exact(spec: OpenAPI) -> None:
    """Correct ``spec`` in place (see the module)."""
    for schema in (spec.components.schemas or {}).values():
        _tag_optional(schema)
    for item in (spec.paths or {}).values():
        for method in _METHODS:
            operation = getattr(item, method, None)
            if isinstance(operation, Operation):
                _body_left_out_not_null(operation)


def _tag_optional(schema: Schema) -> None:
    tag = (schema.properties or {}).get("type")
    if isinstance(tag, Schema) and tag.const is not None and schema.required:
        schema.required = [name for name in schema.required if name != "type"] or None


def _is_null(schema: Schema | Reference) -> bool:
    return isinstance(schema, Schema) and schema.type == OpenAPIType.NULL


def _body_left_out_not_null(operation: Operation) -> None:
    body = operation.request_body
    if body is None or isinstance(body, Reference):
        return
    for media in body.content.values():
        schema = media.schema
        choices = schema.one_of if isinstance(schema, Schema) else None
        if choices and any(_is_null(c) for c in choices):
            kept = [c for c in choices if not _is_null(c)]
            media.schema = kept[0] if len(kept) == 1 else Schema(one_of=kept)
            body.required = False
