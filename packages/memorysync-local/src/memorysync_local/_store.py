"""Every read and write the routes make, each in one SQLite transaction.

Nothing here knows about HTTP: the routes validate input, call one method,
and shape the answer. Rows are always filtered by (tenant_id, user_id), so no
call reads or deletes another tenant's or another end user's rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

from memorysync_local._db import HISTORY_ID_BASE, Database
from memorysync_local._embedding import Embedder
from memorysync_local._extract import Extraction, Extractor, Fact, RuleBasedExtractor
from memorysync_local._jobs import JobRunner
from memorysync_local._llm_extract import RelatedMemory
from memorysync_local._plans import Caller
from memorysync_local._recall import TermStats, lexical
from memorysync_local._timeutil import (
    REPLAY_WINDOW,
    month_key,
    render,
    rendered_micros,
    seconds_until_next_month,
    utc_now,
)
from memorysync_local._validity import CURRENT, ReadWindow, retract, supersede, validity_fields
from memorysync_local._vector_index import VectorIndex
from memorysync_local._vectors import backfill_vectors, hybrid, store_vectors

logger = logging.getLogger("memorysync.local")

Meter = Literal["ok", "silent", "refused"]
# How long close() lets background extraction drain before leaving the rest stored.
DRAIN_SECONDS = 5.0
# Tells filler apart before a deciding extractor's background job is stored.
_RULES = RuleBasedExtractor()
# Recall re-ranks the best BM25 candidates; this many at least, whatever k is.
_MIN_CANDIDATES = 50


class QuotaExceeded(Exception):
    """An evaluation key is over its monthly limit (answered as a 429)."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(f"monthly add limit reached; retry after {retry_after} seconds")
        self.retry_after = retry_after


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


def new_request_id() -> str:
    return f"req_{secrets.token_hex(12)}"


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def history_public_id(rowid: int) -> str:
    return f"h_{HISTORY_ID_BASE + rowid}"


def history_rowid(public: str | int) -> int | None:
    """``h_1000000000001`` or ``1000000000001`` -> rowid 1; None when it cannot be ours."""
    raw = public[2:] if isinstance(public, str) and public.startswith("h_") else public
    try:
        number = int(raw)
    except (TypeError, ValueError):
        return None
    rowid = number - HISTORY_ID_BASE
    return rowid if 0 < rowid < 2**63 else None


def scalar_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    """The scalar values of client metadata (what is copied onto facts)."""
    if not metadata:
        return {}
    return {
        str(key): value
        for key, value in metadata.items()
        if isinstance(value, (str, int, float, bool)) and not isinstance(value, complex)
    }


