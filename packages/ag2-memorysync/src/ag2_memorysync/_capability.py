"""MemorySyncCapability: the automatic memory loop for AG2's classic ConversableAgent."""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import math
import threading
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from memorysync_core import (
    DEFAULT_CONTEXT_TEMPLATE,
    AdapterSettings,
    CapturedTurn,
    ClearResult,
    ClearScope,
    DeliveryQueue,
    RecalledMemory,
    RecallResult,
    SaveOutcome,
    UserMemory,
    check_clear_scope,
)

from . import _holds
from ._bridge import BRIDGE, EXIT_FLUSH_SECONDS, track
from ._content import utterance_text
from ._holds import HOLD_MARGIN, RECALLERS, HeldTurns, UserKey
from ._injection import (
    copy_for_model,
    editable_last,
    is_copy_hook_registered,
    prompt_of,
    show_to_model,
)
from ._protocols import HookableAgent
from ._registry import Attachment, Group, Membership
from ._roles import has_model, speaks_for_a_person

if TYPE_CHECKING:
    import httpx

_logger = logging.getLogger("memorysync.ag2")
_recall_logger = logging.getLogger("memorysync.recall")

T = TypeVar("T")
Capture = Literal["both", "sent", "received"]
_SURFACE = "ag2"


@dataclass
class _LoopState:
    """What lives on one generation of the background loop (re-created after fork)."""

    generation: int
    memory: UserMemory
    queue: DeliveryQueue
    held: HeldTurns
    warming: asyncio.Task[None] | None = None

    @property
    def pending(self) -> int:
        """Captured turns not delivered yet, held ones included."""
        return self.queue.pending + self.held.count

    async def aclose(self, timeout: float) -> int:
        """Flush for up to ``timeout`` seconds, stop the queue, release the connection."""
        self.held.release()
        left = await self.queue.aclose(timeout)
        warming = self.warming
        if warming is not None and not warming.done():
            # Closing the client under an in-flight warm-up would strand its socket: let it
            # finish (it never raises), within the same bound as the flush.
            await asyncio.wait({warming}, timeout=max(timeout, 0.1))
            warming.cancel()
        await self.memory.aclose()
        return left


class _Slot:
    """Holds a capability's loop state, so a finalizer can reach it without the capability."""

    state: _LoopState | None = None


def _abandon(slot: _Slot) -> None:
    """A capability was collected without ``close()``: release its state on the loop."""
    state, slot.state = slot.state, None
    if state is None or state.generation != BRIDGE.generation or not BRIDGE.running:
        return
    future = BRIDGE.submit(state.aclose(EXIT_FLUSH_SECONDS))
    future.add_done_callback(_consume)


