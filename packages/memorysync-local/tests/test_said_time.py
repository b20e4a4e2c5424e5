"""Both backends read a memory's time by one definition (issue 32 item 8).

A memory's time is its ``said_at``, its ``created_at`` when a row has none (rows older
than schema 7): ``ReadWindow.admits`` in Python and ``records.SAID_TIME_SQL`` in both
backends' SQL. Runs on SQLite, and on PostgreSQL with ``MEMORYSYNC_TEST_BACKEND=postgres``.
"""

from __future__ import annotations

from typing import Any

from memorysync_local._storage.records import NewMemory, ReadWindow
from memorysync_local._storage.target import open_storage
from shared.local_server import execute

SAID = "2024-03-10T09:00:00.000000Z"
CREATED_IN_MAY = "2024-05-02T09:00:00.000000Z"
CREATED_IN_JUNE = "2024-06-02T09:00:00.000000Z"
MAY = ReadWindow(since="2024-05-01T00:00:00.000000Z", until="2024-06-01T00:00:00.000000Z")


def memory(text: str, created_at: str, said_at: str) -> NewMemory:
    return NewMemory(
        "local", "ana", text, "other", None, None, {}, "add", None, None, created_at,
        said_at, None,
    )  # fmt: skip


def test_a_row_without_said_at_is_read_at_its_created_at_on_every_backend(
    local_server: Any,
) -> None:
    storage = open_storage(local_server.db_path)
    try:
        with storage.write() as session:
            kept = session.memories.insert(memory("said in March", CREATED_IN_MAY, SAID))
            old = session.memories.insert(memory("an old row", CREATED_IN_MAY, CREATED_IN_MAY))
            session.memories.insert(memory("an old row of June", CREATED_IN_JUNE, CREATED_IN_JUNE))
        execute(local_server, "UPDATE memories SET said_at = NULL WHERE id != ?", (kept,))
        with storage.read() as session:
            paged, total = session.memories.page("local", "ana", MAY, 10, 0)
            said = session.memories.said_in("local", "ana", MAY.since or "", MAY.until or "", 10)
            every, _ = session.memories.page("local", "ana", ReadWindow(history=True), 10, 0)
    finally:
        storage.close()
    # Said in March though stored in May: out; no said_at, created in May: in.
    assert [m.text for m in paged] == ["an old row"]
    assert total == 1
    assert [line.id for line in said] == [old]
    assert [m.text for m in every if MAY.admits(m)] == ["an old row"]
