"""The memory operations the routes call: ``add_turn``, ``/memory/add``, recall, list,
status and forget; each a few calls on one storage session.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from memorysync_local._extraction.extractor import Extraction, Fact
from memorysync_local._extraction.rules import RuleBasedExtractor
from memorysync_local._plans import Caller
from memorysync_local._recall.ranking import TermStats, lexical_ranking, records
from memorysync_local._recall.vector_index import VectorIndex
from memorysync_local._recall.vectors import hybrid, prompt_vector
from memorysync_local._service.answers import hosted_memory, memory_item, recalled
from memorysync_local._service.facts import (
    FactContext,
    new_request_id,
    same_fact,
    scalar_metadata,
    text_hash,
)
from memorysync_local._service.operations import Operations
from memorysync_local._service.quota import Meter, QuotaExceeded
from memorysync_local._storage.interface import Session
from memorysync_local._storage.records import CURRENT, MemorySelection, ReadWindow
from memorysync_local._timeutil import REPLAY_WINDOW, render, utc_now

# Tells filler apart before a deciding extractor's background job is stored.
_RULES = RuleBasedExtractor()
# Recall re-ranks the best word-recall candidates; this many at least, whatever k is.
_MIN_CANDIDATES = 50


class Memories(Operations):
    """Writes and reads of memories, over one storage."""

    def _prepare(self) -> None:
        """The word statistics and, with an embedder, the vector index recall keeps."""
        self.term_stats = TermStats()
        embedder = self._facts.embedder
        self.vectors = VectorIndex(embedder.name) if embedder is not None else None

    # --- add_turn --------------------------------------------------------------

    def add_turn(
        self,
        caller: Caller,
        *,
        user_id: str,
        text: str,
        role: str,
        speaker: str | None,
        occurred_at: str | None,
        metadata: Mapping[str, Any] | None,
        source: str,
        replay_text: str | None = None,
    ) -> dict[str, Any]:
        """One turn to fact extraction: the ``add_turn`` answer (raises QuotaExceeded).

        ``replay_text`` is the text as sent (before a role prefix was removed): the
        replay rule compares what the client sent.
        """
        request_id = new_request_id()
        tenant = caller.tenant_id
        now = utc_now()
        scalars = scalar_metadata(metadata)
        session_id = scalars.get("session_id")
        ctx = FactContext(
            tenant_id=tenant,
            user_id=user_id,
            source=source,
            session_id=session_id if isinstance(session_id, str) else None,
            metadata={k: v for k, v in scalars.items() if k != "session_id"},
            origin="add_turn",
            request_id=request_id,
            said_at=occurred_at,
        )
        schedule = False
        with self._facts.write() as session:
            meter = self._quota.meter(session, caller)
            if meter == "ok":
                if role != "user":
                    status = "skipped_non_user_turn"
                elif not session.seeds.claim_turn(
                    tenant,
                    user_id,
                    speaker=speaker or "",
                    occurred_at=occurred_at or "",
                    text_hash=text_hash(replay_text if replay_text is not None else text),
                    request_id=request_id,
                    received_at=render(now),
                    window_start=render(now - REPLAY_WINDOW),
                ):
                    status = "skipped_replay"
                else:
                    status, schedule = self._extract_turn(session, text, ctx)
        if meter == "refused":
            raise QuotaExceeded(self._quota.retry_after())
        if meter == "silent":
            status = "skipped"
        if schedule:
            self._jobs.wake()
        processing = status == "distilling"
        return {
            "status": "processing" if processing else "ok",
            "processing_status": status,
            "request_id": request_id,
            "memory_id": None,
            "already_exists": status == "skipped_replay",
        }

    def _extract_turn(self, session: Session, text: str, ctx: FactContext) -> tuple[str, bool]:
        """Run (or schedule) extraction inside the write; (processing_status, schedule)."""
        if self.async_extraction and self._facts.wants_related:
            # A deciding (LLM) extractor runs once, in the job; the rules tell filler apart.
            if _RULES.extract(text).low_value:
                return "skipped_low_value", False
            self._jobs.store(session, text, ctx)
            return "distilling", True
        extraction = self._facts.extract(text, self._facts.related(session, ctx, text))
        if extraction.low_value:
            return "skipped_low_value", False
        if self.async_extraction:
            self._jobs.store(session, text, ctx)
            return "distilling", True
        if not extraction.facts and not extraction.retractions:
            return "skipped_low_value", False
        self._facts.apply(session, extraction, ctx)
        return "completed", False

    # --- /memory/add -----------------------------------------------------------

    def add_memory(
        self,
        caller: Caller,
        *,
        user_id: str,
        text: str,
        source: str | None,
        tags: Sequence[str] | None,
        importance: float | None,
        session_id: str | None,
        metadata: Mapping[str, Any] | None,
        client_ref: str | None,
        deduplicate: bool = False,
        verbatim: bool = False,
        occurred_at: str | None = None,
        speaker: str | None = None,
    ) -> dict[str, Any]:
        """Store the facts of an explicitly saved text; a memory object or a skipped answer.

        The memory object is the one ``GET /memory/{id}`` answers (``hosted_memory``,
        flat ``metadata``) plus ``memory_ids``, every id the text produced. With
        ``deduplicate``, a fact :func:`same_fact` as one the user already has in the
        same session is not stored again; a text whose every fact exists answers
        skipped with reason ``duplicate`` and the ids of the facts it repeats.
        ``verbatim`` stores ``text`` as one memory exactly as given: no extraction,
        no low-value filter (the caller decided it is worth keeping). ``occurred_at``
        (canonical UTC text) is when the text was said, kept as its memories' ``said_at``
        (else the time of writing); ``speaker``, who said it (recall's dialog rules).
        """
        tenant = caller.tenant_id
        scalars = scalar_metadata(metadata)
        if session_id is None and isinstance(scalars.get("session_id"), str):
            session_id = str(scalars["session_id"])
        ctx = FactContext(
            tenant_id=tenant,
            user_id=user_id,
            source=source,
            session_id=session_id,
            metadata={k: v for k, v in scalars.items() if k != "session_id"},
            origin="add",
            request_id=new_request_id(),
            said_at=occurred_at,
            speaker=speaker,
        )
        with self._facts.write() as session:
            if client_ref is not None:
                earlier = _claimed_ref(session, tenant, user_id, client_ref)
                if earlier is not None:
                    return _skipped("already_ingested", earlier)
            meter: Meter = self._quota.meter(session, caller)
            ids: list[int] = []
            repeated: list[int] = []
            if meter == "ok":
                if verbatim:
                    extraction = Extraction(facts=(Fact(text),))
                else:
                    extraction = self._facts.extract_explicit(text)
                if deduplicate:
                    fresh, repeated = _new_facts(session, extraction.facts, ctx)
                    extraction = replace(extraction, facts=tuple(fresh))
                ids = self._facts.apply(session, extraction, ctx)
                if tags is not None or importance is not None:
                    session.memories.label(ids, list(tags or []), importance)
                if client_ref is not None:
                    session.seeds.claim_ref(tenant, user_id, client_ref, ids or repeated)
            stored = session.memories.by_ids(ids)
        if meter == "refused":
            raise QuotaExceeded(self._quota.retry_after())
        if meter == "silent":
            return _skipped("plan_limit_reached", [])
        if not stored:
            if repeated:
                return _skipped("duplicate", repeated)
            return _skipped("no_high_value_content", [])
        first = hosted_memory(stored[0])
        first["memory_ids"] = ids
        return first

    # --- reads -----------------------------------------------------------------

    def search(
        self, tenant: str, user_id: str, prompt: str, k: int, window: ReadWindow = CURRENT
    ) -> list[dict[str, Any]]:
        """Word recall over the user's memories (``_recall.ranking``), ties to the newest;
        fused with recall by meaning (``_recall.vectors.hybrid``) when an embedder is set.
        Only the memories inside ``window`` are returned (current ones by default)."""
        limit = max(4 * k, _MIN_CANDIDATES)
        embedder = self._facts.embedder
        if embedder is not None and self.vectors is not None:
            # Embedded before the session: a remote embedder holds no snapshot open.
            probe = prompt_vector(embedder, prompt)
            with self._storage.read() as session:
                found = hybrid(
                    session, self.vectors, probe, tenant, user_id, prompt, limit, self.term_stats
                )
                return _first_admitted(session, tenant, user_id, found, k, window)
        with self._storage.read() as session:
            found = lexical_ranking(session, tenant, user_id, prompt, limit, self.term_stats)
            return _first_admitted(session, tenant, user_id, found, k, window)

    def list_memories(
        self, tenant: str, user_id: str, limit: int, offset: int, window: ReadWindow = CURRENT
    ) -> tuple[list[dict[str, Any]], int]:
        """Newest first; ``limit=0`` means all; the memories inside ``window`` only."""
        with self._storage.read() as session:
            found, total = session.memories.page(tenant, user_id, window, limit, offset)
        return [memory_item(memory) for memory in found], total

    def memory_status(self, tenant: str, memory_id: int) -> dict[str, Any] | None:
        """``{"memory_id", "status": "ready"}`` for a memory of the tenant; else None."""
        with self._storage.read() as session:
            found = session.memories.get(memory_id, tenant)
        return None if found is None else {"memory_id": memory_id, "status": "ready"}

    def memory_count(self, tenant: str) -> int:
        """How many memories the tenant has."""
        with self._storage.read() as session:
            return session.memories.count(tenant)

    # --- forget ----------------------------------------------------------------

    def forget(
        self,
        tenant: str,
        user_id: str,
        *,
        memory_ids: Sequence[int] | None,
        filters: Mapping[str, str] | None,
        dry_run: bool,
    ) -> list[int]:
        """Delete (or, dry run, list) the end user's matching memories; their ids."""
        given = filters or {}
        selection = MemorySelection(
            ids=None if memory_ids is None else tuple(memory_ids),
            session_id=given.get("session_id"),
            source=given.get("source"),
            before=given.get("before"),
            after=given.get("after"),
        )
        with self._facts.write() as session:
            return session.memories.delete(tenant, user_id, selection, dry_run=dry_run)


def _first_admitted(
    session: Session,
    tenant: str,
    user_id: str,
    ranked: Sequence[tuple[int, float]],
    k: int,
    window: ReadWindow,
) -> list[dict[str, Any]]:
    """The first ``k`` memories of ``ranked`` (ids best first) inside ``window``, as
    recall answers. The same fact told in two sessions is two memories: it is recalled
    once (the first). The answers are chosen on light rows (id, text, times: a page of
    4k at a time, one read for most recalls, as a repeated fact or a closed one takes a
    place); only the chosen ones are then read whole (one snapshot: the same session)."""
    chosen: dict[str, tuple[int, float]] = {}
    page = max(4 * k, 20)
    for start in range(0, len(ranked), page):
        part = ranked[start : start + page]
        stamps = {
            stamp.id: stamp
            for stamp in session.memories.stamps([i for i, _ in part], tenant, user_id)
        }
        for memory_id, value in part:
            stamp = stamps.get(memory_id)
            if stamp is None or not window.admits(stamp):
                continue
            chosen.setdefault(same_fact(stamp.text), (memory_id, value))
            if len(chosen) == k:
                break
        if len(chosen) >= k:
            break
    return [
        recalled(memory, value)
        for memory, value in records(session, tenant, user_id, list(chosen.values()))
    ]


def _new_facts(
    session: Session, facts: Sequence[Fact], ctx: FactContext
) -> tuple[list[Fact], list[int]]:
    """The facts not yet stored for the user in ``ctx``'s session (nor earlier in
    ``facts``), and the ids of the stored memories the others repeat."""
    known: dict[str, int | None] = {}
    for memory_id, text in session.memories.texts_in_session(
        ctx.tenant_id, ctx.user_id, ctx.session_id
    ):
        known.setdefault(same_fact(text), memory_id)
    fresh: list[Fact] = []
    repeated: list[int] = []
    for fact in facts:
        key = same_fact(fact.text)
        if key not in known:
            known[key] = None  # a repeat later in this text is not stored twice
            fresh.append(fact)
        elif (found := known[key]) is not None and found not in repeated:
            repeated.append(found)
    return fresh, repeated


def _claimed_ref(session: Session, tenant: str, user_id: str, client_ref: str) -> list[int] | None:
    """The memory ids an earlier add with ``client_ref`` stored, or None when it is free.

    A ref whose memories were all deleted since is free again (and forgotten): the
    same add then stores its text anew, as an import of a deleted memory expects.
    """
    ids = session.seeds.claimed_ref(tenant, user_id, client_ref)
    if ids is None:
        return None
    if not ids or session.memories.by_ids(ids):
        return ids
    session.seeds.release_ref(tenant, user_id, client_ref)
    return None


def _skipped(reason: str, ids: list[int]) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason, "memory_ids": ids}
