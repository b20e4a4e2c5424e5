"""Recall by meaning (the ``semantic`` extra), offline, with a tiny model the tests build.

The model is a real ``model2vec`` ``StaticModel`` whose few word vectors are
written by hand on four axes (animals, work, places, food), saved with
``save_pretrained`` and loaded by the server's own start-up code. It knows that
"pet" and "dog" are near, which is all these tests need: they check the
mechanism (vectors stored, backfilled, fused, scored, loaded offline), never
recall quality. The model hub is a closed loopback port.
"""

from __future__ import annotations

import io
import logging
import shutil
import socket
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

np = pytest.importorskip("numpy", reason="the semantic extra is not installed")
pytest.importorskip("model2vec", reason="the semantic extra is not installed")

import huggingface_hub.constants  # noqa: E402
from model2vec import StaticModel  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402
from tokenizers.models import WordLevel  # noqa: E402
from tokenizers.normalizers import Lowercase  # noqa: E402
from tokenizers.pre_tokenizers import Whitespace  # noqa: E402

from memorysync_local import embedded  # noqa: E402
from memorysync_local._cli import commands as _cli  # noqa: E402
from memorysync_local._plans import Caller  # noqa: E402
from memorysync_local._recall import embedding as _embedding  # noqa: E402
from memorysync_local._recall.embedding import Model2VecEmbedder, OpenAIEmbedder  # noqa: E402
from memorysync_local._recall.vector_index import VectorIndex  # noqa: E402
from memorysync_local._recall.vectors import backfill_vectors, fuse, pack  # noqa: E402
from memorysync_local._service.users_data import forget_user  # noqa: E402
from memorysync_local._storage import open_storage  # noqa: E402
from memorysync_local._storage.sqlite.database import SCHEMA_VERSION, Database  # noqa: E402
from memorysync_local._storage.sqlite.vectors import SQLiteVectors  # noqa: E402

from .conftest import keep_verbatim  # noqa: E402

# Four meaning axes: animals, work, places, food. Every other word is unknown.
AXES = {
    "cat": 0, "dog": 0, "pet": 0, "rex": 0, "miso": 0, "animal": 0,
    "dentist": 1, "job": 1, "work": 1, "works": 1,
    "berlin": 2, "porto": 2, "lives": 2, "live": 2,
    "peanuts": 3, "shellfish": 3, "allergic": 3, "eat": 3,
}  # fmt: skip
CALLER = Caller("k", "local", False, None)


