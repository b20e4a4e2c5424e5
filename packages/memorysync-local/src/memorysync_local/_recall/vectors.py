"""Recall by meaning: memory vectors in the database, nearest neighbours, and fusion.

Each memory's vector is stored with it (``VectorStore``; SQLite: ``memory_vectors``),
with the name of the embedder that made it: a server started with another model
ignores those and refills them (:func:`backfill_vectors`). Vectors are stored
unit-length as float32, so a dot product is the cosine similarity.

Search is exact, over every vector of the asking user, held in memory between
recalls (:class:`~memorysync_local._recall.vector_index.VectorIndex`): from 10,000
vectors on, a first pass over int8 codes rules out the rows that cannot be among the
nearest and float32 products read the rest (1.2 to 1.8 ms of CPU for 100,000 vectors
of 128 dimensions, against 5.8 to 8.2 ms for one product over all), with the same
answers. An approximate index (HNSW) would trade recall, and ties going to the newest,
for little more, and took 19 to 87 s to build at 100,000 here (bench item 18c).

Vectors are written after the memories' own transaction has committed
(:func:`store_vectors`), so a slow embedder never holds the write lock; a
memory stored meanwhile is found by its words, and one left without a vector
(a crash in between, a failing embedder) is embedded by the next start's backfill.

Hybrid ranking is score-calibrated, not rank-based: a memory ranks by its word
score plus ``VECTOR_WEIGHT`` times how far its cosine clears the floor
(``MIN_COSINE``), scaled to [0, 1]. Words stay the main evidence; meaning moves
a memory up only by a bounded amount, so a memory the words rank well is passed
only by one that words rank nearly as well and meaning ranks clearly better,
or, on the vector side alone, by a very close match. (Reciprocal rank fusion
gave the weaker list an equal vote and pushed good word matches out of the
first five.) A memory below the floor gets nothing from its vector, so an
unrelated fact is not brought back with every question.

The score each memory reports stays on the documented ``[0, 1]`` scale and keeps
its lexical meaning: it is the larger of the memory's lexical score and its
cosine similarity (clamped at 0). A memory that lexical recall finds never
scores lower in hybrid mode, so a ``min_score`` chosen for lexical recall drops
nothing it kept.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from memorysync_local._recall.dialog import in_dialog
from memorysync_local._recall.embedding import Embedder, _numpy
from memorysync_local._recall.ranking import TermStats, word_scores
from memorysync_local._recall.vector_index import VectorIndex
from memorysync_local._storage.batches import BATCH, PROGRESS_FROM, in_batches
from memorysync_local._storage.interface import Session, Storage

logger = logging.getLogger("memorysync.local")

# A vector match must be more similar than this (cosine) to count at all: below it,
# unrelated texts (any positive cosine would do otherwise). Calibrated for the shipped
# model on chatty turns (bench/cosine_floor.py, dev split): 0.25 is the lowest floor
# with the best hit@3; 0.3 had dropped right answers such as a stored lactose
# intolerance for "Can I have a milkshake?".
MIN_COSINE = 0.25
# How much a perfect vector match adds to a word score (which is in [0, 1]).
VECTOR_WEIGHT = 0.3
# Texts embedded per call during a backfill.
EMBED_BATCH = 256


def pack(vector: Sequence[float]) -> bytes:
    """A unit-length float32 blob (a zero vector stays zero)."""
    np = _numpy()
    array = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(array))
    if norm > 0:
        array = array / norm
    return bytes(array.astype(np.float32).tobytes())


def store_vectors(storage: Storage, embedder: Embedder, rows: Sequence[tuple[int, str]]) -> None:
    """Embed ``(memory id, text)`` pairs, then store their vectors in one short write.

    The embedder runs before the write begins, so a slow embedder never holds the
    write lock. A memory deleted meanwhile gets no vector; an older vector of the
    memory is replaced.
    """
    if not rows:
        return
    vectors = embedder.embed([text for _, text in rows])
    blobs = [
        (memory_id, pack(vector)) for (memory_id, _), vector in zip(rows, vectors, strict=True)
    ]
    with storage.write() as session:
        session.vectors.put(embedder.name, blobs)


def backfill_vectors(
    storage: Storage,
    embedder: Embedder,
    *,
    out: TextIO | None = None,
    progress_from: int = PROGRESS_FROM,
) -> int:
    """Embed every memory that has no vector from ``embedder``; returns how many.

    Runs in batches, each its own write: an interrupted backfill keeps what it did
    and the next start carries on. Large ones show a progress bar on stderr.
    """
    with storage.read() as session:
        total = session.vectors.missing_count(embedder.name)
    if not total:
        return 0

    def next_batch(last: int) -> list[Any]:
        with storage.read() as session:
            return list(session.vectors.missing(embedder.name, last, min(BATCH, EMBED_BATCH)))

    def embed(rows: list[Any]) -> None:
        store_vectors(storage, embedder, rows)

    return in_batches(
        next_batch,
        embed,
        total=total,
        what="embedding memories",
        out=out,
        progress_from=progress_from,
    )


def fuse(
    lexical: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]]
) -> list[tuple[int, float]]:
    """Score-calibrated fusion of two best-first lists; each id with its [0, 1] score.

    The order is by word score + ``VECTOR_WEIGHT`` x the cosine's share above
    ``MIN_COSINE`` (ties keep the word list's order, then the vector list's); the
    score is the larger of the lexical score and the cosine clamped to [0, 1]
    (see the module docstring).
    """
    order, reported = _fused(lexical, vector)
    return [(i, reported(i, 0.0)) for i, _ in order]


def _fused(
    lexical: Sequence[tuple[int, float]], vector: Sequence[tuple[int, float]]
) -> tuple[list[tuple[int, float]], Callable[[int, float], float]]:
    """(id, ranking value) best first, and the reported score of an id given its
    ranking value after dialog context (:mod:`.dialog`)."""
    fused: dict[int, float] = {}
    best: dict[int, float] = {}
    for memory_id, value in lexical:
        fused.setdefault(memory_id, value)
        best[memory_id] = min(1.0, max(0.0, value))
    for memory_id, cosine in vector:
        lift = VECTOR_WEIGHT * max(0.0, cosine - MIN_COSINE) / (1.0 - MIN_COSINE)
        fused[memory_id] = fused.get(memory_id, 0.0) + lift
        best[memory_id] = max(best.get(memory_id, 0.0), min(1.0, max(0.0, cosine)))
    # Python's sort is stable: equal fused scores keep the word list's order first.
    order = sorted(fused, key=lambda i: -round(fused[i], 6))

    def reported(memory_id: int, value: float) -> float:
        return round(min(1.0, max(best.get(memory_id, 0.0), value)), 4)

    return [(i, fused[i]) for i in order], reported


def prompt_vector(embedder: Embedder, prompt: str) -> Any | None:
    """The prompt's unit vector (float32), or None when the embedder fails (logged:
    that recall is lexical only)."""
    try:
        query = embedder.embed([prompt])[0]
    except Exception:  # a hot path: recall answers, lexically, and the log says why
        logger.warning("the embedder failed; this recall is lexical only", exc_info=True)
        return None
    return _numpy().frombuffer(pack(query), dtype="float32")


def hybrid(
    session: Session,
    index: VectorIndex,
    probe: Any | None,
    tenant: str,
    user_id: str,
    prompt: str,
    limit: int,
    stats: TermStats | None = None,
) -> list[tuple[int, float]]:
    """Memory ids, best first, with scores: lexical and vector recall fused
    (:func:`fuse`); lexical alone without a ``probe`` (:func:`prompt_vector`'s answer).

    A memory whose cosine is not above ``MIN_COSINE`` is no vector match: an
    unrelated memory should not enter the list on the vector side alone.
    """
    found = word_scores(session, tenant, user_id, prompt, limit, stats)
    if probe is not None:
        close = [
            (memory_id, cosine)
            for memory_id, cosine in index.nearest(session.vectors, tenant, user_id, probe, limit)
            if cosine > MIN_COSINE
        ]
        found, reported = _fused(found, close)
    else:
        reported = _clamped
    return [
        (memory_id, reported(memory_id, value))
        for memory_id, value in in_dialog(session, tenant, user_id, found, limit, prompt)
    ]


def _clamped(memory_id: int, value: float) -> float:
    del memory_id
    return round(min(1.0, value), 4)
