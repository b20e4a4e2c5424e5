"""The ``ag2`` 1.x seam: a middleware factory and the per-turn middleware it builds.

ag2 rebuilds the middleware chain every turn (``factory(event, context)``), so what
lives across turns (settings, the client, the delivery queue) is held by the factory,
:class:`MemorySyncMiddleware`, and the per-turn :class:`_MemoryTurn` only borrows it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ag2.events import BaseEvent, ModelRequest, ModelResponse, TextInput
from ag2.middleware import BaseMiddleware

from memorysync_core import (
    AdapterOptions,
    AdapterSettings,
    ClearResult,
    ClearScope,
    DeliveryReport,
    Moment,
    RecalledMemory,
    RecallResult,
    SaveOutcome,
    UserMemory,
)
from memorysync_core.adapters import (
    AdapterAttributes,
    AdapterKit,
    CapturedTurn,
    UsersDataMethods,
    check_clear_scope,
)

from ._tools import memory_toolkit

if TYPE_CHECKING:
    from ag2 import Context, Toolkit
    from ag2.middleware.base import AgentTurn, LLMCall
    from typing_extensions import Unpack

_logger = logging.getLogger("memorysync.ag2")

# The classic capability's surface: one transcript and one source for both AGs.
SURFACE = "ag2"
_PINNED = "default"  # the settings' session when the middleware follows the stream


def human_text(event: object) -> str:
    """The text a person typed in ``event`` (a ``ModelRequest``); "" for anything else."""
    if not isinstance(event, ModelRequest):
        return ""
    return "\n".join(part.content for part in event.parts if isinstance(part, TextInput))


def latest_human_text(events: Sequence[BaseEvent]) -> str:
    """The newest human message in ``events`` (tool results are never one)."""
    for event in reversed(events):
        text = human_text(event)
        if text.strip():
            return text
    return ""


class MemorySyncMiddleware(AdapterAttributes, UsersDataMethods):
    """Long-term memory for an ``ag2`` 1.x ``Agent``: a middleware factory.

    List it in ``Agent(..., middleware=[memory])`` (or pass it to one ``ask``). Then:

    - before each model call, the memories recalled for the latest human message
      (within ``recall_timeout`` seconds, once per turn) are added to the system prompt
      of that call only: the stream's history never holds them, and a failure is
      logged and the call goes on without them;
    - after each turn, the human message and the agent's final reply are queued for
      the ``ag2::<session>`` transcript (the human side also feeds fact extraction);
      tool calls and tool results are never stored. Delivery runs in the background
      with retries, so the turn waits on no network call; :meth:`flush` and
      :meth:`aclose` return a :class:`~memorysync_core.DeliveryReport`.

    Args:
        user_id: The end user the memories belong to (ag2 has no user id). Required
            unless ``settings`` carries one, which is then used: ``None`` without
            ``settings`` raises ``ValueError``. Never generated.
        session_id: The transcript's session. None (default): each conversation's
            own, ``str(context.stream.id)`` (pass ``MemoryStream(id=...)`` to name one);
            a string pins one transcript for every conversation.
        settings: An ``AdapterSettings`` to start from (another adapter's, say).
        **options: The settings every MemorySync adapter takes
            (``memorysync_core.AdapterOptions``), as for the classic
            ``MemorySyncCapability``; read them back from :attr:`settings`.

    Example:
        ```python
        memory = MemorySyncMiddleware(user_id="alice")
        agent = Agent("assistant", config=config, middleware=[memory])
        reply = await agent.ask("I live in Lisbon.")
        assert (await memory.aclose()).all_delivered
        ```
    """

    def __init__(
        self,
        *,
        user_id: str | None = None,
        settings: AdapterSettings | None = None,
        **options: Unpack[AdapterOptions],
    ) -> None:
        session_id = options.get("session_id")  # None: follow the framework's session
        options["session_id"] = _PINNED if session_id is None else session_id
        self._settings = AdapterSettings.build(
            surface=SURFACE,
            user_id=user_id,
            settings=settings,
            **options,
        )
        self._session_id = session_id
        self._kit = AdapterKit(self._settings)  # one client, shared by every session
        self._home = self._kit.home

    @property
    def session_id(self) -> str | None:
        """The pinned session, or None when each conversation has its own."""
        return self._session_id

    def __repr__(self) -> str:
        return f"MemorySyncMiddleware(user_id={self.user_id!r}, session_id={self._session_id!r})"

    def __call__(self, event: BaseEvent, context: Context) -> BaseMiddleware:
        """ag2's factory protocol: the middleware for one turn."""
        return _MemoryTurn(event, context, owner=self)

    def describe(self) -> Any:
        """What ``Agent.middleware`` shows (ag2 >= 1.2): the kind, never the settings."""
        from ag2.middleware.describe import MiddlewareDescription

        return MiddlewareDescription(kind=type(self).__qualname__, config={}, complete=False)

    # ------------------------------------------------------------------ sessions

    def session_for(self, context: Context) -> str:
        """The session a turn on ``context`` belongs to."""
        return self._session_id or str(context.stream.id)

    def memory(self, session_id: str | None = None) -> UserMemory:
        """The core's ``UserMemory`` of one session (default: the pinned one)."""
        return self._kit.memory_for(session_id or self._session_id or _PINNED)

    # ------------------------------------------------------------------ hot paths

    async def recall(self, prompt: str) -> RecallResult:
        """The block for ``prompt`` within ``recall_timeout``; EMPTY on failure or short prompt."""
        if not self._settings.wants_recall(prompt):
            return RecallResult.EMPTY
        try:
            return await self._home.recall(prompt)
        except Exception as exc:  # the core never raises here; a model call must not fail
            _logger.warning("recall skipped: %s", type(exc).__name__)
            return RecallResult.EMPTY

    def queue(self, turn: CapturedTurn | None) -> None:
        """Hand ``turn`` to the background delivery (never waits on the network)."""
        if turn is not None:
            self._kit.submit((turn,))

    # ------------------------------------------------------------------ explicit calls

    def tools(self) -> Toolkit:
        """``search_memory`` and ``save_memory`` as an ag2 ``Toolkit`` for ``Agent(tools=...)``."""
        return memory_toolkit(self)

    async def search(
        self,
        query: str,
        *,
        k: int | None = None,
        min_score: float | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> list[RecalledMemory]:
        """Search the user's memories (every session; ``since`` / ``until``: only those
        said in that window); raises the core's typed errors."""
        return await self._home.search(query, k=k, min_score=min_score, since=since, until=until)

    async def save(
        self, text: str, *, session_id: str | None = None, verbatim: bool = False
    ) -> SaveOutcome:
        """Offer ``text`` as a fact about the user; the outcome says whether it was kept.

        ``verbatim=True`` stores ``text`` as one memory exactly as given, without
        extraction (``memorysync-local``; see docs/ag2-v1.md)."""
        return await self.memory(session_id).save(text, verbatim=verbatim)

    async def clear(
        self, scope: ClearScope | None = None, *, session_id: str | None = None
    ) -> ClearResult:
        """Forget a session's facts and transcript (``"user"``: every memory of the user)."""
        chosen = self._settings.clear_scope if scope is None else check_clear_scope(scope)
        return await self.memory(session_id).clear(chosen)

    def report(self) -> DeliveryReport:
        """Delivered, refused and pending turns so far."""
        return self._kit.report()

    async def _users_data_memory(self) -> UserMemory:
        await self.flush()  # captured turns land before an export or an erase
        return self.memory()

    async def flush(self, timeout: float = 10.0) -> DeliveryReport:
        """Wait (up to ``timeout`` seconds) for the queued turns; the report as of then."""
        return await self._kit.flush(timeout)

    async def aclose(self, timeout: float | None = None) -> DeliveryReport:
        """Flush, stop delivering and release the connection; the report.

        ``timeout=None``: ``MEMORYSYNC_CLOSE_TIMEOUT`` seconds (5 when unset).

        It counts the turns captured since the previous ``aclose``; what is left at
        interpreter exit is delivered by the core's exit handler (at most 5 s).
        """
        return await self._kit.aclose(timeout)


class _MemoryTurn(BaseMiddleware):
    """One turn's memory: recall before each model call, capture after the turn."""

    def __init__(self, event: BaseEvent, context: Context, *, owner: MemorySyncMiddleware) -> None:
        super().__init__(event, context)
        self._owner = owner
        self._recalled: tuple[str, RecallResult] | None = None

    async def on_turn(
        self, call_next: AgentTurn, event: BaseEvent, context: Context
    ) -> ModelResponse:
        owner = self._owner
        memory = owner.memory(owner.session_for(context))
        said = human_text(event)  # "" when resumed from tool results
        # Captured now (its seq and time are the human's) but queued after the turn:
        # the reply's own recall can then never find facts drawn from this message.
        human = memory.capture("user", said) if said.strip() else None
        try:
            response = await call_next(event, context)
        finally:
            owner.queue(human)
        reply = response.content  # None for a tool-call-only response
        if isinstance(reply, str) and reply.strip():
            owner.queue(memory.capture("assistant", reply))
        return response

    async def on_llm_call(
        self, call_next: LLMCall, events: Sequence[BaseEvent], context: Context
    ) -> ModelResponse:
        block = await self._block(events)
        if not block:
            return await call_next(events, context)
        # ``events`` is the stored history itself: the block goes in a copy of the
        # prompt for this call only, and the prompt is put back whatever happens.
        prompt = context.prompt
        context.prompt = [*prompt, block]
        try:
            return await call_next(events, context)
        finally:
            context.prompt = prompt

    async def _block(self, events: Sequence[BaseEvent]) -> str:
        query = latest_human_text(events)
        if not query:
            return ""
        # A tool round-trip calls the model again for the same message: one recall.
        if self._recalled is None or self._recalled[0] != query:
            self._recalled = (query, await self._owner.recall(query))
        return self._recalled[1].block