class MemorySyncCapability:
    """Long-term memory for AG2 agents: recall before each reply, capture of every turn.

    Attach it to any agents of a chat with :meth:`add_to_agent`. From then on:

    - every utterance (an attached agent's own messages, and messages it receives from
      agents without the capability) is stored once in the ``ag2::<session_id>``
      transcript, with role ``user`` when the speaker speaks for a person (see
      :func:`speaks_for_a_person`) and ``assistant`` otherwise; the person's words also
      feed fact extraction. Tool calls and tool results are never stored;
    - before an attached agent's model replies, the memories recalled for the incoming
      message are put in front of it, in the model's input only (``chat_messages`` and
      the transcript never contain them), within ``recall_timeout`` seconds.

    Capture never waits on the network: turns are queued on a background event loop
    and delivered with retries; :meth:`flush` waits for them, :meth:`close` flushes and
    releases the connection.

    Args:
        user_id: The end user the memories belong to (required).
        session_id: The transcript scope, stored as ``ag2::<session_id>``.
        top_k: Memories recalled per turn.
        recall_timeout: Hard budget in seconds for one recall, the first one included.
        min_prompt_chars: Messages shorter than this (stripped) trigger no recall.
        context_template: Frames the recalled memories; must contain ``{context}``.
        capture: ``"both"`` (default), ``"sent"`` (attached agents' own words only) or
            ``"received"`` (only what attached agents receive from others).
        api_key: MemorySync key; defaults to ``MEMORYSYNC_API_KEY``.
        base_url: Server URL; defaults to ``MEMORYSYNC_BASE_URL`` or the hosted service.
        project_id: Pins a project (``X-Project-ID``); defaults to ``MEMORYSYNC_PROJECT_ID``.
        tenant_id: Skips tenant resolution when given.
        transport: An ``httpx.AsyncBaseTransport`` (tests, the embedded local server).
        min_score: Drop recalled memories scoring below this.
        max_context_chars: Cap on the recalled block's body.
        clear_scope: What :meth:`clear` deletes by default: ``"session"`` or ``"user"``.
        request_timeout: Per-request timeout in seconds of the explicit calls and of
            each delivery attempt (the hot path is bounded by ``recall_timeout``).

    Example::

        from autogen import ConversableAgent, UserProxyAgent
        from ag2_memorysync import MemorySyncCapability

        assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
        user = UserProxyAgent("user", code_execution_config=False)
        memory = MemorySyncCapability(user_id="alice", session_id="support")
        memory.add_to_agent(assistant)
        user.initiate_chat(assistant, message="I live in Lisbon.")
        memory.close()
    """

    def __init__(
        self,
        *,
        user_id: str,
        session_id: str = "default",
        top_k: int = 5,
        recall_timeout: float = 1.2,
        min_prompt_chars: int = 8,
        context_template: str = DEFAULT_CONTEXT_TEMPLATE,
        capture: Capture = "both",
        api_key: str | None = None,
        base_url: str | None = None,
        project_id: str | None = None,
        tenant_id: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        min_score: float | None = None,
        max_context_chars: int | None = None,
        clear_scope: ClearScope = "session",
        request_timeout: float = 10.0,
    ) -> None:
        if capture not in ("both", "sent", "received"):
            raise ValueError(f"capture must be 'both', 'sent' or 'received', got {capture!r}")
        self._settings = AdapterSettings.build(
            surface=_SURFACE,
            user_id=user_id,
            session_id=session_id,
            top_k=top_k,
            recall_timeout=recall_timeout,
            min_prompt_chars=min_prompt_chars,
            clear_scope=clear_scope,
            request_timeout=request_timeout,
            context_template=context_template,
            min_score=min_score,
            max_context_chars=max_context_chars,
            api_key=api_key,
            base_url=base_url,
            project_id=project_id,
            tenant_id=tenant_id,
            transport=transport,
        )
        first = self._settings.open()
        api = first.api
        self._first: UserMemory | None = first
        self._scope = first.scope
        self._recall_timeout = first.recall_timeout
        self._capture = capture
        key = (api.base_url, api.project_id, tenant_id, user_id, session_id)
        self._user_key: UserKey = key[:4]
        self._agents: weakref.WeakSet[object] = weakref.WeakSet()  # attached by this one
        # Released by close() or, failing that, when this capability is collected.
        self._membership = Membership(key)
        self._group: Group = self._membership.group
        self._slot = _Slot()  # its state is touched on the background loop only
        finalizer = weakref.finalize(self, _abandon, self._slot)
        # The exit handler flushes live capabilities instead (``atexit`` is a documented,
        # writable attribute that typeshed lists as read-only).
        finalizer.atexit = False  # type: ignore[misc]
        self._closed = False
        self._close_lock = threading.Lock()
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ attributes

    @property
    def user_id(self) -> str:
        """The end user the memories belong to."""
        return self._settings.user_id

    @property
    def session_id(self) -> str:
        """The session; the transcript scope is ``ag2::<session_id>``."""
        return self._settings.session_id

    @property
    def scope(self) -> str:
        """The transcript scope, ``"ag2::<session_id>"``."""
        return self._scope

    def __repr__(self) -> str:
        return (
            f"MemorySyncCapability(user_id={self.user_id!r}, session_id={self.session_id!r}, "
            f"capture={self._capture!r})"
        )

    def __enter__(self) -> MemorySyncCapability:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------------ attaching

    def add_to_agent(self, agent: object, speaks_for_person: bool | None = None) -> None:
        """Register the capability's hooks on ``agent`` (a second call is a no-op).

        Args:
            agent: A classic AG2 ``ConversableAgent`` (or subclass).
            speaks_for_person: Overrides :func:`speaks_for_a_person` for this agent:
                True stores its words as the person's, False as the assistant's.

        Raises:
            TypeError: ``agent`` has no AG2 hook system.
            ValueError: ``speaks_for_person`` is not None, True or False.
            RuntimeError: the capability is closed.
        """
        # Everything is checked before the agent is touched, so attaching either
        # completes or leaves the agent as it was.
        if self._closed:
            raise RuntimeError("this MemorySyncCapability is closed")
        if not isinstance(agent, HookableAgent):
            raise TypeError(
                f"add_to_agent expects an AG2 ConversableAgent with register_hook, got "
                f"{type(agent).__name__}; install the classic framework "
                "(pip install autogen, or ag2<0.14.1) and pass one of its agents"
            )
        _check_hook_lists(agent)
        if speaks_for_person is not None and not isinstance(speaks_for_person, bool):
            raise ValueError(
                f"speaks_for_person must be None, True or False, got {speaks_for_person!r}"
            )
        attachment = Attachment(
            speaks_for_person=speaks_for_person,
            captures_sent=self._capture in ("both", "sent"),
            captures_received=self._capture in ("both", "received"),
            owner=self._membership.owner,
        )
        if agent in self._agents:
            return
        if not self._group.attach(agent, attachment):
            return
        self._agents.add(agent)
        self._register(agent)
        RECALLERS.add(self._user_key, self)
        track(self)  # the exit handler flushes it, even before its first turn is queued
        self._submit_quietly(self._warm_up())

    def _register(self, agent: HookableAgent) -> None:
        def before_send(
            sender: object, message: object, recipient: object, silent: object = None
        ) -> object:
            self._guard("send", lambda: self._on_send(agent, message, recipient))
            return message

        agent.register_hook("process_message_before_send", before_send)

        original = getattr(agent, "_process_received_message", None)
        if callable(original):
            # The only seam that sees every received message, including group-chat
            # relays that ask for no reply; same signature on every classic release.
            def process_received(message: Any, sender: Any, silent: Any) -> Any:
                result = original(message, sender, silent)
                self._guard("receive", lambda: self._on_receive(agent, message, sender))
                return result

            agent._process_received_message = process_received  # type: ignore[attr-defined]
        else:
            self._warn_once(
                "no-receive",
                "%s has no _process_received_message: capturing its sent messages only",
                type(agent).__name__,
            )

        if not is_copy_hook_registered(agent):  # shared by every capability on the agent
            agent.register_hook("process_all_messages_before_reply", copy_for_model)

        def memorysync_recall(
            recipient: object,
            messages: list[dict[str, Any]] | None = None,
            sender: object = None,
            config: object = None,
        ) -> tuple[bool, None]:
            self._guard("recall", lambda: self._recall_sync(recipient, messages))
            return False, None

        async def a_memorysync_recall(
            recipient: object,
            messages: list[dict[str, Any]] | None = None,
            sender: object = None,
            config: object = None,
        ) -> tuple[bool, None]:
            try:
                await self._recall_async(recipient, messages)
            except Exception as exc:
                self._warn_once("recall-error", "recall hook failed open: %s", type(exc).__name__)
            return False, None

        def every_sender(sender: object) -> bool:
            return True

        # Position 0: before the model's reply function (and before termination checks),
        # seeing the copy returned by copy_for_model. The async twin serves async chats;
        # the marker left on the copy stops the other from running again.
        agent.register_reply(every_sender, memorysync_recall, position=0)
        agent.register_reply(
            every_sender, a_memorysync_recall, position=0, ignore_async_in_sync_chat=True
        )

    # ------------------------------------------------------------------ capture

    def _on_send(self, agent: object, message: object, recipient: object) -> None:
        attachment = self._acting_attachment(agent)
        if attachment is None or not attachment.captures_sent:
            return
        text = utterance_text(message)
        if text is None:
            return
        speaker = _relayed_from(agent, message, exclude=recipient)
        if speaker is None:
            self._capture_turn(agent, text)
            return
        # A relay of something this agent received earlier: captured on arrival when
        # this attachment captures received messages.
        if attachment.captures_received:
            return
        self._capture_relay(speaker, message, recipient, text)

    def _on_receive(self, agent: object, message: object, sender: object) -> None:
        attachment = self._acting_attachment(agent)
        if attachment is None or not attachment.captures_received:
            return
        sender_attachment = self._group.attachment(sender)
        if sender_attachment is not None and sender_attachment.captures_sent:
            return  # the sender's own send hook handled it
        text = utterance_text(message)
        if text is None:
            return
        speaker = _relayed_from(sender, message, exclude=agent)
        if speaker is None:
            self._capture_turn(sender, text)
        else:
            self._capture_relay(speaker, message, agent, text)

    def _capture_relay(self, speaker: object, message: object, receiver: object, text: str) -> None:
        speaker_attachment = self._group.attachment(speaker)
        if speaker_attachment is not None and speaker_attachment.captures_sent:
            return  # captured by the speaker's send hook
        if self._group.first_sight_of_relay(message, receiver):
            self._capture_turn(speaker, text)

    def _acting_attachment(self, agent: object) -> Attachment | None:
        """This capability's attachment to ``agent`` when it does the work there."""
        if self._closed:
            return None
        attachment = self._group.attachment(agent)
        if attachment is None or attachment.owner is not self._membership.owner:
            return None  # not attached, or another capability of the group acts
        return attachment

    def _capture_turn(self, speaker: object, text: str) -> None:
        attachment = self._group.attachment(speaker)
        override = attachment.speaks_for_person if attachment is not None else None
        person = override if override is not None else speaks_for_a_person(speaker)
        name = getattr(speaker, "name", None)
        turn = CapturedTurn.capture(
            "user" if person else "assistant",
            text,
            scope=self._scope,
            name=name if isinstance(name, str) else None,
        )
        # A person's words feed fact extraction: held until the reply they prompt has
        # recalled (see _holds), so that recall never finds them.
        budget = RECALLERS.budget(self._user_key) if person else None
        BRIDGE.call_soon(lambda: self._enqueue(turn, budget))

    def _enqueue(self, turn: CapturedTurn, budget: float | None) -> None:
        held = self._loop_state().held
        if budget is None:
            held.add(turn)
        else:
            held.hold(self._user_key, turn, budget + HOLD_MARGIN)

    # ------------------------------------------------------------------ recall

    def _is_persons(self, agent: object) -> bool:
        attachment = self._group.attachment(agent)
        if attachment is not None and attachment.speaks_for_person is not None:
            return attachment.speaks_for_person
        return speaks_for_a_person(agent)

    def _recalls_on(self, agent: object) -> bool:
        """True when this capability recalls before ``agent``'s model replies."""
        if self._acting_attachment(agent) is None:
            return False
        return has_model(agent) and not self._is_persons(agent)

    def _recall_budget(self) -> float | None:
        """``recall_timeout`` while some agent this capability serves may recall, else None."""
        if any(self._recalls_on(agent) for agent in list(self._agents)):
            return self._recall_timeout
        return None

    def _recall_prompt(
        self, agent: object, messages: list[dict[str, Any]] | None
    ) -> tuple[list[dict[str, Any]], str | None] | None:
        """(the editable copy, the prompt or None) when this turn is ours to handle."""
        if not self._recalls_on(agent):
            return None
        last = editable_last(agent, messages, self._membership.owner)
        if last is None or messages is None:
            return None
        prompt = prompt_of(last)
        if prompt is None or len(prompt) < max(self._settings.min_prompt_chars, 1):
            return messages, None
        return messages, prompt

    def _recall_sync(self, agent: object, messages: list[dict[str, Any]] | None) -> None:
        target = self._recall_prompt(agent, messages)
        if target is None:
            return
        copy, prompt = target
        ticket = _Ticket()
        block = ""
        try:
            if prompt is not None and not BRIDGE.in_loop_thread():
                future = BRIDGE.submit(self._recall(prompt, ticket))
                try:
                    block = future.result(timeout=self._recall_timeout).block
                except concurrent.futures.TimeoutError:
                    future.cancel()
                    self._over_budget()
        finally:
            self._release_held(ticket)
        show_to_model(copy, block, self._membership.owner)

    async def _recall_async(self, agent: object, messages: list[dict[str, Any]] | None) -> None:
        target = self._recall_prompt(agent, messages)
        if target is None:
            return
        copy, prompt = target
        ticket = _Ticket()
        block = ""
        try:
            if prompt is not None:
                future = BRIDGE.submit(self._recall(prompt, ticket))
                try:
                    # Awaiting a wrapped thread-safe future: the caller's loop keeps running.
                    result = await asyncio.wait_for(
                        asyncio.wrap_future(future), self._recall_timeout
                    )
                    block = result.block
                except asyncio.TimeoutError:
                    self._over_budget()
        finally:
            self._release_held(ticket)
        show_to_model(copy, block, self._membership.owner)

    async def _recall(self, prompt: str, ticket: _Ticket) -> RecallResult:
        # Captures reach the loop in order, so every turn held before this point was
        # captured before this reply's message was answered: release those only.
        ticket.mark = _holds.mark()
        return await self._loop_state().memory.recall(prompt)

    def _release_held(self, ticket: _Ticket) -> None:
        """The recall finished, was skipped or ran out of time: let held turns go."""
        key = self._user_key
        BRIDGE.call_soon(lambda: _holds.release(key, ticket.mark))

    def _over_budget(self) -> None:
        _recall_logger.warning(
            "recall did not finish within %.2f s; replying without memories this turn",
            self._recall_timeout,
        )

    # ------------------------------------------------------------------ explicit calls

    def search(
        self, query: str, *, k: int | None = None, min_score: float | None = None
    ) -> list[RecalledMemory]:
        """Search the user's memories; raises the core's typed errors on failure.

        Raises:
            ValueError: ``query`` is empty (or ``k`` / ``min_score`` are invalid).
            RuntimeError: the capability is closed.

        Example::

            for found in memory.search("Where does the user live?"):
                print(found.text, found.score)
        """
        if not isinstance(query, str) or not query.strip():
            raise ValueError(f"query must be a non-empty string, got {query!r:.40}")
        return self._call(lambda state: state.memory.search(query, k=k, min_score=min_score))

    def save(self, text: str, *, metadata: dict[str, Any] | None = None) -> SaveOutcome:
        """Offer ``text`` as a fact; the server decides whether it is kept. Raises on failure.

        Example::

            outcome = memory.save("The user prefers window seats.")
            print(outcome.describe())
        """
        return self._call(lambda state: state.memory.save(text, metadata=metadata))

    def clear(self, scope: ClearScope | None = None) -> ClearResult:
        """Delete this session's memories and transcript (``scope="user"``: all the user's).

        Defaults to the ``clear_scope`` given at construction. Pending captured turns
        are flushed first so they cannot land after the deletion. Raises on failure.
        """
        chosen = (
            self._settings.clear_scope if scope is None else check_clear_scope(scope, name="scope")
        )
        self.flush()
        return self._call(lambda state: state.memory.clear(chosen))

    def flush(self, timeout: float = 10.0) -> int:
        """Wait up to ``timeout`` seconds for captured turns; the number still undelivered."""
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, (int, float))
            or not math.isfinite(timeout)
            or timeout < 0
        ):
            raise ValueError(f"timeout must be a finite number of seconds >= 0, got {timeout!r}")
        if BRIDGE.in_loop_thread():
            raise RuntimeError("flush() cannot be called from the MemorySync background loop")
        if not BRIDGE.running:
            return 0
        future = BRIDGE.submit(self._flush(float(timeout)))
        try:
            return future.result(timeout=timeout + 1.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            state = self._slot.state
            return state.pending if state is not None else 0

    async def _flush(self, timeout: float) -> int:
        state = self._slot.state
        if state is None or state.generation != BRIDGE.generation:
            return 0
        state.held.release()  # flushing means delivering now
        return await state.queue.flush(timeout)

    def close(self, timeout: float = 10.0) -> None:
        """Flush for up to ``timeout`` seconds, then release the queue and the connection.

        Idempotent. Afterwards the hooks do nothing and explicit calls raise RuntimeError.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        RECALLERS.discard(self._user_key, self)
        self._membership.release()
        if not BRIDGE.running or BRIDGE.in_loop_thread():
            return
        future = BRIDGE.submit(self._aclose(timeout))
        try:
            left = future.result(timeout=timeout + 2.0)
        except concurrent.futures.TimeoutError:
            future.cancel()
            return
        if left:
            _logger.warning("closed with %s captured turns undelivered", left)

    async def _aclose(self, timeout: float) -> int:
        state, self._slot.state = self._slot.state, None
        if state is None or state.generation != BRIDGE.generation:
            return 0
        return await state.aclose(timeout)

    def _flush_at_exit(self, timeout: float) -> int:
        # Bounded by ``timeout`` itself (no grace period): the exit handler shares one
        # deadline among every live capability.
        if self._closed or BRIDGE.in_loop_thread() or not BRIDGE.running:
            return 0
        state = self._slot.state
        if timeout <= 0:
            return state.pending if state is not None else 0
        future = BRIDGE.submit(self._flush(timeout))
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            state = self._slot.state
            return state.pending if state is not None else 0

    # ------------------------------------------------------------------ plumbing

    def _loop_state(self) -> _LoopState:
        """This capability's state on the current loop generation (loop thread only)."""
        state = self._slot.state
        generation = BRIDGE.generation
        if state is not None and state.generation == generation:
            return state
        memory = self._first
        self._first = None
        if memory is None:  # after a fork: a fresh client for the child's loop
            memory = self._settings.open()

        async def deliver(turns: Sequence[CapturedTurn]) -> None:
            await memory.record_turns(turns)

        queue = DeliveryQueue(deliver)
        state = _LoopState(generation, memory, queue, HeldTurns(queue.submit))
        self._slot.state = state
        track(self)
        return state

    def _call(self, call: Callable[[_LoopState], Awaitable[T]]) -> T:
        if self._closed:
            raise RuntimeError("this MemorySyncCapability is closed")
        if BRIDGE.in_loop_thread():
            raise RuntimeError("explicit calls cannot run on the MemorySync background loop")

        async def run() -> T:
            return await call(self._loop_state())

        return BRIDGE.submit(run()).result()

    async def _warm_up(self) -> None:
        state = self._loop_state()
        state.warming = asyncio.current_task()
        await state.memory.api.warm_up()

    def _submit_quietly(self, coro: Any) -> None:
        future = BRIDGE.submit(coro)
        future.add_done_callback(_consume)

    def _guard(self, where: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # a hook must never break the chat
            self._warn_once(f"{where}-error", "%s hook failed open: %s", where, type(exc).__name__)

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            _logger.warning(message, *args)


class _Ticket:
    """The hold mark taken when a recall started (None: it never started)."""

    mark: int | None = None


def _check_hook_lists(agent: object) -> None:
    hook_lists = getattr(agent, "hook_lists", None)
    if not isinstance(hook_lists, dict):
        return  # register_hook itself will say what is wrong
    missing = [
        name
        for name in ("process_message_before_send", "process_all_messages_before_reply")
        if name not in hook_lists
    ]
    if missing:
        raise TypeError(
            f"add_to_agent needs the classic AG2 hooks {missing} on {type(agent).__name__}; "
            "install the classic framework (pip install autogen, or ag2<0.14.1)"
        )


def _relayed_from(holder: object, message: object, *, exclude: object) -> object | None:
    """The agent whose words ``holder`` is passing on, or None if they are its own.

    A group-chat manager relays the very dict it stored when the speaker sent it, so
    the speaker is the conversation partner whose stored list holds that object.
    """
    if not isinstance(message, dict):
        return None
    stored = getattr(holder, "_oai_messages", None)
    if not isinstance(stored, dict):
        return None
    partner: object
    for partner, conversation in stored.items():
        if partner is exclude or not isinstance(conversation, list):
            continue
        if any(item is message for item in reversed(conversation)):
            return partner
    return None


def _consume(future: concurrent.futures.Future[Any]) -> None:
    if not future.cancelled() and future.exception() is not None:
        _logger.debug("background task failed: %s", type(future.exception()).__name__)
