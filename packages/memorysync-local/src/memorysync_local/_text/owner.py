"""The owner token a word index stores with each memory's terms."""

from __future__ import annotations

import hashlib


def owner_token(tenant_id: object, user_id: object) -> str:
    """One index token for a (tenant, user): a search matches only that user's rows."""
    key = f"{tenant_id}\x00{user_id}".encode("utf-8", "surrogatepass")
    return "o" + hashlib.blake2b(key, digest_size=10).hexdigest()
