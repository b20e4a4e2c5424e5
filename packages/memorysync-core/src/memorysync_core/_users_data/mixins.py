"""The users'-data methods an adapter gains by inheriting one mixin.

Each mixin names only what it calls (a :class:`typing.Protocol`), so this module
imports neither ``UserMemory`` nor ``SyncUserMemory``: they depend on it, not it on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from .reports import ForgetReport, ImportReport, MemoryPage


class UsersData(Protocol):
    """The five async users'-data methods (``UserMemory`` has them)."""

    async def list_memories(self, *, limit: int = 100, offset: int = 0) -> MemoryPage: ...

    async def list_sessions(self) -> list[dict[str, Any]]: ...

    async def export(self) -> dict[str, Any]: ...

    async def forget_user(self) -> ForgetReport: ...

    async def import_export(self, data: Mapping[str, Any]) -> ImportReport: ...


class SyncUsersData(Protocol):
    """The one call the synchronous mixin makes (``SyncUserMemory`` has it)."""

    def users_data(self, method: str, *args: Any, **kwargs: Any) -> Any: ...


class UsersDataMethods:
    """``list_memories``, ``list_sessions``, ``export``, ``forget_user`` and
    ``import_export`` for an async adapter, each delegating to the core's
    :class:`UserMemory` of the adapter's user (its default session).

    The adapter implements :meth:`_users_data_memory`, delivering its captured turns
    first so that an export sees them and an erase leaves none behind.
    """

    async def _users_data_memory(self) -> UsersData:
        raise NotImplementedError

    async def list_memories(self, *, limit: int = 100, offset: int = 0) -> MemoryPage:
        """One page of the user's memories (every session), newest first."""
        return await (await self._users_data_memory()).list_memories(limit=limit, offset=offset)

    async def list_sessions(self) -> list[dict[str, Any]]:
        """The user's sessions; ``UnsupportedError`` on a server that cannot list them."""
        return await (await self._users_data_memory()).list_sessions()

    async def export(self) -> dict[str, Any]:
        """Every fact and transcript turn of the user (JSON-serialisable, with a schema)."""
        return await (await self._users_data_memory()).export()

    async def forget_user(self) -> ForgetReport:
        """Erase every fact and transcript of the user in every session; idempotent."""
        return await (await self._users_data_memory()).forget_user()

    async def import_export(self, data: Mapping[str, Any]) -> ImportReport:
        """Write an ``export()`` for this user (idempotent by each item's id and content)."""
        return await (await self._users_data_memory()).import_export(data)


class SyncUsersDataMethods:
    """The same five methods, synchronous, for an adapter holding a ``SyncUserMemory``
    as ``self._memory`` (captured turns are flushed first)."""

    _memory: SyncUsersData

    def list_memories(self, *, limit: int = 100, offset: int = 0) -> MemoryPage:
        """One page of the user's memories (every session), newest first."""
        page: MemoryPage = self._memory.users_data("list_memories", limit=limit, offset=offset)
        return page

    def list_sessions(self) -> list[dict[str, Any]]:
        """The user's sessions; ``UnsupportedError`` on a server that cannot list them."""
        sessions: list[dict[str, Any]] = self._memory.users_data("list_sessions")
        return sessions

    def export(self) -> dict[str, Any]:
        """Every fact and transcript turn of the user (JSON-serialisable, with a schema)."""
        data: dict[str, Any] = self._memory.users_data("export")
        return data

    def forget_user(self) -> ForgetReport:
        """Erase every fact and transcript of the user in every session; idempotent."""
        report: ForgetReport = self._memory.users_data("forget_user")
        return report

    def import_export(self, data: Mapping[str, Any]) -> ImportReport:
        """Write an ``export()`` for this user (idempotent by each item's id and content)."""
        report: ImportReport = self._memory.users_data("import_export", data)
        return report