class Store:
    """The server's state: one :class:`Database` plus the extractor and its runner."""

    def __init__(
        self,
        db_path: str,
        extractor: Extractor,
        *,
        async_extraction: bool = False,
        embedder: Embedder | None = None,
    ) -> None:
        self.db = Database(db_path)
        self._term_stats = TermStats()
        # Recall by meaning (the semantic extra) when set; lexical recall when None.
        self.embedder = embedder
        # The facts a thread's current _write() stored, to embed after it commits.
        self._unembedded = threading.local()
        self._vectors = VectorIndex(embedder.name) if embedder is not None else None
        if embedder is not None:
            self._backfill_vectors(embedder)
        self.extractor = extractor
        self.async_extraction = async_extraction
        self._jobs = JobRunner(self._run_next_job)
        self._closing = threading.Lock()
        with self.db.connection() as conn:
            left = int(conn.execute("SELECT COUNT(*) FROM extraction_jobs").fetchone()[0])
        if left:
            # Turns acknowledged before the last stop (or crash) whose facts are not in.
            logger.info("resuming %d stored extraction job(s)", left)
            self._jobs.wake()

    def _backfill_vectors(self, embedder: Embedder) -> None:
        """Embed the memories stored without a vector (an upgrade, another model)."""
        try:
            with self.db.connection() as conn:
                done = backfill_vectors(conn, embedder)
        except Exception as exc:  # start serving anyway: the rest is filled next start
            logger.warning("embedding stored memories stopped (%s); next start continues", exc)
            return
        if done:
            logger.info("embedded %d stored memories with %s", done, embedder.name)

    # --- lifecycle -------------------------------------------------------------

    def close(self, drain_timeout: float = DRAIN_SECONDS) -> None:
        """Let background extraction drain (at most ``drain_timeout`` s), then close the
        database; jobs not done stay stored and resume at the next start. Idempotent."""
        with self._closing:
            if not self.db.closed:
                self._jobs.stop(drain_timeout)
                self.db.close()

    def wait_for_extraction(self, timeout: float | None = None) -> bool:
        """Block until no background extraction is stored or running; False on timeout."""
        return self._jobs.wait_idle(timeout)

    # --- plans -----------------------------------------------------------------

    def _meter(self, conn: sqlite3.Connection, caller: Caller) -> Meter:
        """Count one add; say whether it is within the plan."""
        month = month_key(utc_now())
        conn.execute(
            "INSERT OR IGNORE INTO usage (key_id, month) VALUES (?, ?)", (caller.key_id, month)
        )
        plan = caller.plan
        if plan is not None:
            row = conn.execute(
                "SELECT adds FROM usage WHERE key_id = ? AND month = ?", (caller.key_id, month)
            ).fetchone()
            if int(row["adds"]) >= plan.monthly_limit:
                conn.execute(
                    "UPDATE usage SET refused = refused + 1 WHERE key_id = ? AND month = ?",
                    (caller.key_id, month),
                )
                return "silent" if plan.mode == "free" else "refused"
        conn.execute(
            "UPDATE usage SET adds = adds + 1 WHERE key_id = ? AND month = ?",
            (caller.key_id, month),
        )
        return "ok"

    def over_limit(self, caller: Caller) -> bool:
        """True once an add was refused this month (reads then come back empty / 429)."""
        if caller.plan is None:
            return False
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT refused FROM usage WHERE key_id = ? AND month = ?",
                (caller.key_id, month_key(utc_now())),
            ).fetchone()
        return bool(row and int(row["refused"]) > 0)

    @staticmethod
    def retry_after() -> int:
        return seconds_until_next_month(utc_now())

    def usage(self, caller: Caller) -> tuple[int, int]:
        """(adds, refused) this month for a caller."""
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT adds, refused FROM usage WHERE key_id = ? AND month = ?",
                (caller.key_id, month_key(utc_now())),
            ).fetchone()
        return (int(row["adds"]), int(row["refused"])) if row else (0, 0)

    # --- facts -----------------------------------------------------------------

    def _insert_facts(
        self, conn: sqlite3.Connection, facts: Sequence[Fact], ctx: FactContext
    ) -> list[int]:
        created_at = render(utc_now())
        said_at = ctx.said_at or created_at
        metadata = dict(ctx.metadata)
        if ctx.session_id is not None:
            metadata["session_id"] = ctx.session_id
        ids = []
        for fact in facts:
            cursor = conn.execute(
                "INSERT INTO memories (tenant_id, user_id, text, kind, source, session_id, "
                "metadata, origin, history_id, request_id, created_at, said_at, attribute) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    ctx.tenant_id,
                    ctx.user_id,
                    fact.text,
                    fact.kind,
                    ctx.source,
                    ctx.session_id,
                    json.dumps(metadata, ensure_ascii=False),
                    ctx.origin,
                    ctx.history_id,
                    ctx.request_id,
                    created_at,
                    said_at,
                    fact.attribute,
                ),
            )
            ids.append(int(cursor.lastrowid or 0))
            supersede(
                conn, ctx.tenant_id, ctx.user_id, ids[-1], fact.attribute, said_at, fact.replaces
            )
        unembedded = getattr(self._unembedded, "rows", None)
        if unembedded is not None:
            unembedded.extend(zip(ids, (fact.text for fact in facts), strict=True))
        return ids

    def _apply(
        self, conn: sqlite3.Connection, extraction: Extraction, ctx: FactContext
    ) -> list[int]:
        """Close what the extraction's retractions deny, then store its facts; their ids."""
        said_at = ctx.said_at or render(utc_now())
        for retraction in extraction.retractions:
            retract(conn, ctx.tenant_id, ctx.user_id, retraction, said_at)
        return self._insert_facts(conn, extraction.facts, ctx)

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """``db.write()``; then the facts it stored are embedded, after the commit.

        A slow embedder (a remote endpoint) thus never holds the write lock. Facts
        stored by a transaction that rolls back are not embedded.
        """
        rows: list[tuple[int, str]] = []
        self._unembedded.rows = rows if self.embedder is not None else None
        try:
            with self.db.write() as conn:
                yield conn
        finally:
            self._unembedded.rows = None
        if self.embedder is not None and rows:
            try:
                with self.db.connection() as conn:
                    store_vectors(conn, self.embedder, rows)
            except Exception:  # the facts are kept; the next start's backfill embeds them
                logger.warning("the embedder failed; facts stored without vectors", exc_info=True)

    @staticmethod
    def _store_job(conn: sqlite3.Connection, text: str, ctx: FactContext) -> None:
        """Store an extraction job in the caller's transaction (``async_extraction``):
        it commits with the turn it comes from, or not at all."""
        conn.execute(
            "INSERT INTO extraction_jobs (text, context, created_at) VALUES (?, ?, ?)",
            (text, json.dumps(asdict(ctx), ensure_ascii=False), render(utc_now())),
        )

    def _run_next_job(self) -> bool:
        """Do the oldest stored job; False when there is none.

        The extractor runs outside any transaction; its facts are inserted and the
        job deleted in one, so a crash in between redoes the job and never stores
        its facts twice.
        """
        with self.db.connection() as conn:
            job = conn.execute(
                "SELECT id, text, context FROM extraction_jobs ORDER BY id LIMIT 1"
            ).fetchone()
        if job is None:
            return False
        ctx = FactContext(**json.loads(job["context"]))
        with self.db.connection() as conn:
            related = self._related(conn, ctx, str(job["text"]))
        extraction = self._extract(str(job["text"]), related)
        with self._write() as conn:
            if conn.execute("DELETE FROM extraction_jobs WHERE id = ?", (job["id"],)).rowcount:
                # A turn deleted meanwhile (with its facts) gets none afterwards.
                turn_gone = ctx.history_id is not None and (
                    conn.execute("SELECT 1 FROM history WHERE id = ?", (ctx.history_id,)).fetchone()
                    is None
                )
                if not turn_gone:
                    self._apply(conn, extraction, ctx)
        return True

    def _related(
        self, conn: sqlite3.Connection, ctx: FactContext, text: str
    ) -> list[RelatedMemory]:
        """For an extractor that decides updates (``wants_related``): the user's current
        memories that match the turn's words, then their newest, at most 20."""
        if not getattr(self.extractor, "wants_related", False):
            return []
        found = [row for row, _ in lexical(conn, ctx.tenant_id, ctx.user_id, text, 20)]
        found += conn.execute(
            "SELECT * FROM memories WHERE tenant_id = ? AND user_id = ? AND valid_until IS NULL "
            "ORDER BY said_at DESC, id DESC LIMIT 20",
            (ctx.tenant_id, ctx.user_id),
        ).fetchall()
        related: dict[int, RelatedMemory] = {}
        for row in found:
            if row["valid_until"] is None:
                related.setdefault(int(row["id"]), RelatedMemory(int(row["id"]), str(row["text"])))
        return list(related.values())[:20]

    def _extract(self, text: str, related: Sequence[RelatedMemory] = ()) -> Extraction:
        try:
            if getattr(self.extractor, "wants_related", False):
                return self.extractor.extract(text, related=related)  # type: ignore[call-arg]
            return self.extractor.extract(text)
        except Exception:
            logger.exception("the extractor failed; the turn stores nothing")
            return Extraction()

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
        session = scalars.get("session_id")
        ctx = FactContext(
            tenant_id=tenant,
            user_id=user_id,
            source=source,
            session_id=session if isinstance(session, str) else None,
            metadata={k: v for k, v in scalars.items() if k != "session_id"},
            origin="add_turn",
            request_id=request_id,
            said_at=occurred_at,
        )
        schedule = False
        with self._write() as conn:
            meter = self._meter(conn, caller)
            if meter == "ok":
                if role != "user":
                    status = "skipped_non_user_turn"
                else:
                    key = (
                        tenant,
                        user_id,
                        speaker or "",
                        occurred_at or "",
                        text_hash(replay_text if replay_text is not None else text),
                    )
                    replay = conn.execute(
                        "SELECT request_id FROM turn_receipts WHERE tenant_id = ? AND user_id = ? "
                        "AND speaker = ? AND occurred_at = ? AND text_hash = ? "
                        "AND received_at >= ? LIMIT 1",
                        (*key, render(now - REPLAY_WINDOW)),
                    ).fetchone()
                    if replay is not None:
                        status = "skipped_replay"
                    else:
                        conn.execute(
                            "INSERT INTO turn_receipts (tenant_id, user_id, speaker, occurred_at,"
                            " text_hash, request_id, received_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (*key, request_id, render(now)),
                        )
                        status, schedule = self._extract_turn(conn, text, ctx)
        if meter == "refused":
            raise QuotaExceeded(self.retry_after())
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

    def _extract_turn(
        self, conn: sqlite3.Connection, text: str, ctx: FactContext
    ) -> tuple[str, bool]:
        """Run (or schedule) extraction inside the write; (processing_status, schedule)."""
        if self.async_extraction and getattr(self.extractor, "wants_related", False):
            # A deciding (LLM) extractor runs once, in the job; the rules tell filler apart.
            if _RULES.extract(text).low_value:
                return "skipped_low_value", False
            self._store_job(conn, text, ctx)
            return "distilling", True
        extraction = self._extract(text, self._related(conn, ctx, text))
        if extraction.low_value:
            return "skipped_low_value", False
        if self.async_extraction:
            self._store_job(conn, text, ctx)
            return "distilling", True
        if not extraction.facts and not extraction.retractions:
            return "skipped_low_value", False
        self._apply(conn, extraction, ctx)
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
    ) -> dict[str, Any]:
        """Store the facts of an explicitly saved text; a memory object or a skipped answer.

        The memory object is the one ``GET /memory/{id}`` answers (:func:`hosted_memory`,
        flat ``metadata``) plus ``memory_ids``, every id the text produced. With
        ``deduplicate``, a fact :func:`same_fact` as one the user already has in the
        same session is not stored again; a text whose every fact exists answers
        skipped with reason ``duplicate`` and the ids of the facts it repeats.
        ``verbatim`` stores ``text`` as one memory exactly as given: no extraction,
        no low-value filter (the caller decided it is worth keeping).
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
        )
        with self._write() as conn:
            if client_ref is not None:
                earlier = _claimed_ref(conn, tenant, user_id, client_ref)
                if earlier is not None:
                    return _skipped("already_ingested", earlier)
            meter = self._meter(conn, caller)
            ids: list[int] = []
            repeated: list[int] = []
            if meter == "ok":
                if verbatim:
                    extraction = Extraction(facts=(Fact(text),))
                else:
                    extraction = self._extract_explicit(text)
                if deduplicate:
                    fresh, repeated = _new_facts(conn, extraction.facts, ctx)
                    extraction = replace(extraction, facts=tuple(fresh))
                ids = self._apply(conn, extraction, ctx)
                if tags is not None or importance is not None:
                    conn.executemany(
                        "UPDATE memories SET tags = ?, importance = ? WHERE id = ?",
                        [(json.dumps(list(tags or [])), importance, i) for i in ids],
                    )
                if client_ref is not None:
                    conn.execute(
                        "INSERT INTO client_refs (tenant_id, user_id, client_ref, memory_ids) "
                        "VALUES (?, ?, ?, ?)",
                        (tenant, user_id, client_ref, json.dumps(ids or repeated)),
                    )
            rows = _fetch_memories(conn, ids)
        if meter == "refused":
            raise QuotaExceeded(self.retry_after())
        if meter == "silent":
            return _skipped("plan_limit_reached", [])
        if not rows:
            if repeated:
                return _skipped("duplicate", repeated)
            return _skipped("no_high_value_content", [])
        first = hosted_memory(rows[0])
        first["memory_ids"] = ids
        return first

    def _extract_explicit(self, text: str) -> Extraction:
        try:
            return self.extractor.extract(text, explicit=True)
        except Exception:
            logger.exception("the extractor failed; the text stores nothing")
            return Extraction()

    # --- reads -----------------------------------------------------------------

    def search(
        self, tenant: str, user_id: str, prompt: str, k: int, window: ReadWindow = CURRENT
    ) -> list[dict[str, Any]]:
        """Word-form recall over the user's memories (``_recall``), ties to the newest;
        fused with recall by meaning (``_vectors.hybrid``) when an embedder is set.
        Only the memories inside ``window`` are returned (current ones by default)."""
        with self.db.connection() as conn:
            limit = max(4 * k, _MIN_CANDIDATES)
            if self.embedder is not None and self._vectors is not None:
                fused = hybrid(
                    conn,
                    self.embedder,
                    self._vectors,
                    tenant,
                    user_id,
                    prompt,
                    limit,
                    self._term_stats,
                )
                return _unique(window.keep(_recalled(row, value) for row, value in fused))[:k]
            found = lexical(conn, tenant, user_id, prompt, limit, self._term_stats)
        # In ``lexical``'s order: best score first, ties already broken there.
        return _unique(window.keep(_recalled(row, value) for row, value in found))[:k]

    def list_memories(
        self, tenant: str, user_id: str, limit: int, offset: int, window: ReadWindow = CURRENT
    ) -> tuple[list[dict[str, Any]], int]:
        """Newest first; ``limit=0`` means all; the memories inside ``window`` only."""
        extra, params = window.sql()
        where = f"tenant_id = ? AND user_id = ?{extra}"
        with self.db.connection() as conn:
            total = int(
                conn.execute(
                    f"SELECT COUNT(*) FROM memories WHERE {where}", (tenant, user_id, *params)
                ).fetchone()[0]
            )
            rows = conn.execute(
                f"SELECT * FROM memories WHERE {where} "
                "ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?",
                (tenant, user_id, *params, limit if limit > 0 else -1, offset),
            ).fetchall()
        return [memory_item(row) for row in rows], total

    def memory_status(self, tenant: str, memory_id: int) -> dict[str, Any] | None:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT id FROM memories WHERE id = ? AND tenant_id = ?", (memory_id, tenant)
            ).fetchone()
        return None if row is None else {"memory_id": memory_id, "status": "ready"}

    def memory_count(self, tenant: str) -> int:
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM memories WHERE tenant_id = ?", (tenant,)
            ).fetchone()
        return int(row[0])

    def created_at(self) -> str:
        with self.db.connection() as conn:
            row = conn.execute("SELECT value FROM meta WHERE key = 'created_at'").fetchone()
        return str(row[0])

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
        clauses = ["tenant_id = ?", "user_id = ?"]
        params: list[Any] = [tenant, user_id]
        if memory_ids is not None:
            clauses.append(f"id IN ({', '.join('?' * len(memory_ids))})")
            params.extend(memory_ids)
        else:
            for name, clause in (
                ("session_id", "session_id = ?"),
                ("source", "source = ?"),
                ("before", "created_at < ?"),
                ("after", "created_at > ?"),
            ):
                if filters and filters.get(name) is not None:
                    clauses.append(clause)
                    params.append(filters[name])
        where = " AND ".join(clauses)
        with self._write() as conn:
            ids = [
                int(row[0])
                for row in conn.execute(
                    f"SELECT id FROM memories WHERE {where} ORDER BY id", params
                ).fetchall()
            ]
            if ids and not dry_run:
                conn.execute(f"DELETE FROM memories WHERE {where}", params)
        return ids

    # --- history ---------------------------------------------------------------

    def append_history(
        self,
        caller: Caller,
        *,
        user_id: str,
        session_id: str,
        source: str,
        turns: Sequence[Mapping[str, Any]],
        extract: bool,
        metadata: Mapping[str, Any] | None,
    ) -> dict[str, Any]:
        """Store turns verbatim (idempotently); send new user turns to extraction."""
        tenant = caller.tenant_id
        scalars = {k: v for k, v in scalar_metadata(metadata).items() if k != "session_id"}
        scheduled = False
        request_ids: list[str] = []
        with self._write() as conn:
            existing = [self._find_turn(conn, tenant, user_id, session_id, t) for t in turns]
            if all(row is not None for row in existing):
                return {
                    "items": [history_item(row, created=False) for row in existing if row],
                    "request_ids": [],
                    "status": "ok",
                }
            meter = self._meter(conn, caller)
            items: list[dict[str, Any]] = []
            if meter == "ok":
                created_at = render(utc_now())
                for turn in turns:
                    row = self._find_turn(conn, tenant, user_id, session_id, turn)
                    if row is not None:
                        items.append(history_item(row, created=False))
                        continue
                    row = self._insert_turn(
                        conn, tenant, user_id, session_id, source, turn, created_at
                    )
                    items.append(history_item(row, created=True))
                    if extract and row["role"] == "user" and row["content"].strip():
                        ctx = FactContext(
                            tenant_id=tenant,
                            user_id=user_id,
                            source=source,
                            session_id=session_id,
                            metadata=scalars,
                            origin="history",
                            request_id=new_request_id(),
                            history_id=int(row["id"]),
                            said_at=row["occurred_at"],
                        )
                        request_ids.append(ctx.request_id)
                        if self.async_extraction:
                            self._store_job(conn, str(row["content"]), ctx)
                            scheduled = True
                        else:
                            content = str(row["content"])
                            related = self._related(conn, ctx, content)
                            self._apply(conn, self._extract(content, related), ctx)
        if meter == "refused":
            raise QuotaExceeded(self.retry_after())
        if meter == "silent":
            return {"items": [], "request_ids": [], "status": "skipped"}
        if scheduled:
            self._jobs.wake()
        return {"items": items, "request_ids": request_ids, "status": "ok"}

    @staticmethod
    def _find_turn(
        conn: sqlite3.Connection,
        tenant: str,
        user_id: str,
        session_id: str,
        turn: Mapping[str, Any],
    ) -> sqlite3.Row | None:
        scope = (tenant, user_id, session_id)
        if turn.get("idempotency_key") is not None:
            row: sqlite3.Row | None = conn.execute(
                "SELECT * FROM history WHERE tenant_id = ? AND user_id = ? AND session_id = ? "
                "AND idempotency_key = ?",
                (*scope, turn["idempotency_key"]),
            ).fetchone()
            if row is not None:
                return row
        if turn.get("seq") is not None:
            # The contract's rule, applied literally: the same seq + role + content in
            # the same scope is the same turn, even when the idempotency keys differ.
            row = conn.execute(
                "SELECT * FROM history WHERE tenant_id = ? AND user_id = ? AND session_id = ? "
                "AND seq = ? AND role = ? AND content_hash = ? ORDER BY id LIMIT 1",
                (*scope, turn["seq"], turn["role"], text_hash(turn["content"])),
            ).fetchone()
            return row
        return None

    @staticmethod
    def _insert_turn(
        conn: sqlite3.Connection,
        tenant: str,
        user_id: str,
        session_id: str,
        source: str,
        turn: Mapping[str, Any],
        created_at: str,
    ) -> sqlite3.Row:
        payload = turn.get("payload")
        cursor = conn.execute(
            "INSERT INTO history (tenant_id, user_id, session_id, source, role, content, "
            "content_hash, seq, occurred_at, payload, idempotency_key, created_at, sort_key) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                tenant,
                user_id,
                session_id,
                source,
                turn["role"],
                turn["content"],
                text_hash(turn["content"]),
                turn.get("seq"),
                turn.get("occurred_at"),
                None if payload is None else json.dumps(payload, ensure_ascii=False),
                turn.get("idempotency_key"),
                created_at,
                sort_key(turn.get("seq"), turn.get("occurred_at"), created_at),
            ),
        )
        row: sqlite3.Row = conn.execute(
            "SELECT * FROM history WHERE id = ?", (cursor.lastrowid,)
        ).fetchone()
        return row

    def list_history(
        self, tenant: str, user_id: str, session_id: str, source: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """In conversation order (:func:`sort_key`, then arrival); ``limit`` keeps the latest N."""
        where = "tenant_id = ? AND user_id = ? AND session_id = ?"
        params: list[Any] = [tenant, user_id, session_id]
        if source is not None:
            where += " AND source = ?"
            params.append(source)
        with self.db.connection() as conn:
            total = int(
                conn.execute(f"SELECT COUNT(*) FROM history WHERE {where}", params).fetchone()[0]
            )
            # Newest first along the index, so the latest N are read without the rest.
            rows = conn.execute(
                f"SELECT * FROM history WHERE {where} ORDER BY sort_key DESC, id DESC LIMIT ?",
                (*params, limit if limit > 0 else -1),
            ).fetchall()
        rows.reverse()
        return [history_item(row) for row in rows], total

    def delete_history(
        self,
        tenant: str,
        user_id: str,
        *,
        session_id: str | None,
        ids: Sequence[str | int] | None,
        source: str | None,
        delete_derived_facts: bool,
    ) -> dict[str, list[str]]:
        """Delete turns by session or ids (and, optionally, the facts drawn from them)."""
        where = "tenant_id = ? AND user_id = ?"
        params: list[Any] = [tenant, user_id]
        if session_id is not None:
            where += " AND session_id = ?"
            params.append(session_id)
        else:
            rowids = [r for r in (history_rowid(i) for i in ids or ()) if r is not None]
            if not rowids:
                return {"deleted_ids": [], "deleted_fact_ids": []}
            where += f" AND id IN ({', '.join('?' * len(rowids))})"
            params.extend(rowids)
        if source is not None:
            where += " AND source = ?"
            params.append(source)
        with self._write() as conn:
            turn_ids = [
                int(r[0])
                for r in conn.execute(f"SELECT id FROM history WHERE {where} ORDER BY id", params)
            ]
            fact_ids: list[int] = []
            if turn_ids:
                marks = ", ".join("?" * len(turn_ids))
                if delete_derived_facts:
                    fact_ids = [
                        int(r[0])
                        for r in conn.execute(
                            f"SELECT id FROM memories WHERE tenant_id = ? AND user_id = ? "
                            f"AND history_id IN ({marks}) ORDER BY id",
                            (tenant, user_id, *turn_ids),
                        )
                    ]
                    conn.execute(
                        f"DELETE FROM memories WHERE tenant_id = ? AND user_id = ? "
                        f"AND history_id IN ({marks})",
                        (tenant, user_id, *turn_ids),
                    )
                conn.execute(f"DELETE FROM history WHERE id IN ({marks})", turn_ids)
        return {
            "deleted_ids": [history_public_id(i) for i in turn_ids],
            "deleted_fact_ids": [f"m_{i}" for i in fact_ids],
        }


def _recalled(row: sqlite3.Row, value: float) -> dict[str, Any]:
    item = memory_item(row)
    item["value"] = item["text"]
    item["score"] = value
    return item


def _unique(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same fact told in two sessions is two memories; recall it once (the first)."""
    unique: dict[str, dict[str, Any]] = {}
    for item in items:
        unique.setdefault(same_fact(item["text"]), item)
    return list(unique.values())


