"""``POST /v1/memory/recall`` answered without FastAPI's routing and dependency solving,
when the request is an ordinary one.

A recall is the hot path: on a served server FastAPI's routing, dependency solving
and body handling cost about a third of a millisecond of CPU a request, as much as
a small user's whole recall. The guard (``guard.py``), which has already checked
the key and read the body whole, hands such a request here. It is answered by the
route's own function (``contract_routes.recall_answer``, on a worker thread as
FastAPI would run it), so the bytes are the route's. Anything out of the ordinary
returns None and the request goes to FastAPI as before: a body that is not a JSON
object with ``Content-Type: application/json``, one the body model refuses, another
tenant's ``tenant_id``, a key over its limit, or any error while answering (recall
reads only, so running it again through FastAPI stores nothing twice; the route
then answers the error in its documented shape).
"""

from __future__ import annotations

import json
from typing import Any

from anyio import to_thread
from fastapi import Response
from pydantic import ValidationError
from starlette.types import Scope

from memorysync_local._http.dependencies import find_caller
from memorysync_local._http.models import RecallBody
from memorysync_local._plans import Caller, KeyRing

PATH = "/v1/memory/recall"


def wanted(scope: Scope) -> bool:
    """Whether ``scope`` is a recall this module may answer (method, path, JSON body)."""
    if scope.get("method") != "POST" or scope.get("path") != PATH:
        return False
    if scope.get("raw_path", PATH.encode()) != PATH.encode() or scope.get("root_path"):
        return False
    return _header(scope, b"content-type") == b"application/json"


async def answer(scope: Scope, keys: KeyRing, body: bytes) -> Response | None:
    """The recall's answer, or None to let FastAPI answer the request."""
    try:
        content = json.loads(body)
    except ValueError:
        return None
    if not isinstance(content, dict):
        return None
    try:
        recall = RecallBody.model_validate(content)
    except ValidationError:
        return None
    raw_key = _header(scope, b"x-api-key")
    who = find_caller(keys, None if raw_key is None else raw_key.decode("latin-1"))
    if who is None or who.tenant_id != recall.tenant_id:
        return None
    store = getattr(getattr(scope.get("app"), "state", None), "store", None)
    if store is None:
        return None
    try:
        return await to_thread.run_sync(_answer, recall, who, store)
    except Exception:  # the route answers it again, in its documented shape
        return None


def _answer(recall: RecallBody, who: Caller, store: Any) -> Response | None:
    # Imported here: the routes module imports the guard's modules (no cycle at import).
    from memorysync_local._http.contract_routes import recall_answer
    from memorysync_local._http.dependencies import reads_blocked

    if reads_blocked(store, who):
        return None  # an empty answer or a 429: the route decides
    return recall_answer(recall, who, store)


def _header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (as Starlette reads a single header)."""
    for key, value in scope.get("headers", []):
        if key == name:
            return bytes(value)
    return None
