"""Turning an extraction into stored memories: the facts' context, supersession and
retraction in the caller's write, and their vectors after it commits.

:class:`FactWriter` is shared by every path that stores facts (``add_turn``,
``/memory/add``, transcript extraction and background jobs), so each applies the
same rules: retractions first, then the facts, each superseding what it replaces.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from memorysync_local._extraction.dates import resolve_dates
from memorysync_local._extraction.extractor import (
    Extraction,
    Extractor,
    Fact,
    RelatedMemory,
    declared,
)
from memorysync_local._recall.embedding import Embedder
from memorysync_local._recall.ranking import lexical_ranking, records
from memorysync_local._recall.vectors import store_vectors
from memorysync_local._service.validity import retract, supersede
from memorysync_local._storage.interface import Session, Storage
from memorysync_local._storage.records import NewMemory
from memorysync_local._timeutil import parse_iso, render, utc_now

logger = logging.getLogger("memorysync.local")


@dataclass(frozen=True)
class FactContext:
    """Where facts came from: copied onto every memory they become."""

    tenant_id: str
    user_id: str
    source: str | None
    session_id: str | None
    metadata: Mapping[str, Any]
    origin: str
    request_id: str
    history_id: int | None = None
    # When the user said it (the turn's occurred_at); None: when it is written.
    said_at: str | None = None
    # Who said it, when the caller says so (recall's dialog rules read it).
    speaker: str | None = None


def new_request_id() -> str:
    """A fresh request id (``req_`` and 24 hex digits)."""
    return f"req_{secrets.token_hex(12)}"


def text_hash(text: str) -> str:
    """SHA-256 of a text, hex (what replay and retry rules compare)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def scalar_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The scalar values of client metadata (what is copied onto facts)."""
    if not metadata:
        return {}
    return {
        str(key): value
        for key, value in metadata.items()
        if isinstance(value, (str, int, float, bool)) and not isinstance(value, complex)
    }


def same_fact(text: str) -> str:
    """What two fact texts share when they state the same fact: the text case-folded,
    its whitespace runs made single spaces (``Works as a  Nurse`` = ``works as a nurse``)."""
    return " ".join(text.casefold().split())


def _not_current(session: Session, ctx: FactContext, facts: Sequence[Fact]) -> list[Fact]:
    """The facts that are not, word for word (:func:`same_fact`), a current memory of the
    user in the same session, nor said twice here: the same fact said three times in a
    conversation is one memory. Another session keeps its own copy, so clearing one
    session never removes a fact the user also said in another (recall shows it once)."""
    fresh: list[Fact] = []
    seen: set[str] = set()
    for fact in facts:
        key = same_fact(fact.text)
        if key in seen:
            continue
        seen.add(key)
        ranked = lexical_ranking(session, ctx.tenant_id, ctx.user_id, fact.text, 10)
        found = records(session, ctx.tenant_id, ctx.user_id, ranked)
        if not any(
            m.valid_until is None and m.session_id == ctx.session_id and same_fact(m.text) == key
            for m, _ in found
        ):
            fresh.append(fact)
    return fresh


class FactWriter:
    """Stores extractions as memories; owns the extractor and the embedder.

    Example (loading facts straight into a store, as the benchmark does):
        ```python
        with facts.write() as session:
            facts.insert(session, [Fact("Lives in Porto")], context)
        ```
    """

    def __init__(self, storage: Storage, extractor: Extractor, embedder: Embedder | None) -> None:
        self.storage = storage
        # Checked once here: an extractor to the older signature is adapted.
        self.extractor = declared(extractor)
        self.embedder = embedder
        # The facts a thread's current write() stored, to embed after it commits.
        self._unembedded = threading.local()

    @property
    def wants_related(self) -> bool:
        """Whether the extractor declares it is shown the user's related memories."""
        return self.extractor.features.related_memories

    @contextmanager
    def write(self) -> Iterator[Session]:
        """``_storage.write()``; then the facts it stored are embedded, after the commit.

        A slow embedder (a remote endpoint) thus never holds the write lock. Facts
        stored by a transaction that rolls back are not embedded.
        """
        rows: list[tuple[int, str]] = []
        self._unembedded.rows = rows if self.embedder is not None else None
        try:
            with self.storage.write() as session:
                yield session
        finally:
            self._unembedded.rows = None
        if self.embedder is not None and rows:
            try:
                store_vectors(self.storage, self.embedder, rows)
            except Exception:  # the facts are kept; the next start's backfill embeds them
                logger.warning("the embedder failed; facts stored without vectors", exc_info=True)

    def insert(self, session: Session, facts: Sequence[Fact], ctx: FactContext) -> list[int]:
        """Store ``facts`` as memories of ``ctx``'s user (each superseding what it
        replaces); their ids."""
        created_at = render(utc_now())
        said_at = ctx.said_at or created_at
        metadata = dict(ctx.metadata)
        if ctx.session_id is not None:
            metadata["session_id"] = ctx.session_id
        ids = []
        for fact in facts:
            memory_id = session.memories.insert(
                NewMemory(
                    tenant_id=ctx.tenant_id,
                    user_id=ctx.user_id,
                    text=fact.text,
                    kind=fact.kind,
                    source=ctx.source,
                    session_id=ctx.session_id,
                    metadata=metadata,
                    origin=ctx.origin,
                    history_id=ctx.history_id,
                    request_id=ctx.request_id,
                    created_at=created_at,
                    said_at=said_at,
                    attribute=fact.attribute,
                    speaker=ctx.speaker,
                )
            )
            ids.append(memory_id)
            supersede(
                session.memories,
                ctx.tenant_id,
                ctx.user_id,
                memory_id,
                fact.attribute,
                said_at,
                fact.replaces,
            )
        unembedded = getattr(self._unembedded, "rows", None)
        if unembedded is not None:
            unembedded.extend(zip(ids, (fact.text for fact in facts), strict=True))
        return ids

    def apply(self, session: Session, extraction: Extraction, ctx: FactContext) -> list[int]:
        """Close what the extraction's retractions deny, then store its facts; their ids.

        A fact's relative dates are resolved against when it was said. A fact extracted
        from a turn that the user already has as a current memory of the same session,
        word for word, is not stored again (the turn stays in the transcript); an explicit
        add (origin ``add``) keeps its own ``deduplicate`` choice.
        """
        said_at = ctx.said_at or render(utc_now())
        for retraction in extraction.retractions:
            retract(session.memories, ctx.tenant_id, ctx.user_id, retraction, said_at)
        said = parse_iso(said_at).date()
        facts = [
            replace(fact, text=resolve_dates(fact.text, said)) if fact.dated else fact
            for fact in extraction.facts
        ]
        if ctx.origin != "add":  # an explicit add has its own ``deduplicate`` choice
            facts = _not_current(session, ctx, facts)
        return self.insert(session, facts, ctx)

    def related(self, session: Session, ctx: FactContext, text: str) -> list[RelatedMemory]:
        """For an extractor that declares ``related_memories``: the user's current
        memories that match the turn's words, then their newest, at most 20."""
        if not self.wants_related:
            return []
        ranked = lexical_ranking(session, ctx.tenant_id, ctx.user_id, text, 20)
        found = [memory for memory, _ in records(session, ctx.tenant_id, ctx.user_id, ranked)]
        found += session.memories.latest_said_current(ctx.tenant_id, ctx.user_id, 20)
        related: dict[int, RelatedMemory] = {}
        for memory in found:
            if memory.valid_until is None:
                related.setdefault(memory.id, RelatedMemory(memory.id, memory.text))
        return list(related.values())[:20]

    def extract(self, text: str, related: Sequence[RelatedMemory] = ()) -> Extraction:
        """The extractor's facts in a turn (none, logged, when it fails)."""
        try:
            return self.extractor.extract(text, related=related)
        except Exception:
            logger.exception("the extractor failed; the turn stores nothing")
            return Extraction()

    def extract_explicit(self, text: str) -> Extraction:
        """The facts of an explicitly saved text (none, logged, when the extractor fails)."""
        try:
            return self.extractor.extract(text, explicit=True)
        except Exception:
            logger.exception("the extractor failed; the text stores nothing")
            return Extraction()
