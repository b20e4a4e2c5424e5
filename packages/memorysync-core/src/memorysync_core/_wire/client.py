"""``MemorySyncAPI``: one async method per route of the MemorySync HTTP contract."""

from __future__ import annotations

import asyncio
import logging
import math
import weakref
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

from .. import _telemetry as telemetry
from .._errors import (
    APIConnectionError,
    APIStatusError,
    AuthError,
    MemorySyncError,
    RateLimitError,
    ResponseFormatError,
    ServerError,
    UnsupportedUserIdError,
)
from .._recall.window import Moment, TimeWindow, iso_moment
from .._version import __version__
from . import end_user as _end_user
from . import transport as _transport
from .config import resolve_api_key, resolve_base_url, resolve_project_id
from .deadline import retrieve_error
from .log_scrub import guard_key
from .operation import operation, with_operation

_logger = logging.getLogger("memorysync.client")

FORGET_BATCH = 100
MAX_HISTORY_TURNS = 100
MAX_CLIENT_REF = 128


def memory_id_to_int(value: object) -> int:
    """``12`` or ``"m_12"`` (or ``"12"``) -> ``12``; anything else is a ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"memory id must be an int or 'm_<int>', got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        text = value.strip()
        digits = text[2:] if text.startswith("m_") else text
        if digits.isdigit():
            return int(digits)
    raise ValueError(f"memory id must be an int or 'm_<int>', got {value!r}")


def _require_text(name: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a non-empty string, got {value!r}")
    return value


def _require_k(name: str, value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def _put(body: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """Add the optional fields that are not None (the contract omits absent fields)."""
    for name, value in fields.items():
        if value is not None:
            body[name] = value
    return body


def _expect_dict(body: Any, *, method: str, route: str) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise ResponseFormatError(
            f"{method} {route} -> 200: expected a JSON object, got {type(body).__name__}",
            route=route,
        )
    return body


class _Lease:
    """This instance's reference to the shared client of one event loop."""

    __slots__ = ("client", "loop_ref")

    def __init__(self, loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient) -> None:
        self.loop_ref = weakref.ref(loop)
        self.client = client