def same_fact(text: str) -> str:
    """What two fact texts share when they state the same fact: the text case-folded,
    its whitespace runs made single spaces (``Works as a  Nurse`` = ``works as a nurse``)."""
    return " ".join(text.casefold().split())


def _new_facts(
    conn: sqlite3.Connection, facts: Sequence[Fact], ctx: FactContext
) -> tuple[list[Fact], list[int]]:
    """The facts not yet stored for the user in ``ctx``'s session (nor earlier in
    ``facts``), and the ids of the stored memories the others repeat."""
    rows = conn.execute(
        "SELECT id, text FROM memories WHERE tenant_id = ? AND user_id = ? "
        "AND session_id IS ? ORDER BY id",
        (ctx.tenant_id, ctx.user_id, ctx.session_id),
    ).fetchall()
    known: dict[str, int | None] = {}
    for row in rows:
        known.setdefault(same_fact(row["text"]), int(row["id"]))
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


def _claimed_ref(
    conn: sqlite3.Connection, tenant: str, user_id: str, client_ref: str
) -> list[int] | None:
    """The memory ids an earlier add with ``client_ref`` stored, or None when it is free.

    A ref whose memories were all deleted since is free again (and forgotten): the
    same add then stores its text anew, as an import of a deleted memory expects.
    """
    row = conn.execute(
        "SELECT memory_ids FROM client_refs WHERE tenant_id = ? AND user_id = ? AND client_ref = ?",
        (tenant, user_id, client_ref),
    ).fetchone()
    if row is None:
        return None
    ids: list[int] = json.loads(row["memory_ids"])
    if not ids or _fetch_memories(conn, ids):
        return ids
    conn.execute(
        "DELETE FROM client_refs WHERE tenant_id = ? AND user_id = ? AND client_ref = ?",
        (tenant, user_id, client_ref),
    )
    return None


