"""Reading ``X-End-User-ID``, raw or percent-encoded.

A header carries printable ASCII only, so a client sends another id (``josé``, ``用户``,
one with a leading space) percent-encoded as UTF-8 with ``X-End-User-ID-Encoding:
percent``. Without that second header the value is the id as it is (``jos%C3%A9`` is
then a user of that literal name). ``/health`` lists :data:`CAPABILITY`, so a client
knows it may encode; the rules are in docs/wire-protocol.md.
"""

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