class MemorySyncAPI:
    """Async client of the MemorySync HTTP API (hosted service or ``memorysync-local``).

    Construction is cheap and makes no request. Instances on the same event loop with
    the same base URL, key and transport share one ``httpx.AsyncClient``.

    Example:
        ```python
        import asyncio
        from memorysync_core import MemorySyncAPI

        async def main() -> None:
            async with MemorySyncAPI("ms_...", base_url="http://127.0.0.1:8000") as api:
                await api.add_memory(user_id="alice", text="Alice is vegetarian.")
                answer = await api.recall(user_id="alice", prompt="What should I cook?")
                print(answer["context"])

        asyncio.run(main())
        ```
    """

    def __init__(
        self,
        api_key: str | None = None,
        *,
        base_url: str | None = None,
        project_id: str | None = None,
        tenant_id: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = 10.0,
        source: str = "memorysync-core",
    ) -> None:
        self._api_key = resolve_api_key(api_key)
        guard_key(self._api_key)
        self._base_url = resolve_base_url(base_url)
        self._project_id = resolve_project_id(project_id)
        if tenant_id is not None:
            _require_text("tenant_id", tenant_id)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
            raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
        if not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")
        _require_text("source", source)
        if transport is not None and not isinstance(transport, httpx.AsyncBaseTransport):
            raise TypeError(
                f"transport must be an httpx.AsyncBaseTransport, got {type(transport).__name__}"
            )
        self._tenant_id: str | None = tenant_id
        self._transport = transport
        self._timeout = float(timeout)
        self._source = source
        self._leases: dict[int, _Lease] = {}
        self._tenant_task: asyncio.Task[str] | None = None
        # Whether the server decodes encoded X-End-User-ID values; None until asked.
        self._decodes_user_ids: bool | None = None
        self._closed = False

    # ----------------------------------------------------------------- attributes

    @property
    def base_url(self) -> str:
        """The server's base URL, without a trailing slash."""
        return self._base_url

    @property
    def project_id(self) -> str | None:
        """The pinned project (sent as ``X-Project-ID``), or None."""
        return self._project_id

    @property
    def source(self) -> str:
        """The default ``source`` of writes (the integration's name)."""
        return self._source

    @property
    def timeout(self) -> float:
        """The per-request timeout of explicit calls, in seconds."""
        return self._timeout

    @property
    def tenant_id(self) -> str | None:
        """The tenant, once resolved (or given); None before the first resolution."""
        return self._tenant_id

    def __repr__(self) -> str:
        return (
            f"MemorySyncAPI(base_url={self._base_url!r}, project_id={self._project_id!r}, "
            f"source={self._source!r})"
        )

    # ----------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> MemorySyncAPI:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Drop this instance's reference to the shared client; the last one closes it.

        Idempotent. The instance can still be used afterwards (it takes a new reference).
        """
        leases, self._leases = self._leases, {}
        current: asyncio.AbstractEventLoop | None
        try:
            current = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        for lease in leases.values():
            loop = lease.loop_ref()
            if loop is None:
                continue
            last = _transport.release_client(
                loop, self._base_url, self._api_key, self._transport, lease.client
            )
            if last is None:
                continue
            if loop is current:
                await last.aclose()
            elif not loop.is_closed():
                # A client belongs to its loop: close it there.
                loop.call_soon_threadsafe(_close_on_loop, loop, last)

    def _client(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        lease = self._leases.get(id(loop))
        if lease is not None and lease.loop_ref() is loop and not lease.client.is_closed:
            return lease.client
        client = _transport.acquire_client(loop, self._base_url, self._api_key, self._transport)
        self._leases[id(loop)] = _Lease(loop, client)
        return client

    # ----------------------------------------------------------------- plumbing

    def _headers(self) -> dict[str, str]:
        headers = {
            "X-API-Key": self._api_key,
            "Accept": "application/json",
            "User-Agent": f"memorysync-core/{__version__} (+{self._source})",
        }
        if self._project_id is not None:
            headers["X-Project-ID"] = self._project_id
        return headers

    async def _end_user_headers(self, user_id: str) -> dict[str, str]:
        """``X-End-User-ID`` for ``user_id``: as it is, or encoded for a server that decodes."""
        if _end_user.travels_raw(user_id):
            return {_end_user.HEADER: user_id}
        if not await self._server_decodes_user_ids():
            shown = user_id if len(user_id) <= 80 else user_id[:80] + "..."
            raise UnsupportedUserIdError(
                f"user_id {shown!r} cannot be sent to {self._base_url}: the X-End-User-ID "
                "header carries printable ASCII without leading or trailing spaces, and "
                f"this server does not list the '{_end_user.CAPABILITY}' capability "
                "(GET /health) that lets other ids travel encoded. Nothing was sent. Use "
                "an ASCII user id with this server, or a server that decodes the header "
                "(memorysync-local does)"
            )
        return {
            _end_user.HEADER: _end_user.encode(user_id),
            _end_user.ENCODING_HEADER: _end_user.ENCODING,
        }

    async def _server_decodes_user_ids(self) -> bool:
        """True when ``GET /health`` lists the header encoding (asked once, then cached)."""
        if self._decodes_user_ids is None:
            try:
                body = await self._request("GET", "/health")
            except (ServerError, RateLimitError):
                raise  # passing: ask again on the next call
            except (APIStatusError, ResponseFormatError):
                body = None  # no /health, or not JSON: a server without the capability
            capabilities = body.get("capabilities") if isinstance(body, dict) else None
            self._decodes_user_ids = (
                isinstance(capabilities, list) and _end_user.CAPABILITY in capabilities
            )
        return self._decodes_user_ids

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        end_user: str | None = None,
        timeout: float | None = None,
        route: str | None = None,
    ) -> Any:
        """Send one request and return its JSON body; every failure is a typed error.

        ``route`` is the path template used in messages (defaults to ``path``).
        """
        route = route or path
        headers = self._headers()
        if end_user is not None:
            headers.update(await self._end_user_headers(end_user))
        _logger.debug("%s %s", method, route)
        try:
            return await _transport.send(
                self._client(),
                method,
                self._base_url + path,
                route=route,
                headers=headers,
                secret=self._api_key,
                json=json,
                params=params,
                timeout=self._timeout if timeout is None else timeout,
            )
        except APIConnectionError as exc:
            # Say what did not happen, and where: the route alone may be an internal one.
            raise with_operation(exc, _transport.scrub(self._base_url, self._api_key)) from (
                exc.__cause__
            )

    async def _post(self, route: str, body: dict[str, Any]) -> dict[str, Any]:
        """``POST route`` with ``body``; the JSON object it answers."""
        answer = await self._request("POST", route, json=body)
        return _expect_dict(answer, method="POST", route=route)

    # ----------------------------------------------------------------- tenant

    @operation("resolve the tenant")
    async def resolve_tenant_id(self) -> str:
        """The tenant of this key: cached, single-flight, ``"default"`` on 401/403.

        Concurrent first calls share one ``GET /org/projects``; a cancelled caller does
        not cancel it. Other failures are raised and not cached.
        """
        if self._tenant_id is not None:
            return self._tenant_id
        loop = asyncio.get_running_loop()
        task = self._tenant_task
        if task is None or task.get_loop() is not loop or (task.done() and _failed(task)):
            task = loop.create_task(self._fetch_tenant())
            task.add_done_callback(retrieve_error)
            self._tenant_task = task
        try:
            tenant = await asyncio.shield(task)
        except MemorySyncError:
            if self._tenant_task is task:
                self._tenant_task = None
            raise
        self._tenant_id = tenant
        return tenant

    async def _fetch_tenant(self) -> str:
        with telemetry.span("memorysync.tenant", {"memorysync.surface": self._source}):
            return await self._fetch_tenant_id()

    async def _fetch_tenant_id(self) -> str:
        try:
            body = await self._request("GET", "/org/projects")
        except AuthError as exc:
            _logger.info(
                "this key cannot list projects (%s): using the 'default' tenant", exc.status_code
            )
            return "default"
        projects = body.get("projects", body.get("items")) if isinstance(body, dict) else body
        if isinstance(projects, list):
            for project in projects:
                if isinstance(project, dict):
                    tenant = project.get("tenant_id")
                    if isinstance(tenant, str) and tenant:
                        if self._tenant_id is None:
                            self._tenant_id = tenant
                        return tenant
        raise ResponseFormatError(
            "GET /org/projects -> 200: expected a list of projects with a tenant_id",
            route="/org/projects",
        )

    @operation("warm up")
    async def warm_up(self) -> None:
        """Resolve the tenant and open the connection, off the hot path. Never raises."""
        try:
            self._client()
            await self.resolve_tenant_id()
        except MemorySyncError as exc:
            _logger.warning("warm-up failed: %s", exc.message)
        except Exception as exc:
            _logger.warning("warm-up failed: %s", type(exc).__name__)

    # ----------------------------------------------------------------- v1 memory

    @operation("add a turn")
    async def add_turn(
        self,
        *,
        user_id: str,
        text: str,
        role: str | None = None,
        speaker: str | None = None,
        occurred_at: Moment | None = None,
        metadata: Mapping[str, Any] | None = None,
        source: str | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/memory/add_turn``: one turn to fact extraction.

        ``occurred_at``: a datetime with a time zone, or ISO 8601 text.
        """
        _require_text("user_id", user_id)
        _require_text("text", text)
        if role is not None and role not in ("user", "assistant", "system", "tool"):
            raise ValueError(f"role must be user, assistant, system or tool, got {role!r}")
        tenant = await self.resolve_tenant_id()
        body = _put(
            {
                "tenant_id": tenant,
                "user_id": user_id,
                "text": text,
                "source": source or self._source,
            },
            role=role,
            speaker=speaker,
            occurred_at=None if occurred_at is None else iso_moment("occurred_at", occurred_at),
            metadata=dict(metadata) if metadata is not None else None,
        )
        return await self._post("/v1/memory/add_turn", body)

    @operation("recall")
    async def recall(
        self,
        *,
        user_id: str,
        prompt: str,
        k: int | None = None,
        types: Sequence[str] | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/memory/recall``: ``{"context": str, "memories": [...]}``.

        ``since`` / ``until`` (a time-zone-aware datetime or ISO 8601 string) ask for the
        memories said in that window; an extension, sent only when set.
        """
        return await self._prompted(
            "/v1/memory/recall", user_id, prompt, k=k, types=types, since=since, until=until
        )

    @operation("search memories")
    async def query(
        self,
        *,
        user_id: str,
        prompt: str,
        k: int | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/memory/query``: plain semantic search, ``{"memories": [...]}``;
        ``since`` / ``until`` as for :meth:`recall`."""
        return await self._prompted(
            "/v1/memory/query", user_id, prompt, k=k, since=since, until=until
        )

    async def _prompted(
        self,
        route: str,
        user_id: str,
        prompt: str,
        *,
        k: int | None,
        since: Moment | None,
        until: Moment | None,
        types: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """``recall`` and ``query``: the same checks and body (``types`` for recall only)."""
        _require_text("user_id", user_id)
        _require_text("prompt", prompt)
        _require_k("k", k)
        window = TimeWindow.of(since, until)
        tenant = await self.resolve_tenant_id()
        body = _put(
            {"tenant_id": tenant, "user_id": user_id, "prompt": prompt, **window.fields()},
            k=k,
            types=list(types) if types is not None else None,
        )
        return await self._post(route, body)

    @operation("list memories")
    async def list_memories(
        self, *, user_id: str, page_size: int = 500, history: bool = False
    ) -> list[dict[str, Any]]:
        """Every memory of ``user_id``, newest first, paging ``limit``/``offset`` to the end.

        ``history=True`` asks for superseded memories too (``?history=true``, an
        extension a server without it ignores: it lists every memory anyway).
        """
        _require_text("user_id", user_id)
        _require_k("page_size", page_size)
        tenant = await self.resolve_tenant_id()
        route = "/v1/memory/{tenant_id}/{user_id}/list"
        path = f"/v1/memory/{_segment(tenant)}/{_segment(user_id)}/list"
        memories: list[dict[str, Any]] = []
        offset = 0
        while True:
            params: dict[str, Any] = {"limit": page_size, "offset": offset}
            if history:
                params["history"] = "true"
            answer = await self._request("GET", path, params=params, route=route)
            page = _expect_dict(answer, method="GET", route=route).get("memories")
            if not isinstance(page, list):
                raise ResponseFormatError(
                    f"GET {route} -> 200: 'memories' is not a list", route=route
                )
            memories.extend(item for item in page if isinstance(item, dict))
            offset += len(page)
            total = answer.get("total")
            if len(page) < page_size or (isinstance(total, int) and offset >= total):
                return memories

    @operation("read a memory's status")
    async def memory_status(self, memory_id: int | str) -> dict[str, Any]:
        """``GET /v1/memory/status/{memory_id}``: ``{"memory_id", "status"}``."""
        number = memory_id_to_int(memory_id)
        route = "/v1/memory/status/{memory_id}"
        answer = await self._request("GET", f"/v1/memory/status/{number}", route=route)
        return _expect_dict(answer, method="GET", route=route)

    # ----------------------------------------------------------------- /memory (end user)

    @operation("forget memories")
    async def forget(
        self,
        *,
        user_id: str,
        memory_ids: Sequence[int | str] | None = None,
        filters: Mapping[str, Any] | None = None,
        reason: str | None = None,
        dry_run: bool | None = None,
    ) -> list[int]:
        """``DELETE /memory/forget`` by ids (batches of 100) or by filters; the deleted ids."""
        _require_text("user_id", user_id)
        if (memory_ids is None) == (filters is None):
            raise ValueError("forget() takes exactly one of memory_ids or filters")
        if filters is not None:
            if not isinstance(filters, Mapping) or not filters:
                raise ValueError(f"filters must be a non-empty mapping, got {filters!r}")
            body = _put({"filters": dict(filters)}, reason=reason, dry_run=dry_run)
            return await self._forget_call(user_id, body)
        assert memory_ids is not None
        if isinstance(memory_ids, (str, bytes)):
            raise TypeError("memory_ids must be a sequence of ids, not a string")
        if dry_run is not None:
            raise ValueError("dry_run applies to filters only")
        ids = [memory_id_to_int(value) for value in memory_ids]
        deleted: list[int] = []
        for start in range(0, len(ids), FORGET_BATCH):
            batch = ids[start : start + FORGET_BATCH]
            deleted.extend(
                await self._forget_call(user_id, _put({"memory_ids": batch}, reason=reason))
            )
        return deleted

    async def _forget_call(self, user_id: str, body: dict[str, Any]) -> list[int]:
        answer = await self._request("DELETE", "/memory/forget", json=body, end_user=user_id)
        if isinstance(answer, dict):  # tolerate {"deleted_ids": [...]} wrappers
            answer = answer.get("deleted_ids", answer.get("memory_ids"))
        if not isinstance(answer, list):
            raise ResponseFormatError(
                "DELETE /memory/forget -> 200: expected a list of ids", route="/memory/forget"
            )
        try:
            return [memory_id_to_int(value) for value in answer]
        except ValueError as exc:
            raise ResponseFormatError(
                "DELETE /memory/forget -> 200: the list holds a non-id", route="/memory/forget"
            ) from exc

    @operation("add a memory")
    async def add_memory(
        self,
        *,
        user_id: str,
        text: str,
        source: str | None = None,
        tags: Sequence[str] | None = None,
        importance: float | None = None,
        session_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        client_ref: str | None = None,
        verbatim: bool = False,
    ) -> dict[str, Any]:
        """``POST /memory/add``: a memory object, or ``{"status": "skipped", ...}``.

        ``verbatim=True`` asks the server to store ``text`` as one memory exactly as
        given, without extraction (a memorysync-local extension, see
        docs/wire-protocol.md; sent only when true, so other requests are unchanged)."""
        _require_text("user_id", user_id)
        _require_text("text", text)
        if not isinstance(verbatim, bool):
            raise ValueError(f"verbatim must be True or False, got {verbatim!r}")
        if client_ref is not None and (not isinstance(client_ref, str) or not client_ref):
            raise ValueError(f"client_ref must be a non-empty string, got {client_ref!r}")
        if client_ref is not None and len(client_ref) > MAX_CLIENT_REF:
            raise ValueError(
                f"client_ref must be at most {MAX_CLIENT_REF} characters, got {len(client_ref)}"
            )
        body = _put(
            {"text": text, "source": source or self._source},
            tags=list(tags) if tags is not None else None,
            importance=importance,
            session_id=session_id,
            metadata=dict(metadata) if metadata is not None else None,
            client_ref=client_ref,
            verbatim=True if verbatim else None,
        )
        answer = await self._request("POST", "/memory/add", json=body, end_user=user_id)
        return _expect_dict(answer, method="POST", route="/memory/add")

    # ----------------------------------------------------------------- history

    @operation("append to the history")
    async def append_history(
        self,
        *,
        user_id: str,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        source: str | None = None,
        extract: bool = True,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``POST /v1/history/append``: 1 to 100 transcript turns.

        A turn's ``occurred_at`` may be a datetime with a time zone, or ISO 8601 text.
        """
        _require_text("user_id", user_id)
        _require_text("session_id", session_id)
        items = [dict(turn) for turn in turns]
        for item in items:
            if item.get("occurred_at") is not None:
                item["occurred_at"] = iso_moment("occurred_at", item["occurred_at"])
        if not 1 <= len(items) <= MAX_HISTORY_TURNS:
            raise ValueError(f"turns must hold 1 to {MAX_HISTORY_TURNS} items, got {len(items)}")
        tenant = await self.resolve_tenant_id()
        body = _put(
            {
                "tenant_id": tenant,
                "user_id": user_id,
                "session_id": session_id,
                "source": source or self._source,
                "turns": items,
                "extract": extract,
            },
            metadata=dict(metadata) if metadata is not None else None,
        )
        return await self._post("/v1/history/append", body)

    @operation("list the history")
    async def list_history(
        self, *, user_id: str, session_id: str, source: str | None = None, limit: int = 0
    ) -> dict[str, Any]:
        """``POST /v1/history/list``: ``{"items": [...], "total": n}``, oldest first."""
        _require_text("user_id", user_id)
        _require_text("session_id", session_id)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= 5000:
            raise ValueError(f"limit must be an integer from 0 (all) to 5000, got {limit!r}")
        tenant = await self.resolve_tenant_id()
        body = _put(
            {"tenant_id": tenant, "user_id": user_id, "session_id": session_id},
            source=source,
        )
        body["limit"] = limit
        return await self._post("/v1/history/list", body)

    @operation("delete history")
    async def delete_history(
        self,
        *,
        user_id: str,
        session_id: str | None = None,
        ids: Sequence[str] | None = None,
        source: str | None = None,
        delete_derived_facts: bool = False,
    ) -> dict[str, Any]:
        """``POST /v1/history/delete`` by session or by turn ids."""
        _require_text("user_id", user_id)
        if (session_id is None) == (ids is None):
            raise ValueError("delete_history() takes exactly one of session_id or ids")
        if session_id is not None:
            _require_text("session_id", session_id)
        if isinstance(ids, (str, bytes)):
            raise TypeError("ids must be a sequence of turn ids, not a string")
        tenant = await self.resolve_tenant_id()
        body = _put(
            {"tenant_id": tenant, "user_id": user_id},
            session_id=session_id,
            ids=list(ids) if ids is not None else None,
            source=source,
        )
        body["delete_derived_facts"] = delete_derived_facts
        return await self._post("/v1/history/delete", body)


def _close_on_loop(loop: asyncio.AbstractEventLoop, client: httpx.AsyncClient) -> None:
    loop.create_task(client.aclose())


def _failed(task: asyncio.Task[str]) -> bool:
    return task.cancelled() or task.exception() is not None


def _segment(value: str) -> str:
    """``value`` as one path segment; ``.`` and ``..`` escaped too (URLs drop them)."""
    quoted = quote(value, safe="")
    return quoted.replace(".", "%2E") if quoted in {".", ".."} else quoted
