"""``MemorySyncMemory``: AutoGen's ``Memory`` protocol on ``memorysync_core.UserMemory``."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Mapping
from typing import Any, TypeVar
from weakref import WeakKeyDictionary

from autogen_core import CancellationToken, Component
from autogen_core.memory import (
    Memory,
    MemoryContent,
    MemoryMimeType,
    MemoryQueryResult,
    UpdateContextResult,
)
from autogen_core.model_context import ChatCompletionContext
from autogen_core.models import LLMMessage
from typing_extensions import Self, Unpack

from memorysync_core import (
    AdapterOptions,
    AdapterSettings,
    ClearResult,
    DeliveryReport,
    RecalledMemory,
    RecallResult,
    SaveOutcome,
    UserMemory,
)
from memorysync_core.adapters import AdapterAttributes, AdapterKit, UsersDataMethods

from ._config import MemorySyncMemoryConfig
from ._injection import (
    block_source,
    is_block_of,
    last_index,
    live_messages,
    read_state,
    with_block,
    write_state,
)
from ._query import find_query

logger = logging.getLogger("memorysync.autogen")

SURFACE = "autogen"
_USER_ROLES = frozenset({"user", "human"})
_T = TypeVar("_T")


class MemorySyncMemory(
    Memory, Component[MemorySyncMemoryConfig], AdapterAttributes, UsersDataMethods
):
    """An AutoGen ``Memory`` that recalls what a user told your agents, in any session.

    Before every model call ``AssistantAgent`` calls :meth:`update_context`: the last
    user message is the query, the recall waits at most ``recall_timeout`` seconds,
    and the recalled block replaces this memory's previous block in the model context
    (as a user message right before the question; see ``docs/autogen.md``). The
    memories come back as ``MemoryContent``, so the agent emits a ``MemoryQueryEvent``.
    AutoGen never stores turns itself: call :meth:`capture_exchange` after each
    exchange (queued, delivered in the background, never raises; :meth:`flush` and
    :meth:`report` say what became of it), or await :meth:`add_turn_pair` to get the
    server's answer or its error.

    Args:
        user_id: End user the memories belong to. Required unless ``settings``
            carries one, which is then used: ``None`` without ``settings`` raises
            ``ValueError``. Never generated.
        settings: An ``AdapterSettings`` to start from (another adapter's, say).
        **options: The settings every MemorySync adapter takes
            (``memorysync_core.AdapterOptions``): ``session_id`` (transcript scope
            ``autogen::<session_id>``), ``top_k``, ``recall_timeout``,
            ``min_prompt_chars``, ``context_template``, ``clear_scope``,
            ``request_timeout``, ``api_key`` (never serialized or shown), ``base_url``,
            ``project_id``, ``tenant_id``, ``transport``, ``min_score``,
            ``max_context_chars`` and ``transcript`` (``add_turn_pair`` stores both turns
            in the session transcript, or sends only the user turn to fact extraction).
            Read them back from :attr:`settings`.

    Example:
        ```python
        from autogen_agentchat.agents import AssistantAgent
        from autogen_memorysync import MemorySyncMemory

        memory = MemorySyncMemory(user_id="customer-42", session_id="support-chat")
        agent = AssistantAgent("assistant", model_client=model_client, memory=[memory])
        result = await agent.run(task=user_text)
        memory.capture_exchange(user_text, result.messages[-1].content)
        ...
        report = await memory.flush()  # or at exit: delivered, refused, pending
        ```
    """

    component_type = "memory"
    component_config_schema = MemorySyncMemoryConfig
    component_provider_override = "autogen_memorysync.MemorySyncMemory"

    def __init__(
        self,
        *,
        user_id: str | None = None,
        settings: AdapterSettings | None = None,
        **options: Unpack[AdapterOptions],
    ) -> None:
        self._settings = AdapterSettings.build(
            surface=SURFACE, user_id=user_id, settings=settings, **options
        )
        self._kit = AdapterKit(self._settings)
        self._memory = self._kit.home
        api = self._memory.api
        identity = "\x00".join(
            (
                api.base_url,
                api.project_id or "",
                self._settings.tenant_id or "",
                self._settings.user_id,
                self._settings.session_id,
            )
        )
        self._block_source = block_source(identity)
        # Each context's block as last placed (weakly: a context that goes away is forgotten).
        self._placed: WeakKeyDictionary[ChatCompletionContext, LLMMessage] = WeakKeyDictionary()

    # -- readable settings -------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """This conversation's id."""
        return self._memory.session_id

    @property
    def scope(self) -> str:
        """The transcript scope, ``autogen::<session_id>``."""
        return self._memory.scope

    @property
    def block_source(self) -> str:
        """The ``source`` of this memory's block in a model context."""
        return self._block_source

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(user_id={self.user_id!r}, session_id={self.session_id!r}, "
            f"base_url={self._memory.api.base_url!r})"
        )

    # -- the hot path ------------------------------------------------------------------

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Recall for the last user message and put the block in ``model_context``.

        Never raises (except cancellation) and never waits longer than
        ``recall_timeout`` for the server: on a timeout, an error or a 429 it injects
        nothing, removes this memory's previous block and logs one warning. The context
        is left untouched when its block is already the right one.
        """
        state: Mapping[str, Any] | None = None
        messages = live_messages(model_context)
        if messages is None:
            try:
                state, messages = await read_state(model_context)
            except Exception as exc:
                logger.warning(
                    "could not read the model context (%s); no memories this turn",
                    type(exc).__name__,
                )
                return _update_result(())
        query = find_query(messages)
        recalled = RecallResult.EMPTY
        if query is not None and self._settings.wants_recall(query[1]):
            recalled = await self._memory.recall(query[1])
        try:
            if state is None:
                self._place(model_context, None if query is None else query[1], recalled.block)
            else:
                updated = with_block(
                    messages,
                    source=self._block_source,
                    block=recalled.block,
                    anchor=None if query is None else query[0],
                )
                if updated is not None:
                    await write_state(model_context, state, updated)
        except Exception as exc:
            logger.warning(
                "could not update the model context (%s); no memories this turn",
                type(exc).__name__,
            )
            return _update_result(())
        if not recalled:
            return _update_result(())
        if not recalled.memories:
            # The server sent a context without items: still tell observers what was shown.
            return _update_result((RecalledMemory(None, recalled.block, None, {}),))
        return _update_result(recalled.memories)

    def _place(self, context: ChatCompletionContext, query: str | None, block: str) -> None:
        """Put ``block`` in a context of the known shape, without dumping or validating.

        The list is read again (recall awaited: it may have grown or been replaced). The
        block last placed here is found by identity, near the end; when it is gone (the
        context was reloaded), every message is inspected once.
        """
        messages = live_messages(context)
        if messages is None:  # something else was put in its place meanwhile
            raise TypeError("the model context no longer keeps a message list")
        again = find_query(messages)
        anchor = again[0] if again is not None and again[1] == query else None
        known = self._placed.pop(context, None)
        found = None if known is None else last_index(messages, lambda m: m is known)
        source = self._block_source
        updated = with_block(messages, source=source, block=block, anchor=anchor, found=found)
        if updated is not None:
            # A new list, as load_state assigns one: a list get_messages handed out earlier
            # (to a model client, a log) keeps what it showed.
            context._messages = messages = updated
        # The block, if one was placed, is now just before the question: found at once.
        placed = bool(block) and anchor is not None
        at = last_index(messages, lambda m: is_block_of(m, source)) if placed else None
        if at is not None:
            self._placed[context] = messages[at]

    # -- explicit calls ----------------------------------------------------------------

    async def add(
        self, content: MemoryContent, cancellation_token: CancellationToken | None = None
    ) -> None:
        """Send one user turn to fact extraction (``/v1/memory/add_turn``).

        ``content.metadata["role"]`` decides: missing, ``"user"`` or ``"human"`` is the
        user's turn and is sent; any other role (assistant, system, tool, ...) is not
        sent. Scalar metadata travels with the turn (your dict is not modified);
        ``metadata["turn_id"]`` is used as the capture id when present. With
        ``metadata["verbatim"] = True`` the text is instead stored as one memory exactly
        as given, without extraction (:meth:`save` with ``verbatim=True``). Raises the
        typed errors of ``memorysync_core.errors`` after bounded retries. JSON content
        (a dict) is a ``TypeError``: MemorySync learns facts from what the user said.

        Example:
            ```python
            note = "Ana: see you at the pottery class on Friday!"
            await memory.add(MemoryContent(content=note, mime_type="text/plain",
                                           metadata={"verbatim": True}))
            ```
        """
        if not isinstance(content, MemoryContent):
            raise TypeError(f"content must be a MemoryContent, got {type(content).__name__}")
        if isinstance(content.content, dict):
            raise TypeError(
                "content.content is a dict (JSON): add() takes what the user said, as text; "
                "send the sentence instead, e.g. 'I live in Lisbon.'"
            )
        metadata = dict(content.metadata or {})
        role = metadata.get("role")
        if role is not None and str(role).strip().lower() not in _USER_ROLES:
            logger.debug("add(): content with role %r is not sent", role)
            return
        text = _content_text(content)
        if not text.strip():
            raise ValueError("content.content must be non-empty text")
        turn_id = metadata.pop("turn_id", None)
        if turn_id is not None and not isinstance(turn_id, str):
            raise ValueError(f"metadata['turn_id'] must be a string, got {turn_id!r}")
        verbatim = metadata.pop("verbatim", False)
        if not isinstance(verbatim, bool):
            raise ValueError(f"metadata['verbatim'] must be True or False, got {verbatim!r}")
        added = (
            self._memory.save(text, metadata=metadata, verbatim=True)
            if verbatim
            else self._memory.add_user_turn(text, metadata=metadata, turn_id=turn_id)
        )
        await _cancellable(added, cancellation_token)

    def capture_exchange(
        self, user_text: str, assistant_text: str = "", *, turn_id: str | None = None
    ) -> bool:
        """Queue one exchange for the transcript; never raises, never waits on the network.

        The same capture as :meth:`add_turn_pair` (both turns, or with
        ``transcript=False`` only the user's), delivered in the background by the
        core's ordered queue: in order, batched, retried with the same ids through an
        outage, and flushed at interpreter exit. Call it from async code (the running
        event loop delivers). Returns True when queued; a refusal (no running loop, a
        full queue, empty text) is logged at WARNING and, once the queue saw it,
        counted in :meth:`report`. ``turn_id`` is the capture id of both turns.

        Example:
            ```python
            result = await agent.run(task=user_text)
            memory.capture_exchange(user_text, result.messages[-1].content)
            ```
        """
        given: object = user_text  # typed str, but an app may pass anything
        if not isinstance(given, str):
            logger.warning("capture skipped: user_text must be a str, got %s", type(given).__name__)
            return False
        if not user_text.strip():
            logger.warning("capture skipped: user_text must be non-empty text")
            return False
        try:
            turns = [self._memory.capture("user", user_text, turn_id=turn_id)]
            if isinstance(assistant_text, str) and assistant_text.strip():
                turns.append(self._memory.capture("assistant", assistant_text, turn_id=turn_id))
        except Exception as exc:
            logger.warning("capture skipped (%s: %s)", type(exc).__name__, exc)
            return False
        wanted = len([turn for turn in turns if turn.text])
        return wanted > 0 and self._kit.submit(turns) == wanted

    def report(self) -> DeliveryReport:
        """What became of the exchanges :meth:`capture_exchange` queued, as of now."""
        return self._kit.report()

    async def flush(self, timeout: float | None = 10.0) -> DeliveryReport:
        """Wait (up to ``timeout`` seconds) until every queued turn is delivered or refused.

        Returns the :class:`~memorysync_core.DeliveryReport` as of then.
        """
        return await self._kit.flush(timeout)

    async def add_turn_pair(
        self,
        user_text: str,
        assistant_text: str,
        *,
        turn_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Record one exchange: what the user said and what the agent answered.

        With ``transcript=True`` both turns are appended to the session transcript in
        one call (the user turn's facts are extracted into memories); with
        ``transcript=False`` only the user turn is sent to fact extraction. Retries
        resend the same ids, so a retry stores nothing twice; pass ``turn_id`` when
        your application retries the whole call itself. Returns the server's answer;
        raises the typed errors of ``memorysync_core.errors`` (for a path that never
        raises, see :meth:`capture_exchange`).

        Example:
            ```python
            result = await agent.run(task=user_text)
            await memory.add_turn_pair(user_text, result.messages[-1].content)
            ```
        """
        if not isinstance(user_text, str) or not user_text.strip():
            raise ValueError(f"user_text must be non-empty text, got {user_text!r:.40}")
        if not isinstance(assistant_text, str):
            raise TypeError(
                "assistant_text must be a string (the reply's text), got "
                f"{type(assistant_text).__name__}"
            )
        return await self._memory.record_exchange(
            user_text,
            assistant_text,
            transcript=self._settings.transcript,
            turn_id=turn_id,
            metadata=metadata,
        )

    async def save(
        self, text: str, *, metadata: Mapping[str, Any] | None = None, verbatim: bool = False
    ) -> SaveOutcome:
        """Store a fact through the server's extraction (``/memory/add``).

        The server decides what is durable; the outcome says what was kept
        (``outcome.describe()`` is a sentence a model can read). Re-sending the same
        text in the same session is recognised by its ``client_ref``. Raises on failure.
        ``verbatim=True`` stores ``text`` as one memory exactly as given, without
        extraction (``memorysync-local``; see docs/autogen.md).
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text must be non-empty text, got {text!r:.40}")
        return await self._memory.save(text, metadata=dict(metadata or {}), verbatim=verbatim)

    async def query(
        self,
        query: str | MemoryContent,
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        """Search this user's memories; raises the typed errors (never a silent empty).

        Keyword arguments: ``k`` (or its alias ``limit``, default ``top_k``),
        ``min_score`` (default: the memory's ``min_score``), and ``since`` / ``until``
        (a time-zone-aware datetime or ISO 8601 string: the memories said in that window).
        """
        k = kwargs.pop("k", None)
        limit = kwargs.pop("limit", None)
        min_score = kwargs.pop("min_score", self._settings.min_score)
        since, until = kwargs.pop("since", None), kwargs.pop("until", None)
        if kwargs:
            raise TypeError(f"query() got unexpected keyword arguments: {sorted(kwargs)}")
        if k is not None and limit is not None and k != limit:
            raise ValueError(f"pass k or limit, not both with different values ({k}, {limit})")
        if not isinstance(query, (str, MemoryContent)):
            raise TypeError(f"query must be a str or MemoryContent, got {type(query).__name__}")
        text = query if isinstance(query, str) else _content_text(query)
        if not text.strip():
            raise ValueError("query must be non-empty text")
        memories = await _cancellable(
            self._memory.search(
                text,
                k=k if k is not None else limit,
                min_score=min_score,
                since=since,
                until=until,
            ),
            cancellation_token,
        )
        return MemoryQueryResult(results=[_to_content(memory) for memory in memories])

    async def _users_data_memory(self) -> UserMemory:
        return self._memory  # list_memories, list_sessions, export, forget_user, import_export

    async def clear(self) -> None:
        """Delete this session's facts and transcript (or everything of the user).

        Which one is ``clear_scope``: ``"session"`` (default) leaves the user's other
        memories alone; ``"user"`` deletes every memory of the user. Raises on failure.
        """
        result: ClearResult = await self._memory.clear(self._settings.clear_scope)
        logger.info(
            "clear(%s): %d memories and %d transcript turns deleted",
            self._settings.clear_scope,
            len(result.deleted_memory_ids),
            len(result.deleted_turn_ids),
        )

    async def close(  # type: ignore[override]  # AutoGen's returns None; ours says more
        self, timeout: float | None = None
    ) -> DeliveryReport:
        """Deliver the queued exchanges (up to ``timeout`` s), release the HTTP client.

        ``timeout=None``: ``MEMORYSYNC_CLOSE_TIMEOUT`` seconds (5 when unset), so a server
        that is down cannot hold the shutdown. Returns the
        :class:`~memorysync_core.DeliveryReport` of the exchanges captured since the
        previous ``close()``: what is ``pending`` was not delivered. AutoGen may reuse a
        memory after ``close()`` (a team reset, say): a later call simply takes a
        connection again, so close it again when you are done.
        """
        return await self._kit.aclose(timeout)

    # -- component config ---------------------------------------------------------------

    def _to_config(self) -> MemorySyncMemoryConfig:
        return MemorySyncMemoryConfig(user_id=self.user_id, **self._settings.serializable())

    @classmethod
    def _from_config(cls, config: MemorySyncMemoryConfig) -> Self:
        return cls(**config.model_dump())


def _content_text(content: MemoryContent) -> str:
    value = content.content
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    raise TypeError(
        f"MemorySync stores text: content.content must be str or dict, got {type(value).__name__}"
    )


def _to_content(memory: RecalledMemory) -> MemoryContent:
    return MemoryContent(
        content=memory.text,
        mime_type=MemoryMimeType.TEXT,
        metadata={"memory_id": memory.memory_id, "score": memory.score},
    )


def _update_result(memories: tuple[RecalledMemory, ...]) -> UpdateContextResult:
    return UpdateContextResult(
        memories=MemoryQueryResult(results=[_to_content(memory) for memory in memories])
    )


async def _cancellable(awaitable: Awaitable[_T], token: CancellationToken | None) -> _T:
    if token is None:
        return await awaitable
    future = asyncio.ensure_future(awaitable)
    token.link_future(future)
    return await future
