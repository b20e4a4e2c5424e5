"""Request bodies: what each route accepts, with the limits the contract sets.

Unknown fields are refused everywhere (a typo is answered, not ignored), and
strings that SQLite could not store (unpaired surrogates) are refused at the
field that carries them.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, model_validator
from pydantic.json_schema import models_json_schema

from memorysync_local._timeutil import normalise_iso

MAX_TEXT_CHARS = 16_000
MAX_TURNS = 100
MAX_FORGET_IDS = 100
MAX_HISTORY_LIMIT = 5_000
MAX_K = 100
MAX_ID_CHARS = 512
MAX_JSON_CHARS = 64_000
# Nesting of client JSON (metadata, payload): one limit, checked before anything is
# written, far below what any serializer on the way back refuses.
MAX_JSON_DEPTH = 64
MAX_INT = 2**63 - 1


def _storable(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("contains an unpaired surrogate (not valid Unicode text)") from None
    if "\x00" in value:
        raise ValueError("contains a NUL character")
    return value


def json_depth(value: Any) -> int:
    """How deeply containers nest in ``value`` (a scalar is 0, ``{}`` is 1); iterative."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        if deepest > MAX_JSON_DEPTH:
            return deepest
        stack.extend((child, depth) for child in children)
    return deepest


def _check_json(value: Any) -> None:
    """Refuse JSON that nests too deeply, is not valid text, or is too long."""
    if json_depth(value) > MAX_JSON_DEPTH:
        raise ValueError(f"must nest at most {MAX_JSON_DEPTH} levels deep")
    try:
        encoded = json.dumps(value, ensure_ascii=False, allow_nan=False)
        encoded.encode("utf-8")
    except (ValueError, UnicodeEncodeError, RecursionError) as exc:
        raise ValueError(f"must be JSON of valid text ({exc.__class__.__name__})") from None
    if len(encoded) > MAX_JSON_CHARS:
        raise ValueError(f"must serialise to at most {MAX_JSON_CHARS} characters")


def _json_object(value: dict[str, Any]) -> dict[str, Any]:
    _check_json(value)
    return value


def _json_value(value: Any) -> Any:
    if value is not None:
        _check_json(value)
    return value


def _iso(value: str) -> str:
    try:
        return normalise_iso(value)
    except (ValueError, OverflowError):
        raise ValueError(
            f"must be an ISO 8601 date-time within the years 0001-9999 (UTC), got {value[:40]!r}"
        ) from None


Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS), AfterValidator(_storable)]
Name = Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS), AfterValidator(_storable)]
Short = Annotated[str, Field(max_length=MAX_ID_CHARS), AfterValidator(_storable)]
IsoTime = Annotated[str, Field(max_length=64), AfterValidator(_iso)]


def _speaker(value: str) -> str:
    # NFC: "Émile" typed with a combining accent is the same name as the composed one.
    name = unicodedata.normalize("NFC", value).strip()
    if not name:
        raise ValueError("a speaker is a name, not blank")
    return name


Speaker = Annotated[
    str, Field(max_length=MAX_ID_CHARS), AfterValidator(_storable), AfterValidator(_speaker)
]
JsonObject = Annotated[dict[str, Any], AfterValidator(_json_object)]
JsonValue = Annotated[Any, AfterValidator(_json_value)]
MemoryId = Annotated[int, Field(ge=1, le=MAX_INT, strict=True)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=False)


class AddTurnBody(_Body):
    tenant_id: Name
    user_id: Name
    text: Text
    source: Short = "api"
    role: Literal["user", "assistant", "system", "tool"] | None = None
    speaker: Short | None = None
    occurred_at: IsoTime | None = None
    metadata: JsonObject | None = None
    sync_embed: StrictBool | None = None

    @model_validator(mode="after")
    def _text_not_blank(self) -> AddTurnBody:
        if not self.text.strip():
            raise ValueError("text must contain something other than whitespace")
        return self


class RecallBody(_Body):
    tenant_id: Name
    user_id: Name
    prompt: Annotated[str, Field(max_length=MAX_TEXT_CHARS), AfterValidator(_storable)]
    k: Annotated[int, Field(ge=1, le=MAX_K, strict=True)] | None = None
    types: list[Short] | None = None
    # Extensions (docs/wire-protocol.md, "Memory that stays true"): superseded
    # memories too, and only the memories said in [since, until).
    history: StrictBool = False
    since: IsoTime | None = None
    until: IsoTime | None = None

    @model_validator(mode="after")
    def _window_in_order(self) -> RecallBody:
        check_window(self.since, self.until)
        return self


def check_window(since: str | None, until: str | None) -> None:
    """A ValueError naming both when ``until`` is not after ``since``."""
    if since is not None and until is not None and until <= since:
        raise ValueError(f"until ({until}) must be after since ({since})")


class ForgetFilters(_Body):
    session_id: Name | None = None
    source: Name | None = None
    before: IsoTime | None = None
    after: IsoTime | None = None


class ForgetBody(_Body):
    memory_ids: Annotated[list[MemoryId], Field(min_length=1, max_length=MAX_FORGET_IDS)] | None = (
        None
    )
    filters: ForgetFilters | None = None
    reason: Short | None = None
    dry_run: StrictBool | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> ForgetBody:
        if (self.memory_ids is None) == (self.filters is None):
            raise ValueError("send exactly one of memory_ids or filters")
        if self.filters is not None and not self.filters.model_dump(exclude_none=True):
            raise ValueError(
                "filters needs at least one criterion: session_id, source, before, after"
            )
        if self.memory_ids is not None and self.dry_run:
            raise ValueError("dry_run applies to filters only")
        return self