def _skipped(reason: str, ids: list[int]) -> dict[str, Any]:
    return {"status": "skipped", "reason": reason, "memory_ids": ids}


def _fetch_memories(conn: sqlite3.Connection, ids: Sequence[int]) -> list[sqlite3.Row]:
    if not ids:
        return []
    marks = ", ".join("?" * len(ids))
    return conn.execute(
        f"SELECT * FROM memories WHERE id IN ({marks}) ORDER BY id", list(ids)
    ).fetchall()


def hosted_memory(row: Any, *, score: float | None = None) -> dict[str, Any]:
    """A memory in the hosted ``Memory`` shape the official client parses, the one
    shape ``/memory/add``, ``get``, ``query`` and ``export`` answer: ``metadata`` flat."""
    metadata = json.loads(row["metadata"])
    keys = list(row.keys())  # sqlite3.Row has keys() but does not support `in`
    return {
        "id": int(row["id"]),
        "text": row["text"],
        "summary": None,
        "tags": None if row["tags"] is None else json.loads(row["tags"]),
        "source": row["source"],
        "event_type": metadata.get("event_type"),
        "importance": row["importance"],
        "metadata": metadata,
        "is_summary": False,
        "created_at": row["created_at"],
        "updated_at": (row["updated_at"] if "updated_at" in keys else None) or row["created_at"],
        "score": score,
        "kind": row["kind"],
        "session_id": row["session_id"],
    }


