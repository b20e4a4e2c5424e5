"""The reads recall makes, taken faster without changing what they return (issue 34, item 5).

- ``by_ids`` builds records from plain tuples (``MemoryRecord.from_values``): every
  field must equal what ``get`` reads by column name (``from_row``), on every column.
- The SQLite word index asks whether anyone's memory holds a term before walking the
  owner's postings: a term nobody holds, a term only another user holds and a pair held
  only apart must all still find what they found before (nothing), and a held term its
  memories, newest first.
- It then reads the newest matches of anyone, with their owner, and answers from them
  when they are all the user's or fewer than asked; another user's newer matches among
  them send it to the owner's postings: the user's newest matches either way.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest

from memorysync_local._storage.interface import Storage
from memorysync_local._storage.records import NewMemory
from memorysync_local._storage.target import open_storage
from memorysync_local._text.analyzer import query_stems
from shared.postgres import database_for, suite_backend

T, ANA, BO = "local", "ana", "bo"


@pytest.fixture(params=["sqlite", *(["postgres"] if suite_backend() == "postgres" else [])])
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Storage]:
    if request.param == "postgres":
        target, drop = database_for(request)
    else:
        target, drop = str(tmp_path / "reads.db"), (lambda: None)
    opened = open_storage(target)
    try:
        yield opened
    finally:
        opened.close()
        drop()


def _memory(text: str, user: str = ANA, session: str | None = None) -> NewMemory:
    return NewMemory(
        tenant_id=T, user_id=user, text=text, kind="fact", source="test", session_id=session,
        metadata={"k": ["v", 1]}, origin="add", history_id=None, request_id="req_1",
        created_at="2026-01-01T00:00:00.000000Z", said_at="2025-12-31T23:00:00.000000Z",
        attribute="location", speaker="Ana Lee",
    )  # fmt: skip


def test_records_read_by_ids_equal_records_read_by_name(storage: Storage) -> None:
    with storage.write() as s:
        first = s.memories.insert(_memory("Lives in Lisbon", session="s1"))
        second = s.memories.insert(_memory("Likes jazz", session="s1"))
        plain = s.memories.insert(_memory("Plays chess"))
        s.memories.label([first], ["home", "city"], 0.75)
    with storage.read() as s:
        listed = s.memories.by_ids([plain, second, first], tenant_id=T, user_id=ANA)
        named = [s.memories.get(i, T, ANA) for i in (first, second, plain)]
    assert listed == named
    labelled = listed[0]
    assert (labelled.tags, labelled.importance, labelled.position) == (["home", "city"], 0.75, 1)
    assert labelled.metadata == {"k": ["v", 1]}
    # Every field is set from its own column (no two swapped, none left at a default).
    assert {f.name for f in fields(labelled) if getattr(labelled, f.name) is None} == {
        "history_id",
        "valid_until",
        "superseded_by",
    }


def test_the_word_index_finds_the_same_with_its_first_question(storage: Storage) -> None:
    with storage.write() as s:
        lisbon = s.memories.insert(_memory("Lives in Lisbon"))
        s.memories.insert(_memory("Plays the cello", user=BO))
        jazz = s.memories.insert(_memory("Likes jazz in Lisbon"))
        s.memories.insert(_memory("Owns a kayak"))
    [lisbon_stem] = query_stems("Lisbon")
    [cello] = query_stems("cello")
    [kayak] = query_stems("kayak")
    [unheard] = query_stems("zeppelin")
    with storage.read() as s:
        words = s.words
        assert list(words.newest_matching(T, ANA, [lisbon_stem], 10)) == [jazz, lisbon]
        assert list(words.newest_matching(T, ANA, [lisbon_stem], 1)) == [jazz]
        assert words.newest_matching(T, ANA, [unheard], 10) == {}
        assert words.newest_matching(T, ANA, [cello], 10) == {}  # only Bo's memory holds it
        assert words.newest_matching(T, ANA, [lisbon_stem, kayak], 10) == {}  # held apart
        assert len(words.newest_matching(T, BO, [cello], 10)) == 1


def test_the_word_index_finds_the_users_newest_among_other_users_matches(
    storage: Storage,
) -> None:
    with storage.write() as s:
        first = s.memories.insert(_memory("Lives in Lisbon"))
        second = s.memories.insert(_memory("Takes the Lisbon trams"))
        theirs = s.memories.insert(_memory("Visits Lisbon", user=BO))
        third = s.memories.insert(_memory("Knows a Lisbon bakery"))
    [lisbon] = query_stems("Lisbon")
    with storage.read() as s:
        words = s.words
        assert list(words.newest_matching(T, ANA, [lisbon], 1)) == [third]  # all Ana's
        # The two newest matches are Ana's and Bo's: Ana's two newest are still found.
        assert list(words.newest_matching(T, ANA, [lisbon], 2)) == [third, second]
        found = words.newest_matching(T, ANA, [lisbon], 10)  # fewer than asked
        assert list(found) == [third, second, first]
        assert found[third] == words.newest_matching(T, ANA, [lisbon], 1)[third]
        assert list(words.newest_matching(T, BO, [lisbon], 1)) == [theirs]
        assert list(words.newest_matching(T, BO, [lisbon], 10)) == [theirs]
