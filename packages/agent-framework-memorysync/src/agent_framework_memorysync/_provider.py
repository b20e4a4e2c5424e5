"""``MemorySyncContextProvider``: Agent Framework's ``ContextProvider`` on memorysync-core."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agent_framework import AgentSession, ContextProvider, SessionContext
from typing_extensions import Unpack

from memorysync_core import (
    AdapterOptions,
    AdapterSettings,
    ClearResult,
    ClearScope,
    DeliveryReport,
    Moment,
    RecalledMemory,
    SaveOutcome,
    UserMemory,
)
from memorysync_core.adapters import (
    AdapterAttributes,
    AdapterKit,
    UsersDataMethods,
    check_clear_scope,
)

from ._turns import latest_user_text, person_turns, reply_text

logger = logging.getLogger("memorysync.agent_framework")

SURFACE = "agent-framework"
RUN_USER_OPTION = "memorysync_user_id"


class MemorySyncContextProvider(ContextProvider, AdapterAttributes, UsersDataMethods):
    """An Agent Framework ``ContextProvider`` that recalls what a user told your agents.

    ``before_run`` recalls for the latest user message of the run's input, within
    ``recall_timeout`` seconds (tenant lookup included), and adds the block to the
    run's instructions: one block per run, never stored in the session's history.
    ``after_run`` captures what the person said and the agent's reply into the
    transcript ``agent-framework::<session>`` (the user's turns go to fact
    extraction); delivery runs in the background, in order, retried with the same ids.
    Neither hook raises into the run: a failure is logged and the run goes on.

    The memory's session is the framework's ``AgentSession`` id unless ``session_id``
    is given. The user is ``user_id``, or a run's ``options={"memorysync_user_id": ...}``.

    Args:
        user_id: End user the memories belong to. Required unless ``settings``
            carries one, which is then used: ``None`` without ``settings`` raises
            ``ValueError``. Never generated.
        settings: An ``AdapterSettings`` to start from (another adapter's, say).
        source_id: The provider's id in the agent (attribution, ``session.state`` key).
        **options: The settings every MemorySync adapter takes
            (``memorysync_core.AdapterOptions``): ``top_k``, ``recall_timeout``,
            ``min_prompt_chars``, ``context_template``, ``clear_scope``,
            ``request_timeout``, ``api_key`` (never stored in session state),
            ``base_url``, ``project_id``, ``tenant_id``, ``transport``, ``min_score``,
            ``max_context_chars``. ``session_id`` here pins one session for every run;
            without it the memory follows the framework's ``AgentSession`` id. Read them
            back from :attr:`settings`.

    Example:
        ```python
        from agent_framework import Agent
        from agent_framework_memorysync import MemorySyncContextProvider

        async with MemorySyncContextProvider(user_id="customer-42") as memory:
            agent = Agent(client, instructions="You are helpful.", context_providers=[memory])
            session = agent.create_session()
            print(await agent.run("I live in Lisbon.", session=session))
        ```
    """

    DEFAULT_SOURCE_ID = "memorysync"
    # Inside the agent-loop middleware, capture once per user turn (not per iteration).
    after_run_once_per_turn = True

    def __init__(
        self,
        *,
        user_id: str | None = None,
        settings: AdapterSettings | None = None,
        source_id: str = DEFAULT_SOURCE_ID,
        **options: Unpack[AdapterOptions],
    ) -> None:
        if not isinstance(source_id, str) or not source_id.strip():
            raise ValueError(f"source_id must be a non-empty string, got {source_id!r}")
        super().__init__(source_id)
        session_id = options.get("session_id")  # None: follow the framework's session
        options["session_id"] = "default" if session_id is None else session_id
        self._settings = AdapterSettings.build(
            surface=SURFACE,
            user_id=user_id,
            settings=settings,
            **options,
        )
        self._kit = AdapterKit(self._settings)  # validates the user, session and key
        self._memory = self._kit.home
        self._fixed_session = session_id

    # -- settings ----------------------------------------------------------------------

    @property
    def session_id(self) -> str | None:
        """The fixed session, or None when the memory follows the ``AgentSession``."""
        return self._fixed_session

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(user_id={self.user_id!r}, session_id={self._fixed_session!r}, "
            f"base_url={self._memory.api.base_url!r})"
        )

    def memory_for(
        self, session: AgentSession | str | None = None, user_id: str | None = None
    ) -> UserMemory:
        """The core memory of ``user_id`` (default: this provider's) in ``session``.

        ``session`` is an ``AgentSession``, a session id, or None (the fixed session,
        else ``"default"``). A fixed ``session_id`` always wins, as in the runs.
        """
        if self._fixed_session is not None or session is None:
            session_id = self._settings.session_id
        else:
            session_id = session if isinstance(session, str) else session.session_id
        return self._kit.memory_for(session_id, user_id)

    def _run_memory(self, context: SessionContext) -> UserMemory:
        # A run names its user with options={"memorysync_user_id": ...} (as in 1.1.0). It
        # is taken out of the options before the agent hands them to the chat client, and
        # kept in the run's metadata for after_run.
        key = f"memorysync.user_id:{self.source_id}"
        user = context.metadata.get(key)
        if user is None and isinstance(context.options, dict):
            user = context.options.pop(RUN_USER_OPTION, None)
        memory = self.memory_for(context.session_id, user if isinstance(user, str) else None)
        context.metadata[key] = memory.user_id
        return memory

    # -- the hooks ---------------------------------------------------------------------

    async def before_run(
        self, *, agent: Any, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        """Recall for the run's latest user message and add the block to its instructions.

        Never raises (except cancellation) and never waits longer than
        ``recall_timeout`` for the server: on any failure the run has no block.
        """
        try:
            memory = self._run_memory(context)
            # JSON-native on purpose: the framework's session stores serialize it.
            state.update(user_id=memory.user_id, scope=memory.scope)
            query = latest_user_text(context.input_messages)
            if not self._settings.wants_recall(query):
                return
            recalled = await memory.recall(query)
            if recalled.block:
                # Instructions, not messages: every chat client (OpenAI, Anthropic,
                # Gemini) renders them as system text, and no history provider stores them.
                context.extend_instructions(self.source_id, recalled.block)
        except Exception as exc:
            logger.warning(
                "recall skipped (%s); the run goes on without memory", type(exc).__name__
            )

    async def after_run(
        self, *, agent: Any, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        """Capture the person's words and the reply; queued, never waits for the network."""
        try:
            memory = self._run_memory(context)
            said = person_turns(context.input_messages)
            if not said:
                return
            # The caller's message id is the capture id: a run retried with the same
            # message is stored once; a genuine repeat is a new message, stored again.
            turn_id = said[-1].message_id or None
            turns = [memory.capture("user", m.text) for m in said[:-1]]
            turns.append(memory.capture("user", said[-1].text, turn_id=turn_id))
            reply = reply_text(context.response.messages) if context.response else ""
            if reply.strip():
                turns.append(memory.capture("assistant", reply, turn_id=turn_id))
            self._kit.submit(turns)  # each turn knows its user and session
        except Exception as exc:
            logger.warning("capture skipped (%s)", type(exc).__name__)

    # -- explicit calls ----------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        k: int | None = None,
        min_score: float | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> list[RecalledMemory]:
        """Search the user's memories (all sessions; ``since`` / ``until``: only those said
        in that window); raises the typed errors on failure."""
        return await self._memory.search(query, k=k, min_score=min_score, since=since, until=until)

    async def save(
        self,
        text: str,
        *,
        metadata: Mapping[str, Any] | None = None,
        session: AgentSession | str | None = None,
        verbatim: bool = False,
    ) -> SaveOutcome:
        """Offer ``text`` as a fact; the server decides what is kept. Raises on failure.

        ``verbatim=True`` stores ``text`` as one memory exactly as given, without
        extraction (``memorysync-local``; see docs/agent-framework.md).
        """
        if not isinstance(text, str) or not text.strip():
            raise ValueError(f"text must be non-empty text, got {text!r:.40}")
        return await self.memory_for(session).save(text, metadata=metadata, verbatim=verbatim)

    async def clear(
        self,
        scope: ClearScope | None = None,
        *,
        session: AgentSession | str | None = None,
    ) -> ClearResult:
        """Delete a session's facts and transcript, or (``"user"``) every memory of the user.

        ``scope`` defaults to ``clear_scope``. Turns still queued are delivered first,
        so nothing captured before the call survives it. Raises on failure.
        """
        chosen = (
            self._settings.clear_scope if scope is None else check_clear_scope(scope, name="scope")
        )
        await self.flush()
        return await self.memory_for(session).clear(chosen)

    async def _users_data_memory(self) -> UserMemory:
        await self.flush()  # captured turns land before an export or an erase
        return self.memory_for(None)

    # -- lifetime ----------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Captured turns not yet delivered (or refused)."""
        return self._kit.pending

    async def flush(self, timeout: float | None = 10.0) -> DeliveryReport:
        """Wait until every captured turn is delivered or refused (or ``timeout`` passes).

        The report counts every turn captured since the provider was made.
        """
        return await self._kit.flush(timeout)

    async def close(self, timeout: float | None = None) -> DeliveryReport:
        """Deliver what is queued (up to ``timeout``), release the connection; the report.

        ``timeout=None``: ``MEMORYSYNC_CLOSE_TIMEOUT`` seconds (5 when unset).

        Idempotent. The provider stays usable: a later run opens a connection again and
        must be closed again. The report counts the turns captured since the previous
        ``close``; what is left at interpreter exit is delivered by the core's exit
        handler (at most 5 s).
        """
        return await self._kit.aclose(timeout)

    aclose = close

    async def __aenter__(self) -> MemorySyncContextProvider:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()