def memory_item(row: sqlite3.Row) -> dict[str, Any]:
    """A memory as the list route answers it (production metadata shape)."""
    item: dict[str, Any] = {
        "memory_id": int(row["id"]),
        "text": row["text"],
        "kind": row["kind"],
        "source": row["source"],
        "created_at": row["created_at"],
        "metadata": {"metadata": json.loads(row["metadata"])},
        **validity_fields(row),
    }
    if row["tags"] is not None:
        item["tags"] = json.loads(row["tags"])
    if row["importance"] is not None:
        item["importance"] = row["importance"]
    return item


def sort_key(seq: int | None, occurred_at: str | None, created_at: str) -> int:
    """A turn's place in its conversation: ``seq`` when sent, else its time.

    The time is ``occurred_at`` (else ``created_at``) in integer microseconds since
    the Unix epoch, the unit the clients' ``seq`` is in, so turns written before
    clients sent a ``seq`` and turns with one interleave in the order they were said.
    """
    if seq is not None:
        return seq
    return rendered_micros(occurred_at if occurred_at is not None else created_at)


def history_item(row: sqlite3.Row, *, created: bool | None = None) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": history_public_id(int(row["id"])),
        "session_id": row["session_id"],
        "role": row["role"],
        "content": row["content"],
        "seq": row["seq"],
        "occurred_at": row["occurred_at"],
        "payload": None if row["payload"] is None else json.loads(row["payload"]),
        "source": row["source"],
        "created_at": row["created_at"],
    }
    if created is not None:
        item["created"] = created
    return item
