"""Word recall: one user's memories for a prompt, ranked, with scores.

The storage's word index supplies candidates (the user's newest memories that
match a prompt stem, ``WordIndex.newest_matching``) and term statistics; the
ranking is all here, the same for every backend (:func:`score`): half the IDF share
of the prompt's stems a memory matches, half a BM25 term (each matched stem's IDF,
saturated by how often the memory repeats it and normalised by the memory's
length), so that among memories matching the same words the one that is about
them, not one that mentions them in passing, comes first. A dialog turn (a memory
with a speaker and a position in its session, as data) borrows from the turns beside
it, and one that is a question (ends with ``?``) is demoted (:mod:`.dialog`). A
prompt naming a date brings in the memories said then (:mod:`.dates`). Ties go to
the shorter memory (its match is denser), then to the newest. A question about the
user themself ("what do you know about me?") names no topic: it recalls the user's
newest facts instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from memorysync_local._recall.dates import DATE_BONUS, named_period
from memorysync_local._recall.dialog import in_dialog
from memorysync_local._recall.words import Matcher, index_text, query_stems, vocabulary_ranges
from memorysync_local._storage.interface import Session, WordIndex
from memorysync_local._storage.records import MemoryRecord

# "about me", "about myself", "who am I", "what do you know of me": every fact is relevant.
_ABOUT_USER = re.compile(
    r"\babout\s+(?:me|myself)\b|\bwho\s+am\s+i\b|\b(?:know|remember)\s+of\s+me\b"
    r"|\btold\s+you\s+about\b",
    re.IGNORECASE,
)
# The score of a fact recalled only because the question was about the user: it
# matched no word, so it stays below a memory that matched most of the prompt.
ABOUT_USER_SCORE = 0.3


def about_user(prompt: str) -> bool:
    """Whether the prompt asks about the user in general (not about a topic)."""
    return bool(_ABOUT_USER.search(prompt))


# BM25's term-frequency saturation and length normalisation (a low b: a memory is a
# sentence or two, so length says less about focus than in long documents).
BM25_K1 = 1.2
BM25_B = 0.3


def score(counts: Sequence[int], idf: Sequence[float], length: int, average: float) -> float:
    """A relevance: 0.5 x the IDF share of the prompt stems matched + 0.5 x a BM25 term.

    ``counts`` holds, per prompt stem, how often the memory's stems match it;
    ``length`` is the memory's stem count and ``average`` the candidates' mean.
    The first half weighs each matched stem by its IDF, so a word in most memories
    (a speaker's name in every turn of a conversation) counts for little beside the
    topic's words. The BM25 term is divided by what matching every stem once at the
    average length would give; repeats and a short memory take it past 1. Recall
    reports ``min(1, relevance)``, ranks by it whole.
    """
    if not counts:
        return 0.0
    norm = BM25_K1 * (1 - BM25_B + BM25_B * length / max(average, 1.0))
    covered = 0.0
    bm25 = 0.0
    for weight, count in zip(idf, counts, strict=True):
        if count:
            covered += weight
            bm25 += weight * count * (BM25_K1 + 1) / (count + norm)
    ceiling = sum(idf) or 1.0
    return round(0.5 * covered / ceiling + 0.5 * bm25 / ceiling, 4)


def lexical_ranking(
    session: Session,
    tenant: str,
    user_id: str,
    prompt: str,
    limit: int,
    stats: TermStats | None = None,
) -> list[tuple[int, float]]:
    """Up to ``limit`` of the user's memory ids for the prompt, best first, with scores.

    Ranking every match costs a microsecond or more per matching memory: tens of
    milliseconds when a prompt word is in 10% of 100,000 memories. Instead each
    prompt stem fetches only its newest ``limit`` matches, plus the newest memories
    that match the two rarest common stems together; the union is scored here. A
    memory left out matches one common stem (of those it matches) and is older than
    ``limit`` memories that match it too, so it could not have made the first ``limit``.
    """
    found = word_scores(session, tenant, user_id, prompt, limit, stats)
    return [
        (memory_id, round(min(1.0, value), 4))
        for memory_id, value in in_dialog(session, tenant, user_id, found, limit, prompt)
    ]


def word_scores(
    session: Session,
    tenant: str,
    user_id: str,
    prompt: str,
    limit: int,
    stats: TermStats | None = None,
) -> list[tuple[int, float]]:
    """Every scored candidate (memory id, unclamped score), best first: the first
    ``limit`` are the best of the user's memories for the prompt (see :func:`lexical_ranking`)."""
    stems = query_stems(prompt)
    found: list[tuple[int, float]] = []
    if stems:
        dated = _said_then(session, tenant, user_id, prompt, limit)
        found = _ranked(session.words, tenant, user_id, stems, stats or TermStats(), limit, dated)
    if about_user(prompt) and len(found) < limit:
        seen = {memory_id for memory_id, _ in found}
        newest = session.memories.newest_ids(tenant, user_id, limit)
        found += [(i, ABOUT_USER_SCORE) for i in newest if i not in seen]
    return found


def _ranked(
    words: WordIndex,
    tenant: str,
    user_id: str,
    stems: Sequence[str],
    stats: TermStats,
    limit: int,
    dated: dict[int, str],
) -> list[tuple[int, float]]:
    candidates: dict[int, str] = {}
    capped: list[str] = []
    for query in stems:
        found = words.newest_matching(tenant, user_id, [query], limit)
        candidates.update(found)
        if len(found) == limit:
            capped.append(query)
    idf = stats.idf(words, stems)
    # Memories with two common stems may be older than each stem's newest matches:
    # fetch the newest with the two rarest common stems together. (Every pair would
    # cost about 2 ms each at 100k memories, mostly to find that none exist.)
    if len(capped) >= 2:
        weight = dict(zip(stems, idf, strict=True))
        first, second = sorted(capped, key=lambda q: weight[q], reverse=True)[:2]
        candidates.update(words.newest_matching(tenant, user_id, [first, second], limit))
    for memory_id, indexed in dated.items():
        candidates.setdefault(memory_id, indexed)
    matcher = Matcher(stems)
    lengths = {memory_id: len(indexed.split()) for memory_id, indexed in candidates.items()}
    average = sum(lengths.values()) / max(1, len(lengths))
    scored: list[tuple[int, float, int]] = []
    for memory_id, indexed in candidates.items():
        length = lengths[memory_id]
        value = score(matcher.counts(indexed), idf, length, average)
        if memory_id in dated:
            value = round(value * (1.0 + DATE_BONUS), 4)
        scored.append((memory_id, value, length))
    scored.sort(key=_order)
    return [(memory_id, value) for memory_id, value, _ in scored]


def _said_then(
    session: Session, tenant: str, user_id: str, prompt: str, limit: int
) -> dict[int, str]:
    """The memories said in the period the prompt names (:mod:`.dates`), id -> their
    text's stems: a candidate however old, as the word index gives the newest only."""
    period = named_period(prompt)
    if period is None:
        return {}
    said = session.memories.said_in(tenant, user_id, period.since, period.until, limit)
    return {line.id: index_text(line.text) for line in said}


def _order(item: tuple[int, float, int]) -> tuple[float, int, int]:
    """Best score first; ties: the shorter memory (a denser match), then the newest."""
    memory_id, value, length = item
    return (-value, length, -memory_id)


class TermStats:
    """BM25's inverse document frequencies of prompt stems, cached per store.

    A stem's document count comes from the word index (``WordIndex.documents``,
    about 0.25 ms a range at 100k memories on SQLite); it moves slowly, so a count
    is reused until the index has grown or shrunk by ``STALE_SHARE`` since it was read.
    """

    STALE_SHARE = 0.05
    MAX_ENTRIES = 50_000

    def __init__(self) -> None:
        self._counts: dict[tuple[str, str], tuple[int, float]] = {}

    def idf(self, words: WordIndex, stems: Sequence[str]) -> list[float]:
        """Each stem's inverse document frequency over the whole index."""
        rows = float(words.indexed_rows())
        return [
            math.log(1.0 + (rows - count + 0.5) / (count + 0.5))
            for count in (self._count(words, query, rows) for query in stems)
        ]

    def _count(self, words: WordIndex, query: str, rows: float) -> int:
        documents = 0
        for bounds in vocabulary_ranges(query):
            cached = self._counts.get(bounds)
            if cached is not None and abs(rows - cached[1]) <= self.STALE_SHARE * max(rows, 1):
                documents += cached[0]
                continue
            count = words.documents(*bounds)
            if len(self._counts) >= self.MAX_ENTRIES:
                self._counts.clear()
            self._counts[bounds] = (count, rows)
            documents += count
        return documents


def records(
    session: Session, tenant: str, user_id: str, found: Sequence[tuple[int, float]]
) -> list[tuple[MemoryRecord, float]]:
    """The user's memories for (id, score) pairs, in their order (gone ones left out).

    The owner is checked again on the memories themselves: an index's owner token
    is a hash."""
    if not found:
        return []
    memories = session.memories.by_ids(
        [memory_id for memory_id, _ in found], tenant_id=tenant, user_id=user_id
    )
    by_id = {memory.id: memory for memory in memories}
    return [(by_id[memory_id], value) for memory_id, value in found if memory_id in by_id]
