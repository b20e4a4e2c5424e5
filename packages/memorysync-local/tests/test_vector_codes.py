"""A user with many vectors is searched in two passes (int8 codes, then exact float32 on
the rows the codes could not rule out): the same answers as one exact product, kept
in step with appends, deletions, replaced vectors and erasures
(``_recall.vector_index``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy")
pytest.importorskip("numkong")

from memorysync_local._recall import vector_index  # noqa: E402
from memorysync_local._recall.vector_index import (  # noqa: E402
    VectorIndex,
    _code_products,
    _coded,
    _Probe,
    _Products,
    _Ticket,
)
from memorysync_local._recall.vectors import pack  # noqa: E402
from memorysync_local._service.users_data import forget_user  # noqa: E402
from memorysync_local._storage import open_storage  # noqa: E402
from memorysync_local._storage.interface import Storage  # noqa: E402
from memorysync_local._storage.records import MemorySelection, NewMemory  # noqa: E402

DIMS = 32
NOW = "2026-12-01T00:00:00Z"
KEY = ("t", "u")


def _unit(rows: Any) -> Any:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def _collection(seed: int) -> Any:
    """3,000 rows: random ones, exact repeats (ties) and near-repeats (close calls)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(2000, DIMS))
    repeats = base[rng.integers(0, 50, size=600)]
    close = base[rng.integers(0, 50, size=400)] + rng.normal(scale=0.01, size=(400, DIMS))
    return _unit(np.concatenate([base, repeats, close]))


def _store(storage: Storage, vectors: Any, user: str = "u") -> list[int]:
    """One memory per vector (text: its row number), the vector stored under 'm'."""
    ids: list[int] = []
    with storage.write() as session:
        for i in range(len(vectors)):
            memory = NewMemory(
                tenant_id="t",
                user_id=user,
                text=f"row {i}",
                kind="fact",
                source="test",
                session_id=None,
                metadata={},
                origin="add",
                history_id=None,
                request_id=None,
                created_at=NOW,
                said_at=NOW,
                attribute=None,
            )
            ids.append(session.memories.insert(memory))
        session.vectors.put("m", [(i, pack(v)) for i, v in zip(ids, vectors, strict=True)])
    return ids


def _probes(vectors: Any, seed: int) -> list[Any]:
    rng = np.random.default_rng(seed)
    random = list(_unit(rng.normal(size=(12, DIMS))))
    # Stored rows themselves: their repeats tie exactly at the top.
    return random + [vectors[i] for i in (0, 7, 2100, 2700)]


def _answers(storage: Storage, index: VectorIndex, probe: Any, limit: int) -> Any:
    with storage.read() as session:
        return index.nearest(session.vectors, "t", "u", probe, limit)


@pytest.fixture
def storage(tmp_path: Path) -> Any:
    opened = open_storage(str(tmp_path / "codes.db"))
    yield opened
    opened.close()


def test_the_pass_over_codes_gives_the_exact_answers_ties_to_the_newest(storage: Storage) -> None:
    vectors = _collection(seed=1)
    ids = np.array(_store(storage, vectors))
    coded = VectorIndex("m", quantize_from=0)
    exact = VectorIndex("m", quantize_from=10**9)
    stored = np.stack([np.frombuffer(pack(v), dtype=np.float32) for v in vectors])
    for probe in _probes(vectors, seed=2):
        # Every row ranked: best cosine first, equal cosines newest (highest id) first.
        cosines = np.einsum("ij,j->i", stored, probe)
        ranked = np.lexsort((-ids, -cosines))
        for limit in (1, 10, 50):
            found = _answers(storage, coded, probe, limit)
            assert found == _answers(storage, exact, probe, limit)
            assert [i for i, _ in found] == ids[ranked[:limit]].tolist()
    held = coded._held[KEY]
    assert held.codes is not None
    assert held.codes.size == len(vectors)
    assert exact._held[KEY].codes is None


