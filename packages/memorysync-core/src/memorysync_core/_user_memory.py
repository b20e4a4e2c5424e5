"""``UserMemory``: one user's memory in one session, as both adapters use it."""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from . import _telemetry as telemetry
from ._delivery.seeds import MAX_TEXT_CHARS, fnv1a64, sendable_text, truncate_text
from ._delivery.turns import CapturedTurn, Role
from ._errors import ResponseFormatError
from ._recall.budget import RecallResult, recall_within_budget
from ._recall.render import ContextRenderer, RecalledMemory, parse_memories
from ._recall.window import Moment, TimeWindow
from ._users_data import calls as _users_data
from ._users_data.reports import ForgetReport, ImportReport, MemoryPage
from ._wire.client import MAX_HISTORY_TURNS, MemorySyncAPI, memory_id_to_int
from ._wire.operation import operation
from ._wire.retry import RetryPolicy, call_with_retries

_logger = logging.getLogger("memorysync.client")

_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class SaveOutcome:
    """What the server did with an explicit save.

    ``kept`` is True when the fact is stored (now or by an earlier identical save);
    ``reason`` is the server's reason when it skipped the text.
    """

    kept: bool
    memory_ids: tuple[int | str, ...] = ()
    reason: str | None = None

    def describe(self) -> str:
        """A sentence a model can read as a tool result."""
        ids = ", ".join(str(i) for i in self.memory_ids)
        if self.kept and self.reason == "already_ingested":
            return (
                f"Already remembered from an earlier save (memory {ids})."
                if ids
                else ("Already remembered from an earlier save.")
            )
        if self.kept:
            return (
                f"Saved to long-term memory (memory {ids})."
                if ids
                else ("Saved to long-term memory.")
            )
        why = f" ({self.reason})" if self.reason else ""
        return (
            "Not saved: the memory service judged this not to be a durable fact about "
            f"the user{why}."
        )


@dataclass(frozen=True)
class ClearResult:
    """The memory ids and transcript turn ids a ``clear`` deleted."""

    deleted_memory_ids: tuple[int, ...] = ()
    deleted_turn_ids: tuple[str, ...] = ()


def _scalar_metadata(metadata: Mapping[str, Any] | None) -> dict[str, Any]:
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise TypeError(f"metadata must be a mapping, got {type(metadata).__name__}")
    copied: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, _SCALARS):
            copied[str(key)] = value
        else:
            # The server only copies scalars onto facts; say what we left out.
            _logger.debug("metadata key %r skipped: %s is not a scalar", key, type(value).__name__)
    return copied


def _ids(values: object) -> tuple[int | str, ...]:
    if not isinstance(values, list):
        return ()
    out: list[int | str] = []
    for value in values:
        try:
            out.append(memory_id_to_int(value))
        except ValueError:
            if isinstance(value, str):
                out.append(value)
    return tuple(out)