def tiny_model(folder: Path) -> Path:
    words = ["[UNK]", "[PAD]", *AXES]
    tokenizer = Tokenizer(WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.normalizer = Lowercase()
    tokenizer.pre_tokenizer = Whitespace()
    vectors = np.zeros((len(words), 4), dtype=np.float32)
    for word, axis in AXES.items():
        vectors[words.index(word), axis] = 1.0
    StaticModel(vectors, tokenizer).save_pretrained(str(folder))
    return folder


@pytest.fixture(autouse=True)
def fresh_process_cache() -> Iterator[None]:
    """Each test starts as a new process would: no model loaded yet."""
    _embedding._models.clear()
    yield
    _embedding._models.clear()


@pytest.fixture
def model(tmp_path: Path) -> str:
    return "model2vec:" + str(tiny_model(tmp_path / "tiny"))


@pytest.fixture
def hub(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The model hub unreachable (a closed loopback port) and an empty cache."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cache = tmp_path / "hub-cache"
    cache.mkdir()
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(cache))
    return cache


def tell(server: Any, *texts: str, user: str = "ana") -> None:
    for text in texts:
        server.store.add_turn(
            CALLER,
            user_id=user,
            text=text,
            role="user",
            speaker=None,
            occurred_at=None,
            metadata=None,
            source="t",
        )


def recall(server: Any, prompt: str, k: int = 5, user: str = "ana") -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = server.store.search("local", user, prompt, k)
    return found


def vector_rows(db: Path) -> list[tuple[int, str]]:
    with closing(sqlite3.connect(db)) as conn:
        return [
            (int(r[0]), str(r[1]))
            for r in conn.execute("SELECT memory_id, model FROM memory_vectors")
        ]


def memory_ids(db: Path) -> list[int]:
    with closing(sqlite3.connect(db)) as conn:
        return [int(r[0]) for r in conn.execute("SELECT id FROM memories ORDER BY id")]


FACTS = (
    "I also have a dog named Rex.",
    "I work as a dentist in Berlin.",
    "I am allergic to peanuts.",
)


def test_a_question_sharing_no_word_with_the_fact_is_recalled_by_meaning(
    tmp_path: Path, model: str
) -> None:
    db = tmp_path / "m.db"
    with embedded(str(db), embedder="none") as words_only:
        tell(words_only, *FACTS)
        # No word in common ("pet" would be: a pet fact's stems index its attribute's
        # words, "pet animal"); "cat" sits on the dog's axis of the tiny model.
        assert recall(words_only, "Which cat?") == []
    with embedded(str(db), embedder=model) as hybrid:
        found = recall(hybrid, "Which cat?")
    assert [m["text"] for m in found] == ["Also has a dog named Rex"]
    assert found[0]["score"] == 1.0  # the cosine of two vectors on the same axis


def test_hybrid_scores_stay_in_0_1_and_never_below_the_lexical_score(
    tmp_path: Path, model: str
) -> None:
    db = tmp_path / "m.db"
    with embedded(str(db), embedder=model) as hybrid:
        tell(hybrid, *FACTS, "My cat is called Miso.", "I live in Porto.")
    prompt = "Where does my dentist work live?"
    with embedded(str(db), embedder="none") as words_only:
        lexical = {m["text"]: m["score"] for m in recall(words_only, prompt, k=10)}
    with embedded(str(db), embedder=model) as hybrid:
        fused = {m["text"]: m["score"] for m in recall(hybrid, prompt, k=10)}
    assert lexical, "the prompt shares words with some facts"
    assert all(0.0 <= value <= 1.0 for value in fused.values())
    # A min_score chosen for lexical recall keeps every memory it kept before.
    for text, value in lexical.items():
        assert fused[text] >= value, text
    threshold = min(lexical.values())
    kept = {text for text, value in fused.items() if value >= threshold}
    assert set(lexical) <= kept
    # Facts about neither work nor places (animals, food) are not vector matches.
    assert "Allergic to peanuts" not in fused


def test_fusion_reports_the_stronger_score_and_drops_no_word_match() -> None:
    lexical = [(1, 0.9), (2, 0.5)]
    vector = [(2, 0.8), (3, 1.7), (4, -0.2)]
    fused = fuse(lexical, vector)
    assert [i for i, _ in fused] == [1, 2, 3, 4]
    assert dict(fused) == {1: 0.9, 2: 0.8, 3: 1.0, 4: 0.0}


def test_an_unrelated_fact_with_a_faint_cosine_is_not_recalled(tmp_path: Path, model: str) -> None:
    # Mostly about animals, one word about work: cosine 1/sqrt(37) = 0.16 with "job",
    # positive but below the floor, and no word in common with the question.
    faint = "dog cat rex miso pet animal work"
    with embedded(str(tmp_path / "m.db"), embedder=model) as hybrid:
        keep_verbatim(hybrid, faint)
        assert recall(hybrid, "Which job?") == []
        assert [m["text"] for m in recall(hybrid, "Which pet?")] == [faint]  # cosine 0.99


def test_vectors_are_written_with_each_memory_and_deleted_with_it(
    tmp_path: Path, model: str
) -> None:
    db = tmp_path / "m.db"
    with embedded(str(db), embedder=model) as server:
        tell(server, *FACTS)
        ids = memory_ids(db)
        assert sorted(vector_rows(db)) == [(i, model) for i in ids]
        server.store.forget("local", "ana", memory_ids=ids[:1], filters=None, dry_run=False)
        assert [i for i, _ in vector_rows(db)] == ids[1:]


def test_memories_stored_without_vectors_are_embedded_at_start_with_progress(
    tmp_path: Path, model: str
) -> None:
    db = tmp_path / "m.db"
    with embedded(str(db), embedder="none") as words_only:
        tell(words_only, *FACTS)
    assert vector_rows(db) == []
    embedder = Model2VecEmbedder(model.partition(":")[2])
    out = io.StringIO()
    with closing(open_storage(str(db))) as storage:
        assert backfill_vectors(storage, embedder, out=out, progress_from=1) == 3
        assert backfill_vectors(storage, embedder, out=out, progress_from=1) == 0
    assert "embedding memories [" in out.getvalue()
    assert "3 / 3 memories" in out.getvalue()
    assert len(vector_rows(db)) == 3
    # A server started with an embedder fills what is missing itself.
    with embedded(str(db), embedder="none") as words_only:
        tell(words_only, "My cat is called Miso.")
    with embedded(str(db), embedder=model) as hybrid:
        assert len(vector_rows(db)) == len(memory_ids(db)) == 4
        assert "User's cat is called Miso" in [m["text"] for m in recall(hybrid, "any animal?")]


def test_a_version_4_file_gains_the_vectors_table_and_keeps_everything(
    tmp_path: Path, model: str
) -> None:
    """``tests/data/schema_v4.sqlite3`` was written by the version-4 server (the facts of
    ``schema_v3.sqlite3``, migrated)."""
    db = tmp_path / "v4.db"
    shutil.copy(Path(__file__).parent / "data" / "schema_v4.sqlite3", db)
    with closing(sqlite3.connect(db)) as conn:
        before = conn.execute("SELECT * FROM memories ORDER BY id").fetchall()
    with embedded(str(db), embedder=model) as server:
        with closing(sqlite3.connect(db)) as conn:
            versions = [r[0] for r in conn.execute("SELECT version FROM schema_version")]
            after = conn.execute("SELECT * FROM memories ORDER BY id").fetchall()
        assert versions[-1] == SCHEMA_VERSION == 7
        # Schema 7 adds validity columns after the old ones, which keep their values.
        assert [tuple(row)[: len(before[0])] for row in after] == before
        assert len(vector_rows(db)) == len(before)
        found = recall(server, "What pet do I have?")
    assert [m["text"] for m in found] == ["Also has a dog named Rex"]


def test_offline_start_with_the_model_in_the_hub_cache(tmp_path: Path, hub: Path) -> None:
    snapshot = hub / "models--someone--tiny-static" / "snapshots" / "0123456789abcdef"
    snapshot.parent.mkdir(parents=True)
    tiny_model(snapshot)
    (hub / "models--someone--tiny-static" / "refs").mkdir()
    (hub / "models--someone--tiny-static" / "refs" / "main").write_text("0123456789abcdef")
    with embedded(str(tmp_path / "m.db"), embedder="model2vec:someone/tiny-static") as server:
        assert server.store.embedder is not None
        tell(server, *FACTS)
        assert [m["text"] for m in recall(server, "Which pet?")] == ["Also has a dog named Rex"]


def test_offline_start_without_the_model_says_so_in_one_line_and_recalls_by_words(
    tmp_path: Path, hub: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="memorysync.local")
    with embedded(str(tmp_path / "m.db"), embedder="model2vec:someone/not-cached") as server:
        assert server.store.embedder is None
        tell(server, *FACTS)
        assert [m["text"] for m in recall(server, "peanuts")] == ["Allergic to peanuts"]
    lines = [r.getMessage() for r in caplog.records if r.name == "memorysync.local"]
    assert len(lines) == 1
    assert "someone/not-cached" in lines[0]
    assert "lexical" in lines[0]
    assert "\n" not in lines[0]


def test_serve_says_in_one_line_when_the_model_cannot_be_had(
    hub: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli._embedder("model2vec:someone/not-cached") is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "semantic recall is off" in err
    assert "someone/not-cached" in err


def test_serve_rejects_an_unknown_embedder_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        _cli.main(["serve", "--embedder", "word2vec", "--port", "0"])
    assert exited.value.code == 2
    assert "word2vec" in capsys.readouterr().err


def test_an_embedder_failing_at_write_and_recall_keeps_the_facts_and_recalls_by_words(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    failing = OpenAIEmbedder("m", base_url=closed, api_key="sk-secret-value", timeout=5)
    db = tmp_path / "m.db"
    caplog.set_level(logging.WARNING, logger="memorysync.local")
    with embedded(str(db), embedder=failing) as server:
        tell(server, *FACTS)
        assert [m["text"] for m in recall(server, "peanuts")] == ["Allergic to peanuts"]
    failing.close()
    assert len(memory_ids(db)) == 3
    assert vector_rows(db) == []
    assert any("facts stored without vectors" in r.getMessage() for r in caplog.records)
    assert "sk-secret-value" not in caplog.text


# --- the in-memory vector index (memorysync_local._recall.vector_index) -------------------


def test_recall_reads_a_users_vectors_once_and_appends_new_ones(tmp_path: Path, model: str) -> None:
    with embedded(str(tmp_path / "m.db"), embedder=model) as server:
        index = server.store._vectors
        tell(server, "My cat is called Miso.")
        assert [m["text"] for m in recall(server, "any animal?")] == ["User's cat is called Miso"]
        assert index.reloads == 1
        tell(server, "I also have a dog named Rex.", "I work as a dentist in Berlin.")
        found = [m["text"] for m in recall(server, "any animal?")]
        assert found == ["Also has a dog named Rex", "User's cat is called Miso"]  # ties: newest
        assert index.reloads == 1  # the two new vectors were appended, not reread


def test_a_user_recalled_before_their_first_fact_is_recalled_by_meaning_after_it(
    tmp_path: Path, model: str
) -> None:
    with embedded(str(tmp_path / "m.db"), embedder=model) as server:
        assert recall(server, "any animal?") == []
        tell(server, "My cat is called Miso.")
        assert [m["text"] for m in recall(server, "any animal?")] == ["User's cat is called Miso"]


def test_a_forgotten_memory_leaves_the_index_at_once(tmp_path: Path, model: str) -> None:
    db = tmp_path / "m.db"
    with embedded(str(db), embedder=model) as server:
        tell(server, *FACTS, "My cat is called Miso.")
        assert len(recall(server, "any animal?")) == 2
        dog = memory_ids(db)[0]
        server.store.forget("local", "ana", memory_ids=[dog], filters=None, dry_run=False)
        assert [m["text"] for m in recall(server, "any animal?")] == ["User's cat is called Miso"]
        assert server.store._vectors.reloads == 2


def test_a_second_server_on_the_same_file_sees_the_others_writes(
    tmp_path: Path, model: str
) -> None:
    db = str(tmp_path / "m.db")
    with embedded(db, embedder=model) as first, embedded(db, embedder=model) as second:
        tell(first, "My cat is called Miso.")
        assert len(recall(second, "any animal?")) == 1
        tell(first, "I also have a dog named Rex.")
        assert len(recall(second, "any animal?")) == 2
        first.store.forget("local", "ana", memory_ids=None, filters=None, dry_run=False)
        assert recall(second, "any animal?") == []


def test_past_its_byte_budget_the_index_evicts_other_users_and_stays_right(
    tmp_path: Path, model: str
) -> None:
    with embedded(str(tmp_path / "m.db"), embedder=model) as server:
        index = server.store._vectors
        index.max_bytes = 1  # keeps only the user being recalled
        for user in ("ana", "bo", "cy"):
            tell(server, f"My cat is called {user}.", user=user)
        for user in ("ana", "bo", "cy", "ana"):
            assert len(recall(server, "any animal?", user=user)) == 1
        assert list(index._held) == [("local", "ana")]
        assert index.reloads == 4


class SlowEmbedder:
    """The tiny model, held at a gate while it embeds a text that mentions ``Rex``."""

    def __init__(self, inner: Model2VecEmbedder) -> None:
        self.inner = inner
        self.name = inner.name
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if any("Rex" in text for text in texts):
            self.entered.set()
            assert self.release.wait(30)
        return self.inner.embed(texts)


def test_a_slow_embedder_does_not_hold_the_write_lock(tmp_path: Path, model: str) -> None:
    slow = SlowEmbedder(Model2VecEmbedder(model.partition(":")[2]))
    with embedded(str(tmp_path / "m.db"), embedder=slow) as server:
        writer = threading.Thread(target=tell, args=(server, "I also have a dog named Rex."))
        other = threading.Thread(target=tell, args=(server, "I live in Porto."))
        writer.start()
        try:
            assert slow.entered.wait(30)
            # While the first write's embedder waits, a second write goes through,
            # and the dog is already found by its words.
            other.start()
            other.join(20)
            waited = other.is_alive()
        finally:
            slow.release.set()
            writer.join(60)
            other.join(60)  # before the server closes its connections
        assert not waited, "the second write waited for the first one's embedder"
        assert [m["text"] for m in recall(server, "rex")] == ["Also has a dog named Rex"]
        assert [m["text"] for m in recall(server, "Which pet?")] == ["Also has a dog named Rex"]


def test_nearest_matches_an_exhaustive_search(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    db = Database(str(tmp_path / "m.db"))
    try:
        vectors = rng.normal(size=(300, 16)).astype(np.float32)
        with db.write() as conn:
            for i, vector in enumerate(vectors):
                conn.execute(
                    "INSERT INTO memories (tenant_id, user_id, text, origin, created_at) "
                    "VALUES ('t', 'u', ?, 'add', '2026-01-01T00:00:00Z')",
                    (f"fact {i}",),
                )
                conn.execute(
                    "INSERT INTO memory_vectors (memory_id, model, vector) VALUES (?, 'm', ?)",
                    (i + 1, pack(vector)),
                )
        index = VectorIndex("m")
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        for _ in range(5):
            probe = rng.normal(size=16).astype(np.float32)
            probe /= np.linalg.norm(probe)
            with db.connection() as conn:
                found = index.nearest(SQLiteVectors(conn), "t", "u", probe, 10)
            expected = np.argsort(-(unit @ probe))[:10] + 1
            assert [i for i, _ in found] == expected.tolist()
            assert [c for _, c in found] == sorted((c for _, c in found), reverse=True)
    finally:
        db.close()


def test_concurrent_first_recalls_of_a_user_read_the_vectors_once(
    tmp_path: Path, model: str
) -> None:
    with embedded(str(tmp_path / "m.db"), embedder=model) as server:
        tell(server, *FACTS)
        start = threading.Barrier(8)
        found: list[list[str]] = []

        def ask() -> None:
            start.wait(30)
            found.append([m["text"] for m in recall(server, "Which pet?")])

        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert found == [["Also has a dog named Rex"]] * 8
        assert server.store._vectors.reloads == 1


def test_an_erased_user_leaves_no_row_naming_them_and_their_new_facts_are_recalled(
    tmp_path: Path, model: str
) -> None:
    db = tmp_path / "m.db"
    with embedded(str(db), embedder=model) as server:
        tell(server, *FACTS)
        assert recall(server, "Which pet?")  # the user's vectors are now held
        forget_user(server.store.db, "local", "ana")
        with closing(sqlite3.connect(db)) as conn:
            tables = [
                r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            for table in tables:
                rows = conn.execute(f'SELECT * FROM "{table}"').fetchall()
                assert all("ana" not in row for row in rows), table
        # The same counts again after the erase: the held matrix must not pass for current.
        tell(server, "I also have a dog named Rex.", "My cat is called Miso.", "I live in Porto.")
        found = [m["text"] for m in recall(server, "any animal?")]
    # Both pets, whatever their order (the dog's fact also matches "animal" by its words).
    assert sorted(found) == ["Also has a dog named Rex", "User's cat is called Miso"]