def test_the_pass_over_codes_reads_again_only_the_rows_it_cannot_rule_out() -> None:
    matrix = _collection(seed=3)
    codes = _coded(None, matrix, len(matrix))
    probe = matrix[5]
    ticket = _Products().run(KEY, _Ticket(matrix, probe, codes, 10))
    # Row 5's repeats and near-repeats, and a few random rows near the cut: not 3,000.
    assert ticket.rows is not None
    assert 10 <= len(ticket.rows) < len(matrix) // 10
    np.testing.assert_array_equal(ticket.cosines, np.einsum("ij,j->i", matrix, probe)[ticket.rows])


def test_probes_sharing_a_pass_over_codes_get_their_own_answers() -> None:
    matrix = _collection(seed=4)
    codes = _coded(None, matrix, len(matrix))
    probes = _probes(matrix, seed=5)[:4]
    products = _Products()
    queued = [_Ticket(matrix, probe, codes, 10) for probe in probes[1:]]
    products._queues[KEY] = list(queued)
    mine = products.run(KEY, _Ticket(matrix, probes[0], codes, 10))
    assert products.shared == 4
    for ticket, probe in zip([mine, *queued], probes, strict=True):
        alone = _Products().run(KEY, _Ticket(matrix, probe, codes, 10))
        np.testing.assert_array_equal(ticket.rows, alone.rows)
        np.testing.assert_array_equal(ticket.cosines, alone.cosines)


def test_codes_follow_appends_deletions_replaced_vectors_and_erasure(storage: Storage) -> None:
    vectors = _collection(seed=6)
    # The first later memory is unlike any other: the nearest to itself.
    fresh = _unit(np.random.default_rng(7).normal(size=(1, DIMS)))
    first, later = vectors[:2500], np.concatenate([fresh, vectors[2500:]])
    ids = _store(storage, first)
    coded = VectorIndex("m", quantize_from=1000)
    exact = VectorIndex("m", quantize_from=10**9)
    probe = later[0]

    def same() -> list[tuple[int, float]]:
        found = _answers(storage, coded, probe, 10)
        assert found == _answers(storage, exact, probe, 10)
        return found

    assert same()
    # New memories: appended to the held matrix, and their codes with them.
    new_ids = _store(storage, later)
    found = same()
    assert found[0][0] == new_ids[0]
    held = coded._held[KEY]
    assert held.size == len(vectors) + 1
    assert held.codes is not None
    assert held.codes.size == len(vectors) + 1
    assert coded.reloads == 1
    # A deleted memory leaves the answers at once.
    with storage.write() as session:
        session.memories.delete("t", "u", MemorySelection(ids=(new_ids[0],)))
    found = same()
    assert new_ids[0] not in [i for i, _ in found]
    assert coded.reloads == 2
    # An older memory's vector replaced: it is found by its new vector.
    with storage.write() as session:
        session.vectors.put("m", [(ids[0], pack(probe))])
    assert same()[0] == (ids[0], pytest.approx(1.0, abs=1e-5))
    # The user erased: nothing is found, and a new memory of theirs is.
    forget_user(storage, "t", "u")
    assert _answers(storage, coded, probe, 10) == []
    again = _store(storage, [probe])
    assert same() == [(again[0], pytest.approx(1.0, abs=1e-5))]


def test_packed_blocks_give_the_codes_exact_products_and_follow_appends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Blocks of 700 rows: 2,500 rows are three packed blocks and 400 rows through cdist.
    monkeypatch.setattr(vector_index, "_PACK_ROWS", 700)
    matrix = _collection(seed=8)
    probes = [_Probe.of(probe) for probe in _probes(matrix, seed=9)[:3]]

    def exact(codes: Any) -> Any:
        rows = codes.codes[: codes.size].astype(np.int64)
        return np.stack([rows @ probe.codes.astype(np.int64) for probe in probes])

    codes = _coded(None, matrix, 2500)
    assert len(codes.packed) == 3
    np.testing.assert_array_equal(_code_products(codes, probes), exact(codes))
    # Appended rows: the packed blocks are kept, one more packed when it fills.
    grown = _coded(codes, matrix, 3000)
    assert len(grown.packed) == 4
    assert grown.packed[:3] == codes.packed
    np.testing.assert_array_equal(_code_products(grown, probes), exact(grown))
