"""The storage contract: what every backend of ``_storage/interface.py`` must do.

Each test speaks to the ``Storage`` Protocol only, and runs on every backend: SQLite,
PostgreSQL (with ``MEMORYSYNC_TEST_BACKEND=postgres``, on the test kit's server) and
:class:`ThirdStorage`, a third backend declaring no optional feature. A new backend's
author adds it to :func:`storage` and reads here what to implement; what is optional
is what ``StorageFeatures`` declares (``test_optional_features_are_declared``).

Export and import are not the backends' (the service reads and writes them through
these same calls), so they are not here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import numpy as np
import pytest

from memorysync_local._storage.interface import (
    IdempotencySeeds,
    JobQueue,
    MemoryTable,
    QuotaLedger,
    Session,
    Storage,
    TranscriptTable,
    UsersData,
    VectorStore,
    WordIndex,
)
from memorysync_local._storage.records import (
    MemorySelection,
    NewMemory,
    NewTurn,
    ReadWindow,
    StorageFeatures,
    TurnSelection,
    VectorCounters,
)
from memorysync_local._storage.target import open_storage
from memorysync_local._text.analyzer import query_stems
from shared.postgres import database_for, suite_backend

T, ANA, BO = "local", "ana", "bo"
MODEL = "contract-model"


# --- the third backend --------------------------------------------------------


class ThirdVectors:
    """A ``VectorStore`` that does the required part and declines the optional one."""

    def __init__(self, inner: VectorStore) -> None:
        self._inner = inner

    def put(self, model: str, vectors: Sequence[tuple[int, bytes]]) -> None:
        self._inner.put(model, vectors)

    def missing_count(self, model: str) -> int:
        return self._inner.missing_count(model)

    def missing(self, model: str, after_id: int, limit: int) -> list[tuple[int, str]]:
        return self._inner.missing(model, after_id, limit)

    def counters(self, tenant_id: str, user_id: str) -> VectorCounters:
        return self._inner.counters(tenant_id, user_id)

    def added_since(
        self, tenant_id: str, user_id: str, after_id: int
    ) -> list[tuple[int, str, bytes]]:
        return self._inner.added_since(tenant_id, user_id, after_id)

    def of_user(self, tenant_id: str, user_id: str, model: str) -> list[tuple[int, bytes]]:
        return self._inner.of_user(tenant_id, user_id, model)

    def nearest_in_database(
        self, tenant_id: str, user_id: str, model: str, probe: bytes, limit: int
    ) -> list[tuple[int, float]] | None:
        return None  # optional: without vector_search_in_database, recall ranks in memory


class ThirdSession:
    """A session of the third backend: its own vectors, the other parts delegated."""

    def __init__(self, inner: Session) -> None:
        self._inner = inner
        self._vectors = ThirdVectors(inner.vectors)

    @property
    def memories(self) -> MemoryTable:
        return self._inner.memories

    @property
    def transcript(self) -> TranscriptTable:
        return self._inner.transcript

    @property
    def seeds(self) -> IdempotencySeeds:
        return self._inner.seeds

    @property
    def jobs(self) -> JobQueue:
        return self._inner.jobs

    @property
    def quota(self) -> QuotaLedger:
        return self._inner.quota

    @property
    def users(self) -> UsersData:
        return self._inner.users

    @property
    def words(self) -> WordIndex:
        return self._inner.words

    @property
    def vectors(self) -> VectorStore:
        return self._vectors


class ThirdStorage:
    """A third backend (here over a SQLite file): nothing optional declared."""

    def __init__(self, inner: Storage) -> None:
        self._inner = inner

    @property
    def target(self) -> str:
        return f"third:{self._inner.target}"

    @property
    def closed(self) -> bool:
        return self._inner.closed

    @property
    def features(self) -> StorageFeatures:
        return StorageFeatures()

    def watch_jobs(self, wake: Callable[[], None]) -> None:
        """Optional (``job_notifications``): nothing to watch; jobs are found at start."""

    @contextmanager
    def _session(self, inner: AbstractContextManager[Session]) -> Iterator[Session]:
        with inner as session:
            yield ThirdSession(session)

    def read(self) -> AbstractContextManager[Session]:
        return self._session(self._inner.read())

    def write(self) -> AbstractContextManager[Session]:
        return self._session(self._inner.write())

    def created_at(self) -> str:
        return self._inner.created_at()

    def close(self) -> None:
        self._inner.close()


_third: type[Storage] = ThirdStorage  # mypy checks it implements the Protocol

BACKENDS = ["sqlite", "third", *(["postgres"] if suite_backend() == "postgres" else [])]


@pytest.fixture(params=BACKENDS)
def storage(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[Storage]:
    drop: Callable[[], None] = lambda: None  # noqa: E731
    if request.param == "postgres":
        target, drop = database_for(request)
    else:
        target = str(tmp_path / "contract.db")
    opened = open_storage(target)
    storage = ThirdStorage(opened) if request.param == "third" else opened
    try:
        yield storage
    finally:
        storage.close()
        drop()


# --- helpers ------------------------------------------------------------------


def at(second: int) -> str:
    """A canonical timestamp, ``second`` seconds into 2026."""
    return f"2026-01-01T00:{second // 60:02d}:{second % 60:02d}.000000Z"


def memory(
    text: str,
    *,
    user: str = ANA,
    second: int = 0,
    session: str | None = None,
    attribute: str | None = None,
    history_id: int | None = None,
) -> NewMemory:
    return NewMemory(
        tenant_id=T, user_id=user, text=text, kind="other", source="contract",
        session_id=session, metadata={"k": "v"}, origin="add_turn", history_id=history_id,
        request_id="req_1", created_at=at(second), said_at=at(second), attribute=attribute,
    )  # fmt: skip


def turn(content: str, *, key: str | None = None, seq: int | None = None, sort: int = 0) -> NewTurn:
    return NewTurn(
        tenant_id=T, user_id=ANA, session_id="s1", source="contract", role="user",
        content=content, content_hash=f"h-{content}", seq=seq, occurred_at=None,
        payload={"name": "Ana"}, idempotency_key=key, created_at=at(sort), sort_key=sort,
    )  # fmt: skip


def insert(storage: Storage, *memories: NewMemory) -> list[int]:
    with storage.write() as s:
        return [s.memories.insert(m) for m in memories]


def unit(*values: float) -> bytes:
    vector = np.array(values, dtype=np.float32)
    unit_length: bytes = (vector / np.linalg.norm(vector)).astype(np.float32).tobytes()
    return unit_length


# --- the storage itself -------------------------------------------------------


def test_a_storage_says_what_it_is_and_closes_once(storage: Storage) -> None:
    assert isinstance(storage.features, StorageFeatures)
    assert storage.target
    assert storage.created_at() == storage.created_at()
    states = [storage.closed]
    storage.close()
    storage.close()
    states.append(storage.closed)
    assert states == [False, True]
    with pytest.raises(RuntimeError), storage.read():
        pass


def test_a_write_that_raises_stores_nothing(storage: Storage) -> None:
    def store_then_fail() -> None:
        with storage.write() as s:
            s.memories.insert(memory("Lives in Lisbon"))
            raise ZeroDivisionError

    with pytest.raises(ZeroDivisionError):
        store_then_fail()
    with storage.read() as s:
        assert s.memories.count(T) == 0


def test_optional_features_are_declared(storage: Storage) -> None:
    """What a backend may leave out: database vector search, job notifications."""
    [memory_id] = insert(storage, memory("Lives in Lisbon"))
    with storage.write() as s:
        s.vectors.put(MODEL, [(memory_id, unit(1, 0, 0, 0))])
    with storage.read() as s:
        found = s.vectors.nearest_in_database(T, ANA, MODEL, unit(1, 0, 0, 0), 5)
    if storage.features.vector_search_in_database:
        assert found is not None
        assert [i for i, _ in found] == [memory_id]
    else:
        assert found is None
    storage.watch_jobs(lambda: None)  # callable whatever the features; may do nothing


# --- memories -----------------------------------------------------------------


def test_memories_get_increasing_ids_and_read_back_as_stored(storage: Storage) -> None:
    first, second = insert(storage, memory("Lives in Lisbon"), memory("Likes jazz", second=1))
    assert 0 < first < second
    with storage.read() as s:
        got = s.memories.get(first, T, ANA)
        assert got is not None
        assert (got.text, got.metadata, got.valid_until) == ("Lives in Lisbon", {"k": "v"}, None)
        assert s.memories.get(first, "other-tenant") is None
        assert s.memories.get(first, T, BO) is None
        assert [m.id for m in s.memories.by_ids([second, 10**9, first])] == [first, second]
        assert s.memories.count(T) == 2
        assert s.memories.newest_ids(T, ANA, 1) == [second]


def test_one_users_reads_never_show_another_users_memories(storage: Storage) -> None:
    [mine] = insert(storage, memory("Lives in Lisbon"))
    insert(storage, memory("Lives in Lisbon", user=BO))
    with storage.read() as s:
        assert [m.id for m in s.memories.in_order(T, ANA)] == [mine]
        page, total = s.memories.page(T, ANA, ReadWindow(), 0, 0)
        assert ([m.id for m in page], total) == ([mine], 1)
        assert list(s.words.newest_matching(T, ANA, query_stems("Lisbon"), 10)) == [mine]
        assert s.memories.by_ids([mine + 1], tenant_id=T, user_id=ANA) == []


def test_a_sessions_memories_take_positions_in_order(storage: Storage) -> None:
    ids = insert(
        storage,
        memory("Lives in Lisbon", session="s1"),
        memory("Likes jazz", session="s1", second=1),
        memory("Has a cat", second=2),
    )
    with storage.read() as s:
        lines = s.memories.lines(ids, T, ANA)
        assert [(line.session_id, line.position) for line in lines] == [
            ("s1", 1),
            ("s1", 2),
            (None, None),
        ]
        [neighbour] = s.memories.at_positions(T, ANA, [("s1", 2)])
        assert neighbour.id == ids[1]
        assert s.memories.texts_in_session(T, ANA, "s1") == [
            (ids[0], "Lives in Lisbon"),
            (ids[1], "Likes jazz"),
        ]


def test_a_superseded_memory_leaves_the_current_window_not_the_history(
    storage: Storage,
) -> None:
    old, new = insert(
        storage,
        memory("Lives in Lisbon", attribute="residence"),
        memory("Lives in Porto", attribute="residence", second=5),
    )
    with storage.read() as s:
        assert s.memories.current_on_attribute(T, ANA, "residence", besides=new) == [old]
        assert s.memories.said_later_on_attribute(
            T, ANA, "residence", besides=old, said_after=at(0)
        ) == (new, at(5))
    with storage.write() as s:
        s.memories.close([old], at(5), new)
    with storage.read() as s:
        current, total = s.memories.page(T, ANA, ReadWindow(), 0, 0)
        assert ([m.id for m in current], total) == ([new], 1)
        everything, _ = s.memories.page(T, ANA, ReadWindow(history=True), 0, 0)
        assert [m.id for m in everything] == [new, old]  # newest first
        closed = s.memories.get(old, T, ANA)
        assert closed is not None
        assert (closed.valid_until, closed.superseded_by) == (at(5), new)
        assert [m.id for m in s.memories.latest_said_current(T, ANA, 10)] == [new]
        assert s.memories.current_on_attribute(T, ANA, "residence", besides=new) == []


def test_stamps_are_the_users_texts_and_times_by_id_what_a_window_reads(
    storage: Storage,
) -> None:
    old, new, theirs = insert(
        storage,
        memory("Lives in Lisbon", attribute="residence", second=10),
        memory("Lives in Porto", attribute="residence", second=70),
        memory("Lives in Faro", user=BO),
    )
    with storage.write() as s:
        s.memories.close([old], at(70), new)
    with storage.read() as s:
        stamps = s.memories.stamps([new, theirs, 10**9, old], T, ANA)
        assert stamps == [
            (old, "Lives in Lisbon", at(10), at(10), at(70)),
            (new, "Lives in Porto", at(70), at(70), None),
        ]
        assert [stamp.id for stamp in stamps] == [old, new]
        assert s.memories.stamps([], T, ANA) == []
        # A stamp is admitted by a window as its whole record is.
        records = s.memories.by_ids([old, new])
        for window in (ReadWindow(), ReadWindow(history=True), ReadWindow(since=at(60))):
            assert [window.admits(x) for x in stamps] == [window.admits(m) for m in records]
        assert [ReadWindow(history=True, until=at(60)).admits(x) for x in stamps] == [
            True,
            False,
        ]


def test_a_window_selects_by_when_a_memory_was_said(storage: Storage) -> None:
    early, late = insert(storage, memory("Likes jazz", second=10), memory("Has a cat", second=70))
    with storage.read() as s:
        inside, _ = s.memories.page(T, ANA, ReadWindow(since=at(60)), 0, 0)
        assert [m.id for m in inside] == [late]
        before, _ = s.memories.page(T, ANA, ReadWindow(until=at(60)), 0, 0)
        assert [m.id for m in before] == [early]
        assert [line.id for line in s.memories.said_in(T, ANA, at(0), at(100), 5)] == [
            late,
            early,
        ]


def test_deleting_memories_takes_their_words_and_vectors(storage: Storage) -> None:
    keep, gone = insert(storage, memory("Likes jazz"), memory("Lives in Lisbon", second=1))
    with storage.write() as s:
        s.vectors.put(MODEL, [(keep, unit(1, 0)), (gone, unit(0, 1))])
    selection = MemorySelection(ids=(gone,))
    with storage.write() as s:
        assert s.memories.delete(T, ANA, selection, dry_run=True) == [gone]
    with storage.read() as s:
        assert s.memories.get(gone, T, ANA) is not None
    with storage.write() as s:
        assert s.memories.delete(T, ANA, selection) == [gone]
    with storage.read() as s:
        assert s.memories.get(gone, T, ANA) is None
        assert s.words.newest_matching(T, ANA, query_stems("Lisbon"), 10) == {}
        assert [i for i, _ in s.vectors.of_user(T, ANA, MODEL)] == [keep]
        assert s.vectors.counters(T, ANA).removed == 1


# --- words --------------------------------------------------------------------


def test_the_word_index_finds_memories_holding_every_prompt_term(storage: Storage) -> None:
    lisbon, jazz, both = insert(
        storage,
        memory("Lives in Lisbon"),
        memory("Likes jazz", second=1),
        memory("Likes jazz bars in Lisbon", second=2),
    )
    with storage.read() as s:
        found = s.words.newest_matching(T, ANA, query_stems("Lisbon"), 10)
        assert set(found) == {lisbon, both}
        assert set(found[both].split()) >= set(query_stems("jazz lisbon"))
        assert list(s.words.newest_matching(T, ANA, query_stems("jazz Lisbon"), 10)) == [both]
        assert list(s.words.newest_matching(T, ANA, query_stems("Lisbon"), 1)) == [both]
        assert s.words.indexed_rows() >= both > jazz
        [term] = query_stems("Lisbon")
        assert s.words.documents(term, term + "\x00") == 2


# --- vectors ------------------------------------------------------------------


def test_vectors_are_counted_and_read_back_per_user(storage: Storage) -> None:
    first, second, other = insert(
        storage,
        memory("Likes jazz"),
        memory("Lives in Lisbon", second=1),
        memory("Has a cat", user=BO, second=2),
    )
    with storage.read() as s:
        assert s.vectors.counters(T, ANA) == VectorCounters(0, 0, 0)
        assert s.vectors.missing_count(MODEL) == 3
        assert s.vectors.missing(MODEL, first, 10) == [
            (second, "Lives in Lisbon"),
            (other, "Has a cat"),
        ]
    with storage.write() as s:
        s.vectors.put(MODEL, [(first, unit(1, 0)), (second, unit(0, 1))])
        s.vectors.put(MODEL, [(first, unit(1, 1))])  # replaces its older vector
    with storage.read() as s:
        assert s.vectors.counters(T, ANA).added == 3
        assert s.vectors.counters(T, BO).added == 0
        assert sorted(s.vectors.of_user(T, ANA, MODEL)) == [
            (first, unit(1, 1)),
            (second, unit(0, 1)),
        ]
        assert s.vectors.of_user(T, ANA, "another-model") == []
        assert s.vectors.added_since(T, ANA, first) == [(second, MODEL, unit(0, 1))]
        assert s.vectors.missing_count(MODEL) == 1


def test_a_vector_for_a_deleted_memory_is_not_stored(storage: Storage) -> None:
    [memory_id] = insert(storage, memory("Likes jazz"))
    with storage.write() as s:
        s.memories.delete(T, ANA, MemorySelection(ids=(memory_id,)))
    with storage.write() as s:
        s.vectors.put(MODEL, [(memory_id, unit(1, 0))])
    with storage.read() as s:
        assert s.vectors.of_user(T, ANA, MODEL) == []


# --- users --------------------------------------------------------------------


def test_erasing_a_user_removes_everything_of_theirs_once(storage: Storage) -> None:
    with storage.write() as s:
        stored = s.transcript.insert(turn("I live in Lisbon", key="k1"))
        s.memories.insert(memory("Lives in Lisbon", session="s1", history_id=stored.id))
        s.jobs.add("I like jazz", {"tenant_id": T, "user_id": ANA}, at(1))
        s.seeds.claim_ref(T, ANA, "ref-1", [1])
    [bo_memory] = insert(storage, memory("Has a cat", user=BO))
    with storage.write() as s:
        s.vectors.put(MODEL, [(bo_memory, unit(1, 0))])
        erasures = s.vectors.counters(T, ANA).erasures
    with storage.read() as s:
        assert [(u.user_id, u.memories, u.turns) for u in s.users.users(T)] == [
            (ANA, 1, 1),
            (BO, 1, 0),
        ]
        assert s.users.known(T, ANA)
        assert s.users.sessions(T, ANA) == ["s1"]
        counts = s.users.session_counts(T, ANA, "s1")
        assert (counts.turns, counts.memories) == (1, 1)
    with storage.write() as s:
        erased = s.users.erase(T, ANA)
    assert (erased.memories, erased.turns, erased.sessions, erased.jobs) == (1, 1, 1, 1)
    with storage.write() as s:
        again = s.users.erase(T, ANA)
        assert (again.memories, again.turns, again.jobs) == (0, 0, 0)
        assert not s.users.known(T, ANA)
        assert s.seeds.claimed_ref(T, ANA, "ref-1") is None
        assert s.jobs.count(T, ANA) == 0
        assert s.users.known(T, BO)
        assert s.vectors.counters(T, ANA).erasures > erasures
        assert s.vectors.counters(T, BO).added == 1


def test_erasing_a_session_takes_its_turns_and_what_was_drawn_from_them(
    storage: Storage,
) -> None:
    with storage.write() as s:
        stored = s.transcript.insert(turn("I live in Lisbon", key="k1"))
        s.memories.insert(memory("Lives in Lisbon", history_id=stored.id))
        s.memories.insert(memory("Likes jazz", session="s1", second=1))
        s.memories.insert(memory("Has a cat", session="s2", second=2))
    with storage.write() as s:
        assert s.users.erase_session(T, ANA, "s1") == (2, 1)
    with storage.read() as s:
        assert [m.text for m in s.memories.in_order(T, ANA)] == ["Has a cat"]


# --- transcript ---------------------------------------------------------------


def test_turns_are_found_by_key_and_by_seq_and_read_in_conversation_order(
    storage: Storage,
) -> None:
    with storage.write() as s:
        late = s.transcript.insert(turn("second", key="k2", seq=2, sort=2))
        early = s.transcript.insert(turn("first", key="k1", seq=1, sort=1))
    assert early.id > late.id > 0
    assert (early.payload, early.content) == ({"name": "Ana"}, "first")
    with storage.read() as s:
        assert s.transcript.find_by_key(T, ANA, "s1", "k1") == early
        assert s.transcript.find_by_key(T, ANA, "s2", "k1") is None
        found = s.transcript.find_by_seq(T, ANA, "s1", seq=2, role="user", content_hash="h-second")
        assert found == late
        turns, total = s.transcript.latest(T, ANA, "s1", None, 0)
        assert ([t.content for t in turns], total) == (["first", "second"], 2)
        last, _ = s.transcript.latest(T, ANA, "s1", None, 1)
        assert [t.content for t in last] == ["second"]
        assert s.transcript.exists(early.id)
    with storage.write() as s:
        deleted = s.transcript.delete(T, ANA, TurnSelection(turn_ids=(early.id,)))
        assert deleted == [early.id]
        assert not s.transcript.exists(early.id)


# --- seeds --------------------------------------------------------------------


def test_a_replayed_turn_is_claimed_once_within_its_window(storage: Storage) -> None:
    claim: Mapping[str, Any] = {
        "speaker": "user", "occurred_at": at(0), "text_hash": "h", "request_id": "req_1",
    }  # fmt: skip
    with storage.write() as s:
        assert s.seeds.claim_turn(T, ANA, **claim, received_at=at(10), window_start=at(0))
        assert not s.seeds.claim_turn(T, ANA, **claim, received_at=at(11), window_start=at(5))
        assert s.seeds.claim_turn(T, BO, **claim, received_at=at(11), window_start=at(5))
        assert s.seeds.claim_turn(T, ANA, **claim, received_at=at(30), window_start=at(20))


def test_a_client_ref_is_claimed_then_released(storage: Storage) -> None:
    with storage.write() as s:
        assert s.seeds.claimed_ref(T, ANA, "ref") is None
        s.seeds.claim_ref(T, ANA, "ref", [3, 4])
    with storage.write() as s:
        assert s.seeds.claimed_ref(T, ANA, "ref") == [3, 4]
        assert s.seeds.claimed_ref(T, BO, "ref") is None
        s.seeds.release_ref(T, ANA, "ref")
        assert s.seeds.claimed_ref(T, ANA, "ref") is None


# --- jobs ---------------------------------------------------------------------


def test_jobs_are_claimed_oldest_first_and_finished_once(storage: Storage) -> None:
    with storage.write() as s:
        first = s.jobs.add("I like jazz", {"tenant_id": T, "user_id": ANA, "n": 1}, at(1))
        second = s.jobs.add("I have a cat", {"tenant_id": T, "user_id": BO}, at(2))
    assert second > first
    with storage.read() as s:
        assert (s.jobs.count(), s.jobs.count(T), s.jobs.count(T, ANA)) == (2, 2, 1)
    with storage.write() as s:
        claimed = s.jobs.claim_next()
        assert claimed is not None
        assert (claimed.id, claimed.text, claimed.context["n"]) == (first, "I like jazz", 1)
        assert s.jobs.finish(first) is True
    with storage.write() as s:
        assert s.jobs.finish(first) is False
        claimed = s.jobs.claim_next()
        assert claimed is not None
        assert claimed.id == second
        assert s.jobs.cancel(T, BO) == 1
        assert s.jobs.claim_next() is None
        assert s.jobs.finish(second) is False


# --- quota --------------------------------------------------------------------


def test_adds_are_counted_up_to_the_limit_then_refused(storage: Storage) -> None:
    with storage.write() as s:
        assert [s.quota.count_add("key", "2026-01", 2) for _ in range(3)] == [True, True, False]
        assert s.quota.count_add("free", "2026-01", None)
    with storage.read() as s:
        assert s.quota.usage("key", "2026-01") == (2, 1)
        assert s.quota.usage("key", "2026-02") == (0, 0)