class UserMemory:
    """One user's MemorySync memory, seen from one session of one surface.

    Recall is budgeted and never raises; explicit calls (``search``, ``save``,
    ``add_user_turn``, ``record_turns``, ``clear``) retry transient failures a bounded
    number of times with the same ids, then raise.

    Example:
        ```python
        api = MemorySyncAPI()  # key and URL: MEMORYSYNC_API_KEY, MEMORYSYNC_BASE_URL
        memory = UserMemory(api, user_id="alice", session_id="support", surface="autogen")
        await memory.add_user_turn("I am allergic to peanuts.")
        result = await memory.recall("Suggest a snack")
        print(result.block)
        await memory.aclose()
        ```
    """

    def __init__(
        self,
        api: MemorySyncAPI,
        *,
        user_id: str,
        session_id: str,
        surface: str,
        top_k: int = 5,
        recall_timeout: float = 1.2,
        renderer: ContextRenderer | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if not isinstance(api, MemorySyncAPI):
            raise TypeError(f"api must be a MemorySyncAPI, got {type(api).__name__}")
        for name, value in (("user_id", user_id), ("session_id", session_id), ("surface", surface)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{name} must be a non-empty string, got {value!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"top_k must be an integer >= 1, got {top_k!r}")
        if (
            isinstance(recall_timeout, bool)
            or not isinstance(recall_timeout, (int, float))
            or not math.isfinite(recall_timeout)
            or recall_timeout <= 0
        ):
            raise ValueError(
                f"recall_timeout must be a finite number of seconds > 0, got {recall_timeout!r}"
            )
        self._api = api
        self._user_id = user_id
        self._session_id = session_id
        self._surface = surface
        self._scope = f"{surface}::{session_id}"
        self.top_k = top_k
        self.recall_timeout = float(recall_timeout)
        self.renderer = renderer if renderer is not None else ContextRenderer()
        self.retry = retry if retry is not None else RetryPolicy()

    @property
    def api(self) -> MemorySyncAPI:
        """The client this memory talks through."""
        return self._api

    @property
    def user_id(self) -> str:
        """The end user whose memory this is."""
        return self._user_id

    @property
    def session_id(self) -> str:
        """The session (without the surface prefix)."""
        return self._session_id

    @property
    def surface(self) -> str:
        """The integration's name: ``"autogen"`` or ``"ag2"``."""
        return self._surface

    @property
    def scope(self) -> str:
        """The transcript scope, ``"<surface>::<session_id>"``."""
        return self._scope

    def __repr__(self) -> str:
        return (
            f"UserMemory(user_id={self._user_id!r}, scope={self._scope!r}, "
            f"base_url={self._api.base_url!r})"
        )

    # ----------------------------------------------------------------- reads

    def span_attributes(self) -> dict[str, telemetry.AttributeValue]:
        """What this memory's spans say about it: the surface and the user's digest."""
        return {"memorysync.surface": self._surface, **telemetry.user_attributes(self._user_id)}

    async def recall(self, prompt: str, *, timeout: float | None = None) -> RecallResult:
        """The block for ``prompt`` within ``timeout`` (default ``recall_timeout``) seconds.

        EMPTY on any failure. A prompt longer than 16,000 characters is cut (the server
        refuses longer ones).
        """
        return await recall_within_budget(
            self._api,
            user_id=self._user_id,
            prompt=truncate_text(prompt) if isinstance(prompt, str) else prompt,
            k=self.top_k,
            timeout=self.recall_timeout if timeout is None else timeout,
            renderer=self.renderer,
        )

    @telemetry.explicit_call("memorysync.search")
    @operation("search memories")
    async def search(
        self,
        query: str,
        *,
        k: int | None = None,
        min_score: float | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> list[RecalledMemory]:
        """Semantic search over the user's memories (``/v1/memory/query``); raises on failure.

        ``k`` defaults to ``top_k`` and ``min_score`` to the renderer's (memories scoring
        below it are dropped); a query longer than 16,000 characters is cut.
        ``since`` / ``until`` keep the memories said in that window (a datetime with a
        time zone or an ISO 8601 string; ``until`` excluded).
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r:.40}")
        if k is None:
            k = self.top_k
        elif isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"k must be an integer >= 1 or None, got {k!r}")
        prompt = truncate_text(query)
        window = TimeWindow.of(since, until)
        answer = await call_with_retries(
            lambda: self._api.query(
                user_id=self._user_id, prompt=prompt, k=k, since=since, until=until
            ),
            self.retry,
        )
        memories = parse_memories(answer.get("memories", []))
        if memories is None:
            raise ResponseFormatError(
                "POST /v1/memory/query -> 200: 'memories' is not a list", route="/v1/memory/query"
            )
        if min_score is None:
            min_score = self.renderer.min_score
        if min_score is not None:
            memories = [m for m in memories if m.score is not None and m.score >= min_score]
        return window.keep(memories)

    # ----------------------------------------------------------------- writes

    @telemetry.explicit_call("memorysync.save")
    @operation("save a memory")
    async def save(
        self, text: str, *, metadata: Mapping[str, Any] | None = None, verbatim: bool = False
    ) -> SaveOutcome:
        """Offer ``text`` as a fact (``/memory/add``); the server decides whether it is kept.

        ``verbatim=True`` stores ``text`` as one memory exactly as given: no extraction,
        no low-value filter, not even stripped (a ``memorysync-local`` extension of the
        route; a server without it answers 422, a ``ValidationError``). A verbatim text
        over 16,000 characters is a ``ValueError``: it cannot be stored as given.

        The ``client_ref`` is derived from the scope and the text (and whether it is
        verbatim), so saving the same text again in this session is recognised instead
        of stored twice.
        """
        if not isinstance(verbatim, bool):
            raise ValueError(f"verbatim must be True or False, got {verbatim!r}")
        if not verbatim:
            # Cut at a sentence end when too long: half a sentence can be a wrong fact.
            normalized = sendable_text(text)
        elif not isinstance(text, str) or len(text) > MAX_TEXT_CHARS:
            raise ValueError(
                f"a verbatim text must be a string of at most {MAX_TEXT_CHARS} characters"
            )
        else:
            normalized = text if text.strip() else ""
        if not normalized:
            raise ValueError("text must be a non-empty string")
        marker = "verbatim" + chr(0) if verbatim else ""
        client_ref = f"{self._surface}:{fnv1a64(marker + self._scope + chr(0) + normalized)}"
        extra = _scalar_metadata(metadata)
        answer = await call_with_retries(
            lambda: self._api.add_memory(
                user_id=self._user_id,
                text=normalized,
                source=self._surface,
                session_id=self._scope,
                metadata=extra or None,
                client_ref=client_ref,
                verbatim=verbatim,
            ),
            self.retry,
        )
        if answer.get("status") == "skipped":
            reason = answer.get("reason")
            ids = _ids(answer.get("memory_ids"))
            reason_text = reason if isinstance(reason, str) else None
            return SaveOutcome(
                kept=reason_text == "already_ingested" and bool(ids),
                memory_ids=ids,
                reason=reason_text,
            )
        ids = _ids([answer["id"]]) if "id" in answer else _ids(answer.get("memory_ids"))
        return SaveOutcome(kept=True, memory_ids=ids, reason=None)

    def capture(
        self, role: Role, text: str, *, turn_id: str | None = None, name: str | None = None
    ) -> CapturedTurn:
        """Capture an utterance of this user in this scope (``turn_id``: the capture id)."""
        return CapturedTurn.capture(
            role, text, scope=self._scope, capture_id=turn_id, name=name, user_id=self._user_id
        )

    @telemetry.explicit_call("memorysync.add_turn")
    @operation("add a turn")
    async def add_user_turn(
        self,
        text: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> dict[str, Any]:
        """Send one user turn to fact extraction (``/v1/memory/add_turn``); raises on failure.

        A turn over the 16,000-character limit is sent in parts (one call each); the
        answer is the last part's.
        """
        turn = self.capture("user", text, turn_id=turn_id)
        if not turn.text:
            raise ValueError("text must be a non-empty string")
        answers = await self._extract(turn, metadata)
        return answers[-1]

    async def extract_turns(
        self, turns: Sequence[CapturedTurn], *, metadata: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Send the user's captured turns to fact extraction, without a transcript.

        Assistant turns are skipped (the server stores nothing from them). One call per
        part, in order, each with its own seed as ``speaker`` and the capture time, so a
        retry is recognised as a replay. Raises on failure.
        """
        answers: list[dict[str, Any]] = []
        for turn in self._own(turns):
            if turn.role == "user":
                answers.extend(await self._extract(turn, metadata))
        return answers

    async def _extract(
        self, turn: CapturedTurn, metadata: Mapping[str, Any] | None
    ) -> list[dict[str, Any]]:
        meta = _scalar_metadata(metadata)
        meta["session_id"] = self._scope
        answers: list[dict[str, Any]] = []
        for part in turn.parts():
            answers.append(
                await call_with_retries(
                    functools.partial(
                        self._api.add_turn,
                        user_id=self._user_id,
                        text=part.text,
                        role="user",
                        speaker=part.seed,
                        occurred_at=turn.occurred_at,
                        metadata=meta,
                        source=self._surface,
                    ),
                    self.retry,
                )
            )
        return answers

    def _own(self, turns: Sequence[CapturedTurn]) -> Sequence[CapturedTurn]:
        """``turns``, checked: captured turns of this memory's scope."""
        for turn in turns:
            if not isinstance(turn, CapturedTurn):
                raise TypeError(f"turns must be CapturedTurn objects, got {type(turn).__name__}")
            if turn.scope != self._scope:
                raise ValueError(f"turn scope {turn.scope!r} is not this memory's {self._scope!r}")
        return turns

    @telemetry.explicit_call("memorysync.record")
    @operation("record turns")
    async def record_turns(
        self,
        turns: Sequence[CapturedTurn],
        *,
        extract: bool = True,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Append captured turns to this session's transcript (``/v1/history/append``).

        ``metadata``'s scalar values are copied onto the facts extracted from the turns.
        Long turns go as their parts; more than 100 items take several calls, in order
        (a retry resends the same ids, so nothing is stored twice). The answer merges
        the calls' ``items`` and ``request_ids``.
        """
        items = [item for turn in self._own(turns) for item in turn.history_items()]
        merged: dict[str, Any] = {"items": [], "request_ids": [], "status": "ok"}
        extra = _scalar_metadata(metadata) or None
        for start in range(0, len(items), MAX_HISTORY_TURNS):
            chunk = items[start : start + MAX_HISTORY_TURNS]
            answer = await call_with_retries(
                functools.partial(
                    self._api.append_history,
                    user_id=self._user_id,
                    session_id=self._scope,
                    turns=chunk,
                    source=self._surface,
                    extract=extract,
                    metadata=extra,
                ),
                self.retry,
            )
            if start == 0 and len(items) <= MAX_HISTORY_TURNS:
                return answer
            merged["items"].extend(answer.get("items") or ())
            merged["request_ids"].extend(answer.get("request_ids") or ())
            if answer.get("status") != "ok":
                merged["status"] = answer.get("status")
        return merged

    @operation("record an exchange")
    async def record_exchange(
        self,
        user_text: str,
        assistant_text: str,
        *,
        transcript: bool = True,
        turn_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record one exchange: the user's words and the reply; raises on failure.

        ``transcript=True`` appends both turns to this session's transcript in one call
        (the user turn also goes to fact extraction); ``False`` sends only the user turn
        to fact extraction. An empty reply is not recorded. Retries resend the same ids;
        ``turn_id`` is the capture id when the application retries the call itself.
        """
        if not transcript:
            return await self.add_user_turn(user_text, metadata=metadata, turn_id=turn_id)
        turns = [self.capture("user", user_text, turn_id=turn_id)]
        if assistant_text.strip():
            turns.append(self.capture("assistant", assistant_text, turn_id=turn_id))
        return await self.record_turns(turns, extract=True, metadata=metadata)

    # ----------------------------------------------------------------- clear

    @telemetry.explicit_call("memorysync.clear")
    @operation("clear memories")
    async def clear(self, scope: Literal["session", "user"] = "session") -> ClearResult:
        """Forget this session's memories and transcript, or (``"user"``) every memory.

        ``"user"`` deletes every memory of the user, across sessions and surfaces, and
        this session's transcript.
        """
        if scope not in ("session", "user"):
            raise ValueError(f"scope must be 'session' or 'user', got {scope!r}")
        listed = await call_with_retries(
            lambda: self._api.list_memories(user_id=self._user_id), self.retry
        )
        doomed: list[int] = []
        for item in listed:
            memory = RecalledMemory.parse(item)
            raw_id = item.get("memory_id", item.get("id"))
            if scope == "session":
                session = memory.session_id if memory is not None else _users_data.session_of(item)
                if session != self._scope:
                    continue
            try:
                doomed.append(memory_id_to_int(raw_id))
            except ValueError:
                _logger.debug("skipped a listed memory without a usable id")
        deleted: list[int] = []
        if doomed:
            deleted = await call_with_retries(
                lambda: self._api.forget(user_id=self._user_id, memory_ids=doomed), self.retry
            )
        history = await call_with_retries(
            lambda: self._api.delete_history(
                user_id=self._user_id, session_id=self._scope, delete_derived_facts=True
            ),
            self.retry,
        )
        for value in history.get("deleted_fact_ids") or ():
            try:
                number = memory_id_to_int(value)
            except ValueError:
                continue
            if number not in deleted:
                deleted.append(number)
        turn_ids = tuple(str(v) for v in history.get("deleted_ids") or ())
        return ClearResult(deleted_memory_ids=tuple(deleted), deleted_turn_ids=turn_ids)

    # ----------------------------------------------------------------- users' data

    async def list_memories(self, *, limit: int = 100, offset: int = 0) -> MemoryPage:
        """One page of the user's memories (every session), newest first; raises on failure."""
        return await _users_data.list_memories_page(self, limit=limit, offset=offset)

    async def list_sessions(self) -> list[dict[str, Any]]:
        """The user's sessions with counts; :class:`UnsupportedError` on a server without
        the ``memorysync-local`` extension (the hosted service)."""
        return await _users_data.list_sessions(self)

    async def export(self) -> dict[str, Any]:
        """Every fact and transcript turn of the user, as one JSON-serialisable object
        (``schema``, ``complete``, ``sessions``, ``memories``, ``transcripts``)."""
        return await _users_data.export_user(self)

    async def forget_user(self) -> ForgetReport:
        """Erase every fact and transcript of the user in every session, and cancel their
        pending extraction (``memorysync-local``); idempotent. See :class:`ForgetReport`."""
        return await _users_data.forget_user(self)

    async def import_export(self, data: Mapping[str, Any]) -> ImportReport:
        """Write an :meth:`export` (from any server) for this user; idempotent."""
        return await _users_data.import_export(self, data)

    async def aclose(self) -> None:
        """Drop this memory's reference to the shared connection."""
        await self._api.aclose()
