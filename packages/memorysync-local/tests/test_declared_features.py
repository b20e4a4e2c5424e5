"""Optional storage seams are declared, not probed (issue 32 item 2).

A third backend (here SQLite declaring other features) says what it can do through
``Storage.features``; the callers honour the flags, and no module of memorysync_local
probes a storage, vector or extractor capability with ``getattr``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import numpy as np

import memorysync_local
from memorysync_local._extraction.rules import RuleBasedExtractor
from memorysync_local._recall.vector_index import VectorIndex
from memorysync_local._service.extraction_jobs import ExtractionJobs
from memorysync_local._service.facts import FactWriter
from memorysync_local._storage.records import StorageFeatures
from memorysync_local._storage.sqlite.backend import SQLiteStorage
from memorysync_local._storage.sqlite.vectors import SQLiteVectors


class NotifyingStorage(SQLiteStorage):
    """A backend that declares job notifications (as PostgreSQL does)."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.watchers: list[Callable[[], None]] = []

    @property
    def features(self) -> StorageFeatures:
        return StorageFeatures(vector_search_in_database=True, job_notifications=True)

    def watch_jobs(self, wake: Callable[[], None]) -> None:
        self.watchers.append(wake)


class SilentStorage(SQLiteStorage):
    """A backend that declares no notifications: watching it is a caller's bug."""

    def watch_jobs(self, wake: Callable[[], None]) -> None:
        raise AssertionError("watch_jobs called though features.job_notifications is False")


class AnsweringVectors(SQLiteVectors):
    """Vectors searched in the database: a fixed answer the caller must return."""

    def nearest_in_database(
        self, tenant_id: str, user_id: str, model: str, probe: bytes, limit: int
    ) -> list[tuple[int, float]] | None:
        return [(7, 0.5)][:limit]


def test_a_backend_declaring_job_notifications_is_watched(tmp_path: Path) -> None:
    storage = NotifyingStorage(str(tmp_path / "n.db"))
    try:
        jobs = ExtractionJobs(FactWriter(storage, RuleBasedExtractor(), None))
        jobs.resume()
        assert storage.watchers == [jobs.runner.wake]
    finally:
        storage.close()


def test_a_backend_without_job_notifications_is_not_watched(tmp_path: Path) -> None:
    storage = SilentStorage(str(tmp_path / "s.db"))
    try:
        assert storage.features == StorageFeatures()
        ExtractionJobs(FactWriter(storage, RuleBasedExtractor(), None)).resume()
    finally:
        storage.close()


def test_recall_takes_the_database_answer_when_the_vectors_give_one(tmp_path: Path) -> None:
    storage = NotifyingStorage(str(tmp_path / "v.db"))
    probe = np.ones(4, dtype=np.float32) / 2
    try:
        with storage.read() as session:
            answering = AnsweringVectors(session.vectors._conn)
            index = VectorIndex("m")
            assert index.nearest(answering, "local", "ana", probe, 3) == [(7, 0.5)]
            assert index.nearest(session.vectors, "local", "ana", probe, 3) == []
    finally:
        storage.close()


# The extractor declares ``features`` too (test_extractor_signature.py).
CAPABILITY_NAMES = ("storage", "vectors", "extractor")


def test_no_getattr_probes_a_storage_vector_or_extractor_capability() -> None:
    probes = []
    for path in Path(memorysync_local.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "getattr":
                probed = ast.unparse(node.args[0]).lower()
                if any(name in probed for name in CAPABILITY_NAMES):
                    probes.append(f"{path.name}: {ast.unparse(node)}")
    assert probes == []
