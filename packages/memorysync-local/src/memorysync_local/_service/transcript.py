"""The transcript operations: append turns verbatim (idempotently), list a session in
conversation order, delete turns (and, optionally, the facts drawn from them).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any

from memorysync_local._plans import Caller
from memorysync_local._service.answers import history_item, history_public_id, history_rowid
from memorysync_local._service.facts import (
    FactContext,
    new_request_id,
    scalar_metadata,
    text_hash,
)
from memorysync_local._service.operations import Operations
from memorysync_local._service.quota import QuotaExceeded
from memorysync_local._storage.interface import Session
from memorysync_local._storage.records import NewTurn, TurnRecord, TurnSelection
from memorysync_local._timeutil import render, rendered_micros, utc_now


def sort_key(seq: int | None, occurred_at: str | None, created_at: str) -> int:
    """A turn's place in its conversation: ``seq`` when sent, else its time.

    The time is ``occurred_at`` (else ``created_at``) in integer microseconds since
    the Unix epoch, the unit the clients' ``seq`` is in, so turns written before
    clients sent a ``seq`` and turns with one interleave in the order they were said.
    """
    if seq is not None:
        return seq
    return rendered_micros(occurred_at if occurred_at is not None else created_at)


class Transcript(Operations):
    """Conversation turns, over one storage."""

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
        with self._facts.write() as session:
            existing = [_find_turn(session, tenant, user_id, session_id, t) for t in turns]
            if all(turn is not None for turn in existing):
                return {
                    "items": [history_item(turn, created=False) for turn in existing if turn],
                    "request_ids": [],
                    "status": "ok",
                }
            meter = self._quota.meter(session, caller)
            items: list[dict[str, Any]] = []
            if meter == "ok":
                created_at = render(utc_now())
                for turn in turns:
                    found = _find_turn(session, tenant, user_id, session_id, turn)
                    if found is not None:
                        items.append(history_item(found, created=False))
                        continue
                    stored = _insert_turn(
                        session, tenant, user_id, session_id, source, turn, created_at
                    )
                    items.append(history_item(stored, created=True))
                    if extract and stored.role == "user" and stored.content.strip():
                        ctx = FactContext(
                            tenant_id=tenant,
                            user_id=user_id,
                            source=source,
                            session_id=session_id,
                            metadata=scalars,
                            origin="history",
                            request_id=new_request_id(),
                            history_id=stored.id,
                            said_at=stored.occurred_at,
                            speaker=_named(stored.payload),
                        )
                        request_ids.append(ctx.request_id)
                        if self.async_extraction:
                            self._jobs.store(session, stored.content, ctx)
                            scheduled = True
                        else:
                            related = self._facts.related(session, ctx, stored.content)
                            extraction = self._facts.extract(stored.content, related)
                            self._facts.apply(session, extraction, ctx)
        if meter == "refused":
            raise QuotaExceeded(self._quota.retry_after())
        if meter == "silent":
            return {"items": [], "request_ids": [], "status": "skipped"}
        if scheduled:
            self._jobs.wake()
        return {"items": items, "request_ids": request_ids, "status": "ok"}

    def list_history(
        self, tenant: str, user_id: str, session_id: str, source: str | None, limit: int
    ) -> tuple[list[dict[str, Any]], int]:
        """In conversation order (:func:`sort_key`, then arrival); ``limit`` keeps the latest N."""
        with self._storage.read() as session:
            turns, total = session.transcript.latest(tenant, user_id, session_id, source, limit)
        return [history_item(turn) for turn in turns], total

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
        if session_id is not None:
            selection = TurnSelection(session_id=session_id, source=source)
        else:
            rowids = [r for r in (history_rowid(i) for i in ids or ()) if r is not None]
            if not rowids:
                return {"deleted_ids": [], "deleted_fact_ids": []}
            selection = TurnSelection(turn_ids=tuple(rowids), source=source)
        with self._facts.write() as session:
            turn_ids = session.transcript.delete(tenant, user_id, selection)
            fact_ids: list[int] = []
            if turn_ids and delete_derived_facts:
                fact_ids = session.memories.delete_derived(tenant, user_id, turn_ids)
        return {
            "deleted_ids": [history_public_id(i) for i in turn_ids],
            "deleted_fact_ids": [f"m_{i}" for i in fact_ids],
        }


def _find_turn(
    session: Session, tenant: str, user_id: str, session_id: str, turn: Mapping[str, Any]
) -> TurnRecord | None:
    if turn.get("idempotency_key") is not None:
        found = session.transcript.find_by_key(tenant, user_id, session_id, turn["idempotency_key"])
        if found is not None:
            return found
    if turn.get("seq") is not None:
        # The contract's rule, applied literally: the same seq + role + content in
        # the same scope is the same turn, even when the idempotency keys differ.
        return session.transcript.find_by_seq(
            tenant,
            user_id,
            session_id,
            seq=turn["seq"],
            role=turn["role"],
            content_hash=text_hash(turn["content"]),
        )
    return None


def _insert_turn(
    session: Session,
    tenant: str,
    user_id: str,
    session_id: str,
    source: str,
    turn: Mapping[str, Any],
    created_at: str,
) -> TurnRecord:
    return session.transcript.insert(
        NewTurn(
            tenant_id=tenant,
            user_id=user_id,
            session_id=session_id,
            source=source,
            role=turn["role"],
            content=turn["content"],
            content_hash=text_hash(turn["content"]),
            seq=turn.get("seq"),
            occurred_at=turn.get("occurred_at"),
            payload=turn.get("payload"),
            idempotency_key=turn.get("idempotency_key"),
            created_at=created_at,
            sort_key=sort_key(turn.get("seq"), turn.get("occurred_at"), created_at),
        )
    )


def _named(payload: Any) -> str | None:
    """The speaker's name a turn's payload carries (``{"name": ...}``, as the core's
    adapters send it), else None: the facts drawn from the turn keep it."""
    name = payload.get("name") if isinstance(payload, dict) else None
    if not isinstance(name, str) or "\x00" in name:
        return None
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:  # an unpaired surrogate: no name to store
        return None
    return unicodedata.normalize("NFC", name).strip()[:512] or None
