"""Request bodies: decoded once, strictly, straight from the bytes (issue 15, item 7).

A handler declares its body as ``data: JSONBody[SomeStruct]`` (or ``SomeStruct | None = None``
where it may be left out), so OpenAPI names its schema. Litestar alone would parse the JSON into
Python objects and then convert them to the Struct leniently (``"2"`` is an ``int`` there): the
runtime's contracts are strict, and a handler used to decode the raw body a second time to say so.
:class:`StrictBody`, the data DTO of every service app (:func:`~pinecall_servicekit.http.service_app`),
takes the body's bytes and decodes them once with msgspec, strictly, into the declared type; Litestar
then takes the value as it is (its signature model types a DTO's ``data`` as ``Any``).

A number of no fraction (``2042.0``) is an integer, as JSON Schema (the OpenAPI) counts it.
A body that does not decode is a ``BadRequest`` (400, ``bad_request``): ``malformed JSON: …`` or
``not a <Struct>: … - at `$.field```. A route that can say more about a refused body (the roster's
422 for a worker name outside the grammar) gives its own subclass, whose :meth:`StrictBody.refused`
runs only for a refused body, never on the way of a good one. An empty body is no ``data``: the
handler's default (``None``), or Litestar's 400 where the body is required.

A string holding the NUL character (JSON's ``\u0000``) is refused before the handler runs: 422,
``a NUL character (\u0000) cannot be stored - at `$.script[0]```. Postgres stores no NUL in
text or JSON, so such a body could only fail at its write — after whatever the handler did first
(an eval's whole call, answered 200 and its result never on the log, as a probe found). Only a
body whose bytes hold ``\u0000`` is looked through.

Litestar's custom DTOs: ``docs/usage/dto/2-creating-custom-dto-classes.rst``; the DTO extractor
that hands a DTO the raw bytes is ``litestar/_kwargs/extractors.py`` (``create_dto_extractor``).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec
from litestar.dto import AbstractDTO
from litestar.typing import FieldDefinition

from pinecall_contracts.plain import plainly
from pinecall_servicekit.errors import BadRequest, PinecallError, Unprocessable

if TYPE_CHECKING:
    from litestar._openapi.schema_generation import SchemaCreator
    from litestar.dto._backend import DTOBackend
    from litestar.dto.data_structures import DTOFieldDefinition
    from litestar.openapi.spec import Reference, Schema


def _body_type(field: FieldDefinition) -> Any:
    """The type a body decodes to: the declared one, without its ``| None`` (a body of ``null``
    is refused like any other non-object; leaving the body out is how ``None`` is said)."""
    if field.is_optional:
        return next(t for t in field.inner_types if not t.is_none_type).annotation
    return field.annotation


def _integral(literal: str) -> int | float:
    number = float(literal)
    return int(number) if number.is_integer() else number


_INTEGRAL: msgspec.json.Decoder[Any] = msgspec.json.Decoder(float_hook=_integral)
"""JSON with each number of no fraction (``2042.0``, ``1e3``) an ``int``: a body the strict
decoding refused is read again so, then converted as strictly (JSON Schema counts ``2042.0``
an integer, as the OpenAPI says it; a ``float`` field takes an ``int``). Only a refused body
pays for it."""


_NUL_ESCAPE = b"\\u0000"
"""How JSON writes the NUL character (a raw control character is not JSON)."""


def _nul_at(value: Any, path: str = "$") -> str | None:
    """The path of the first string (or key) in ``value`` holding a NUL character, else None.
    Structs are walked by their fields, as msgspec names them in its errors."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, msgspec.Struct):
        value = {f: getattr(value, f) for f in value.__struct_fields__}
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                return path
            if (found := _nul_at(item, f"{path}.{key}")) is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            if (found := _nul_at(item, f"{path}[{i}]")) is not None:
                return found
    return None


class StrictBody(AbstractDTO[Any]):
    """Litestar's data DTO for JSON bodies: msgspec decodes the raw bytes once, strictly, into
    the handler's declared ``data`` type. It only decodes: responses are Litestar's to encode
    (the app sets no return DTO)."""

    _decoders: ClassVar[dict[Any, msgspec.json.Decoder[Any]]] = {}
    """One decoder a body type, shared by every app and handler that takes it."""

    @classmethod
    def refused(cls, body: bytes, problem: BadRequest) -> PinecallError:
        """The error for ``body``, which did not decode (``problem`` says why): ``problem``
        itself here; a route whose refusals say more overrides it."""
        return problem

    def decode_bytes(self, value: bytes) -> Any:
        """``value`` as the route's body type; raises :meth:`refused`'s error (400 by default)."""
        field = self.asgi_connection.route_handler.parsed_data_field
        assert field is not None  # Litestar calls a data DTO only for a handler that takes data
        kind = _body_type(field)
        decoder = self._decoders.get(kind) or self._decoder(kind)
        try:
            decoded = decoder.decode(value)
        except msgspec.ValidationError as exc:
            decoded = self._integral(value, kind, exc)
        except msgspec.DecodeError as exc:
            raise self.refused(value, BadRequest(f"malformed JSON: {exc}")) from exc
        if _NUL_ESCAPE in value and (path := _nul_at(decoded)) is not None:
            raise Unprocessable(f"a NUL character (\\u0000) cannot be stored - at `{path}`")
        return decoded

    def _integral(self, value: bytes, kind: Any, exc: msgspec.ValidationError) -> Any:
        """``value`` read with its integral floats as integers (JSON Schema's "integer": 2042.0)
        when that is what the strict decoding refused; else :meth:`refused`'s error for ``exc``."""
        if "got `float`" in str(exc):
            try:
                return msgspec.convert(_INTEGRAL.decode(value), kind, strict=True)
            except (msgspec.ValidationError, msgspec.DecodeError):
                pass  # the first refusal says why (malformed JSON past it too)
        name = getattr(kind, "__name__", str(kind))
        raise self.refused(value, BadRequest(f"not a {name}: {plainly(str(exc))}")) from exc

    @classmethod
    def _decoder(cls, kind: Any) -> msgspec.json.Decoder[Any]:
        decoder = cls._decoders[kind] = msgspec.json.Decoder(kind)  # strict: msgspec's default
        return decoder

    @classmethod
    def create_for_field_definition(
        cls,
        field_definition: FieldDefinition,
        handler_id: str,
        backend_cls: type[DTOBackend] | None = None,
    ) -> None:
        """At registration: the body type's decoder, built once (a type msgspec cannot decode
        fails the app's start, not its first request). No transfer models: nothing is copied."""
        kind = _body_type(field_definition)
        if kind not in cls._decoders:
            cls._decoder(kind)

    @classmethod
    def create_openapi_schema(
        cls, field_definition: FieldDefinition, handler_id: str, schema_creator: SchemaCreator
    ) -> Reference | Schema:
        """The declared type's schema, as Litestar makes it for a handler without a DTO: the
        request body names the Struct (``#/components/schemas/WorkerHeartbeat``), never ``null``
        (an optional body is left out: :func:`pinecall_servicekit.openapi.exact`)."""
        return schema_creator.for_field_definition(field_definition)

    @classmethod
    def generate_field_definitions(
        cls, model_type: type[Any]
    ) -> Generator[DTOFieldDefinition, None, None]:
        """Never called: this DTO builds no transfer model (``create_for_field_definition``)."""
        yield from ()

    @classmethod
    def detect_nested_field(cls, field_definition: FieldDefinition) -> bool:
        """Never called, as :meth:`generate_field_definitions`."""
        return False
