"""Reading ``X-End-User-ID``, raw or percent-encoded.

A header carries printable ASCII only, so a client sends another id (``josé``, ``用户``,
one with a leading space) percent-encoded as UTF-8 with ``X-End-User-ID-Encoding:
percent``. Without that second header the value is the id as it is (``jos%C3%A9`` is
then a user of that literal name). ``/health`` lists :data:`CAPABILITY`, so a client
knows it may encode; the rules are in docs/wire-protocol.md.
"""

import hashlib
from urllib.parse import unquote_to_bytes

from fastapi import HTTPException

CAPABILITY = "end-user-id-encoding"
ENCODING = "percent"
MAX_END_USER_CHARS = 512


def read_end_user(value: str | None, encoding: str | None) -> str:
    """The end user named by the two headers; a 400 naming the header when unusable."""
    if value is None or not value.strip():
        raise HTTPException(400, "X-End-User-ID header is required on /memory routes")
    if encoding is not None:
        if encoding.strip().lower() != ENCODING:
            raise HTTPException(
                400, f"X-End-User-ID-Encoding must be {ENCODING!r}, got {encoding[:40]!r}"
            )
        try:
            value = unquote_to_bytes(value.strip()).decode("utf-8")
        except UnicodeDecodeError:
            raise HTTPException(400, "X-End-User-ID is not percent-encoded UTF-8") from None
        if not value.strip() or "\x00" in value:
            raise HTTPException(400, "X-End-User-ID decodes to a blank id or one with NUL")
    if len(value) > MAX_END_USER_CHARS:
        raise HTTPException(400, f"X-End-User-ID longer than {MAX_END_USER_CHARS} characters")
    return value


def user_number(tenant_id: str, user_id: str | None) -> int:
    """The end user's number: what ``GET /memory/export`` answers as ``user_id``.

    The official client reads that field as an integer (the hosted account id), and an
    end-user id is a string, so the number is derived from the tenant and the id: the
    first 52 bits of SHA-256 over ``tenant NUL user`` plus one, never 0, safe as a
    JavaScript number, the same on every server and database. ``GET /x-local/v1/users``
    lists it beside each id. Without an end user (a tenant-wide export) it is the
    tenant's own number, from the tenant id alone.
    """
    seed = tenant_id if user_id is None else f"{tenant_id}\0{user_id}"
    digest = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).digest()
    return (int.from_bytes(digest[:7], "big") >> 4) + 1
