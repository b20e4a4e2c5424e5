"""How a user id travels in the ``X-End-User-ID`` header.

An HTTP header carries printable ASCII, so an id such as ``josé`` cannot go as it is
(httpx refuses it; a server reading the bytes as latin-1 would see ``josÃ©``, another
user). Such an id is sent percent-encoded (UTF-8) with ``X-End-User-ID-Encoding:
percent``, and only to a server that lists :data:`CAPABILITY` in ``GET /health``: a
server that does not know the encoding would take ``jos%C3%A9`` literally, and a
``forget`` would erase nothing, silently.
"""

from __future__ import annotations

from urllib.parse import quote

HEADER = "X-End-User-ID"
ENCODING_HEADER = "X-End-User-ID-Encoding"
ENCODING = "percent"
CAPABILITY = "end-user-id-encoding"


def travels_raw(user_id: str) -> bool:
    """True when ``user_id`` goes in the header as it is: printable ASCII, not padded.

    Leading or trailing spaces count as not raw: header values are trimmed in transit.
    """
    return user_id.isascii() and user_id.isprintable() and user_id.strip() == user_id


def encode(user_id: str) -> str:
    """``user_id`` as UTF-8, percent-encoded: every byte but ``A-Z a-z 0-9 - . _ ~``."""
    return quote(user_id, safe="")
