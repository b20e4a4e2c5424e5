"""JSON answers rendered by the standard library's encoder."""

from __future__ import annotations

import json
from typing import Any

from fastapi import Response


def json_answer(content: Any, status: int = 200) -> Response:
    """A JSON answer rendered by the stdlib encoder (non-ASCII kept, compact).

    Routes return this rather than a dict so FastAPI's response serializer (which
    refuses nesting its own limit considers too deep) never runs after a write has
    been committed: what a route answers is what it validated or stored, and the
    stdlib encoder renders anything that passed the input checks.
    """
    body = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return Response(body.encode("utf-8"), status_code=status, media_type="application/json")