class AddMemoryBody(_Body):
    text: Text
    source: Short | None = None
    tags: Annotated[list[Short], Field(max_length=100)] | None = None
    importance: Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)] | None = None
    session_id: Name | None = None
    metadata: JsonObject | None = None
    client_ref: (
        Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_storable)] | None
    ) = None
    # Extension: store ``text`` as one memory exactly as given, without extraction.
    verbatim: StrictBool | None = None
    # Extension: when it was said (an imported conversation's turn); recall by date uses it.
    occurred_at: IsoTime | None = None
    # Extension: who said it (a dialog turn's speaker); recall's dialog rules read it.
    speaker: Speaker | None = None


_ROLE_ALIASES = {"human": "user", "ai": "assistant"}
_ROLES = frozenset({"user", "assistant", "system", "tool", "function", "developer"})


def _role(value: str) -> str:
    role = value.strip().lower()
    role = _ROLE_ALIASES.get(role, role)
    if role not in _ROLES:
        raise ValueError(
            f"must be one of user, assistant, system, tool, function, developer, human, ai; "
            f"got {value[:40]!r}"
        )
    return role


class HistoryTurn(_Body):
    role: Annotated[str, Field(max_length=32), AfterValidator(_role)]
    content: Annotated[str, Field(max_length=MAX_TEXT_CHARS), AfterValidator(_storable)]
    seq: Annotated[int, Field(ge=-MAX_INT, le=MAX_INT, strict=True)] | None = None
    occurred_at: IsoTime | None = None
    payload: JsonValue = None
    idempotency_key: Name | None = None


class HistoryAppendBody(_Body):
    tenant_id: Name
    user_id: Name
    session_id: Name
    source: Short = "api"
    turns: Annotated[list[HistoryTurn], Field(min_length=1, max_length=MAX_TURNS)]
    extract: StrictBool = True
    metadata: JsonObject | None = None


class HistoryListBody(_Body):
    tenant_id: Name
    user_id: Name
    session_id: Name
    source: Short | None = None
    limit: Annotated[int, Field(ge=0, le=MAX_HISTORY_LIMIT, strict=True)] = 0


HistoryId = (
    Annotated[str, Field(min_length=1, max_length=64)]
    | Annotated[int, Field(ge=0, le=MAX_INT, strict=True)]
)


class HistoryDeleteBody(_Body):
    tenant_id: Name
    user_id: Name
    session_id: Name | None = None
    ids: Annotated[list[HistoryId], Field(min_length=1, max_length=MAX_FORGET_IDS)] | None = None
    source: Short | None = None
    delete_derived_facts: StrictBool = False

    @model_validator(mode="after")
    def _exactly_one(self) -> HistoryDeleteBody:
        if (self.session_id is None) == (self.ids is None):
            raise ValueError("send exactly one of session_id or ids")
        return self


# ----------------------------------------------------------------- error answers (OpenAPI)


class ValidationIssue(BaseModel):
    """One entry of a validation error's ``detail`` list."""

    loc: list[str | int]
    msg: str
    type: str


class ErrorAnswer(BaseModel):
    """``{"detail": "text"}``, or a validation list ``{"detail": [{loc, msg, type}]}``."""

    detail: str | list[ValidationIssue]


class RetryError(BaseModel):
    """The ``error`` object of a 429, 503 or 507 answer (a 507 has no ``retry_after``)."""

    message: str
    type: str | None = None
    retry_after: float | None = None


class RetryAnswer(BaseModel):
    """A 429 (quota) or 503 (database busy) answer with a retry hint, or a 507."""

    error: RetryError
    retry_after: float | None = None


def _answer(model: type[BaseModel], description: str) -> dict[str, Any]:
    # A reference, not ``"model": model``: FastAPI builds a validator for every model
    # response of every route, and these eleven on sixty routes made each app take
    # seconds to build. :func:`error_schemas` puts the two schemas in the document once.
    schema = {"$ref": f"#/components/schemas/{model.__name__}"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def error_schemas() -> dict[str, Any]:
    """The JSON schemas that :data:`ERROR_RESPONSES` refers to, for the OpenAPI components."""
    _, document = models_json_schema(
        [(ErrorAnswer, "serialization"), (RetryAnswer, "serialization")],
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = document.get("$defs", {})
    return schemas


# Declared on every route, so the OpenAPI document describes every answer the app gives.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: _answer(ErrorAnswer, "Rejected request (a header or body that cannot be used)"),
    401: _answer(ErrorAnswer, "Missing or unknown API key"),
    403: _answer(ErrorAnswer, "The key does not own this tenant, or lacks the scope"),
    404: _answer(ErrorAnswer, "Not visible to the caller"),
    408: _answer(ErrorAnswer, "The request body stopped arriving (the connection is closed)"),
    409: _answer(ErrorAnswer, "Conflicting request"),
    413: _answer(ErrorAnswer, "Body larger than the server accepts"),
    422: _answer(ErrorAnswer, "Validation error naming the field"),
    429: _answer(RetryAnswer, "Over the plan's limit (evaluation keys)"),
    503: _answer(RetryAnswer, "The database is busy; retry shortly"),
    507: _answer(RetryAnswer, "The storage is full, read-only or failing; not worth retrying"),
}
