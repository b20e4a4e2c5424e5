"""What every route group's handlers depend on: the caller, the end user, the app's state.

One key check serves the whole server: :func:`find_caller` decides, the routes' ``Auth``
dependency and the guard (which refuses a keyless body before reading it) both ask it,
and both answer 401 with :data:`UNAUTHORIZED`. The store, the key ring and the readiness
probe are the app's (``create_app`` puts them on ``app.state``); handlers reach them
through ``request.app.state``, so one module-level router serves any number of apps.
"""

# No `from __future__ import annotations`: FastAPI reads the dependency annotations.
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from memorysync_local._http.end_user import read_end_user
from memorysync_local._http.readiness import Readiness
from memorysync_local._plans import Caller, KeyRing
from memorysync_local._service.quota import QuotaExceeded
from memorysync_local._service.store import Store

# The one 401 answer: a missing, blank or unknown key are told apart by no one.
UNAUTHORIZED = "missing or unknown API key (send it in the X-API-Key header)"


def find_caller(keys: KeyRing, api_key: str | None) -> Caller | None:
    """The caller ``api_key`` names; None for a missing, blank or unknown key."""
    if api_key is None or not api_key.strip():
        return None
    return keys.lookup(api_key)


# The dependencies below are async: attribute reads and a dict lookup cost no
# worker-thread hop.
async def app_store(request: Request) -> Store:
    """The app's store (``create_app`` sets ``app.state.store``)."""
    store: Store = request.app.state.store
    return store


async def app_readiness(request: Request) -> Readiness:
    """The app's readiness probe (one per app, so one check runs at a time)."""
    readiness: Readiness = request.app.state.readiness
    return readiness


async def caller(request: Request, x_api_key: Annotated[str | None, Header()] = None) -> Caller:
    """The request's caller; 401 :data:`UNAUTHORIZED` without a known key."""
    keys: KeyRing = request.app.state.keys
    found = find_caller(keys, x_api_key)
    if found is None:
        raise HTTPException(401, UNAUTHORIZED)
    return found


async def end_user(
    x_end_user_id: Annotated[str | None, Header()] = None,
    x_end_user_id_encoding: Annotated[str | None, Header()] = None,
) -> str:
    """The end user of a route that needs one (400 without ``X-End-User-ID``)."""
    return read_end_user(x_end_user_id, x_end_user_id_encoding)


async def optional_end_user(
    x_end_user_id: Annotated[str | None, Header()] = None,
    x_end_user_id_encoding: Annotated[str | None, Header()] = None,
) -> str | None:
    """The end user when the header is sent, else None (the route sees the whole tenant)."""
    if x_end_user_id is None or not x_end_user_id.strip():
        return None
    return read_end_user(x_end_user_id, x_end_user_id_encoding)


Auth = Annotated[Caller, Depends(caller)]
AppStore = Annotated[Store, Depends(app_store)]
AppReadiness = Annotated[Readiness, Depends(app_readiness)]
EndUser = Annotated[str, Depends(end_user)]
OptionalEndUser = Annotated[str | None, Depends(optional_end_user)]


def reads_blocked(store: Store, who: Caller) -> bool:
    """True when a free key is over its limit (reads answer empty); raises
    :class:`QuotaExceeded` (a 429) for an evaluation key."""
    if not store.over_limit(who):
        return False
    if who.plan is not None and who.plan.mode == "evaluation":
        raise QuotaExceeded(store.retry_after())
    return True
