"""A datetime for ``occurred_at`` is accepted wherever a turn takes one, as ``since``
takes datetimes (issue 33, item 14). The real ``memorysync-local`` stores the moment."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from memorysync_core import MemorySyncAPI, UserMemory
from shared.local_server import stored_history, stored_turn_receipts

LISBON = dt.timezone(dt.timedelta(hours=1))
SAID = dt.datetime(2025, 6, 1, 10, 0, tzinfo=LISBON)  # 09:00 UTC


def _api(server: Any) -> MemorySyncAPI:
    return MemorySyncAPI(server.api_key, base_url=server.base_url, transport=server.transport)


async def test_add_turn_takes_a_datetime_and_search_finds_it_by_time(local_server: Any) -> None:
    api = _api(local_server)
    memory = UserMemory(api, user_id="dana", session_id="s", surface="docs")
    try:
        await api.add_turn(user_id="dana", text="I love jazz.", occurred_at=SAID)
        await api.add_turn(user_id="dana", text="I love hiking.")
        [receipt, _] = stored_turn_receipts(local_server, local_server.tenant_id, "dana")
        assert receipt["occurred_at"].startswith("2025-06-01T09:00:00")
        until = dt.datetime(2025, 7, 1, tzinfo=dt.timezone.utc)
        old = await memory.search("What do I love?", until=until)
        assert [m.text for m in old] == ["Loves jazz"]
    finally:
        await memory.aclose()


async def test_append_history_takes_a_datetime_per_turn(local_server: Any) -> None:
    api = _api(local_server)
    try:
        turns = [{"role": "user", "content": "I live in Lisbon.", "occurred_at": SAID}]
        await api.append_history(user_id="dana", session_id="s", turns=turns)
        [row] = stored_history(local_server, local_server.tenant_id, "dana", "s")
        assert row["occurred_at"].startswith("2025-06-01T09:00:00")
    finally:
        await api.aclose()


async def test_a_datetime_without_a_time_zone_is_refused_naming_the_field(
    local_server: Any,
) -> None:
    api = _api(local_server)
    try:
        with pytest.raises(ValueError, match="occurred_at must carry a time zone"):
            await api.add_turn(
                user_id="dana", text="I love jazz.", occurred_at=dt.datetime(2025, 6, 1)
            )
        with pytest.raises(ValueError, match="occurred_at must be a datetime or an ISO"):
            await api.add_turn(user_id="dana", text="I love jazz.", occurred_at=1748768400)  # type: ignore[arg-type]
    finally:
        await api.aclose()
