"""MemorySyncCapability: the automatic memory loop for AG2's classic ConversableAgent.

What is AG2's lives here: the hooks and reply functions, whose words a message is, how
the recalled block reaches the model, which agent already captured an utterance. The
background loop, capture order, held person turns, the recall deadline and delivery
belong to the core's ``SyncUserMemory``.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from memorysync_core import (
    AdapterOptions,
    AdapterSettings,
    ClearResult,
    ClearScope,
    DeliveryReport,
    Moment,
    RecalledMemory,
    SaveOutcome,
    SyncUserMemory,
)
from memorysync_core.adapters import AdapterAttributes, SyncUsersDataMethods

from ._content import utterance_text
from ._injection import (
    copy_for_model,
    editable_last,
    is_copy_hook_registered,
    prompt_of,
    show_to_model,
)
from ._protocols import HookableAgent
from ._registry import Attachment, Group, group_for
from ._roles import has_model, speaks_for_a_person

if TYPE_CHECKING:
    from typing_extensions import Unpack

_logger = logging.getLogger("memorysync.ag2")

Capture = Literal["both", "sent", "received"]
_SURFACE = "ag2"


class MemorySyncCapability(
    AdapterAttributes, SyncUsersDataMethods
):  # + list_memories, export, forget_user...
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

    Capture never waits on the network: the core's ``SyncUserMemory`` queues turns on
    its background event loop and delivers them with retries, each carrying its
    capture order (``seq``); with an ``outbox`` each turn is also written to that file
    as it is captured, so a killed process loses none. :meth:`flush` waits for them
    and :meth:`close` flushes and releases the connection; both return a
    ``DeliveryReport``.

    Args:
        user_id: The end user the memories belong to. Required unless ``settings``
            carries one, which is then used: ``None`` without ``settings`` raises
            ``ValueError``. Never generated.
        settings: An ``AdapterSettings`` to start from (another adapter's, say).
        capture: ``"both"`` (default), ``"sent"`` (attached agents' own words only) or
            ``"received"`` (only what attached agents receive from others).
        **options: The settings every MemorySync adapter takes
            (``memorysync_core.AdapterOptions``): ``session_id`` (stored as
            ``ag2::<session_id>``), ``top_k``, ``recall_timeout``, ``min_prompt_chars``,
            ``context_template``, ``clear_scope``, ``request_timeout`` (each explicit
            call and delivery attempt), ``api_key``, ``base_url``, ``project_id``,
            ``tenant_id``, ``transport``, ``min_score``, ``max_context_chars``,
            ``outbox`` (a SQLite file keeping every captured turn until the server has
            it, see docs/faults.md). Read them back from :attr:`settings`.

    Example:
        ```python
        from autogen import ConversableAgent, UserProxyAgent
        from ag2_memorysync import MemorySyncCapability

        assistant = ConversableAgent("assistant", llm_config=llm_config, human_input_mode="NEVER")
        user = UserProxyAgent("user", code_execution_config=False)
        memory = MemorySyncCapability(user_id="alice", session_id="support")
        memory.add_to_agent(assistant)
        user.initiate_chat(assistant, message="I live in Lisbon.")
        assert memory.close().all_delivered
        ```
    """

    def __init__(
        self,
        *,
        user_id: str | None = None,
        settings: AdapterSettings | None = None,
        capture: Capture = "both",
        **options: Unpack[AdapterOptions],
    ) -> None:
        if capture not in ("both", "sent", "received"):
            raise ValueError(f"capture must be 'both', 'sent' or 'received', got {capture!r}")
        self._settings = AdapterSettings.build(
            surface=_SURFACE, user_id=user_id, settings=settings, **options
        )
        self._memory: SyncUserMemory = SyncUserMemory(self._settings, recalls=self._may_recall)
        self._capture = capture
        self._agents: weakref.WeakSet[object] = weakref.WeakSet()  # attached by this one
        self._owner = object()  # marks this capability's attachments (no reference back)
        self._group = group_for(self._memory.destination)  # dropped by close()
        self._warned: set[str] = set()

    # ------------------------------------------------------------------ attributes

    @property
    def session_id(self) -> str:
        """The session; the transcript scope is ``ag2::<session_id>``."""
        return self._settings.session_id

    @property
    def scope(self) -> str:
        """The transcript scope, ``"ag2::<session_id>"``."""
        return self._memory.scope

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
        if self._memory.closed:
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
            owner=self._owner,
        )
        if agent in self._agents or not self._group.attach(agent, attachment):
            return
        self._agents.add(agent)
        self._register(agent)
        self._memory.warm_up()

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
            recipient: object, messages: Any = None, sender: object = None, config: object = None
        ) -> tuple[bool, None]:
            target = self._recall_target(recipient, messages)
            if target is not None:
                block = self._memory.recall(target[1]).block
                show_to_model(target[0], block, self._owner)
            return False, None

        async def a_memorysync_recall(
            recipient: object, messages: Any = None, sender: object = None, config: object = None
        ) -> tuple[bool, None]:
            target = self._recall_target(recipient, messages)
            if target is not None:
                block = (await self._memory.arecall(target[1])).block
                show_to_model(target[0], block, self._owner)
            return False, None

        def every_sender(sender: object) -> bool:
            return True

        # Position 0: before the model's reply function (and before termination checks),
        # seeing the copy returned by copy_for_model. The async twin serves async chats;
        # the marker left on the copy stops the other from running again. Neither
        # raises: the core's recall fails open.
        agent.register_reply(every_sender, memorysync_recall, position=0)
        agent.register_reply(
            every_sender, a_memorysync_recall, position=0, ignore_async_in_sync_chat=True
        )

    # ------------------------------------------------------------------ capture

    def _on_send(self, agent: object, message: object, recipient: object) -> None:
        attachment = self._acting_attachment(agent)
        text = utterance_text(message)
        if attachment is None or not attachment.captures_sent or text is None:
            return
        speaker = _relayed_from(agent, message, exclude=recipient)
        if speaker is None:
            self._capture_turn(agent, text)
        elif not attachment.captures_received:
            # A relay of something this agent received earlier (captured on arrival
            # when this attachment captures received messages).
            self._capture_relay(speaker, message, recipient, text)

    def _on_receive(self, agent: object, message: object, sender: object) -> None:
        attachment = self._acting_attachment(agent)
        if attachment is None or not attachment.captures_received:
            return
        sender_attachment = self._group.attachment(sender)
        text = utterance_text(message)
        if (sender_attachment is not None and sender_attachment.captures_sent) or text is None:
            return  # the sender's own send hook handled it, or nothing to store
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
        attachment = self._group.attachment(agent)  # none once closed: an empty group
        if attachment is None or attachment.owner is not self._owner:
            return None  # not attached, or another capability of the group acts
        return attachment

    def _is_persons(self, agent: object) -> bool:
        attachment = self._group.attachment(agent)
        if attachment is not None and attachment.speaks_for_person is not None:
            return attachment.speaks_for_person
        return speaks_for_a_person(agent)

    def _capture_turn(self, speaker: object, text: str) -> None:
        name = getattr(speaker, "name", None)
        self._memory.capture(
            "user" if self._is_persons(speaker) else "assistant",
            text,
            name=name if isinstance(name, str) else None,
        )

    # ------------------------------------------------------------------ recall

    def _recalls_on(self, agent: object) -> bool:
        """True when this capability recalls before ``agent``'s model replies."""
        if self._acting_attachment(agent) is None:
            return False
        return has_model(agent) and not self._is_persons(agent)

    def _may_recall(self) -> bool:
        """Whether some agent this capability serves may recall (person turns are held)."""
        return any(self._recalls_on(agent) for agent in list(self._agents))

    def _recall_target(
        self, agent: object, messages: object
    ) -> tuple[list[dict[str, Any]], str | None] | None:
        """(the editable copy, the prompt) when this turn is ours to handle."""
        if not self._recalls_on(agent):
            return None
        last = editable_last(agent, messages, self._owner)
        if last is None or not isinstance(messages, list):
            return None
        return messages, prompt_of(last)

    # ------------------------------------------------------------------ explicit calls

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        min_score: float | None = None,
        since: Moment | None = None,
        until: Moment | None = None,
    ) -> list[RecalledMemory]:
        """Search the user's memories (``since`` / ``until``: only those said in that
        window); raises the core's typed errors on failure.

        Raises:
            ValueError: ``query`` is empty (or ``k`` / ``min_score`` are invalid).
            RuntimeError: the capability is closed.

        Example:
            ```python
            for found in memory.search("Where does the user live?"):
                print(found.text, found.score)
            ```
        """
        return self._memory.search(query, k=k, min_score=min_score, since=since, until=until)

    def save(
        self, text: str, *, metadata: dict[str, Any] | None = None, verbatim: bool = False
    ) -> SaveOutcome:
        """Offer ``text`` as a fact; the server decides whether it is kept. Raises on failure.

        ``verbatim=True`` stores ``text`` as one memory exactly as given, without
        extraction (``memorysync-local``; see docs/ag2.md).

        Example:
            ```python
            outcome = memory.save("The user prefers window seats.")
            print(outcome.describe())
            ```
        """
        return self._memory.save(text, metadata=metadata, verbatim=verbatim)

    def clear(self, scope: ClearScope | None = None) -> ClearResult:
        """Delete this session's memories and transcript (``scope="user"``: all the user's).

        Defaults to the ``clear_scope`` given at construction. Pending captured turns
        are flushed first so they cannot land after the deletion. Raises on failure.
        """
        return self._memory.clear(scope)

    def flush(self, timeout: float = 10.0) -> DeliveryReport:
        """Wait up to ``timeout`` seconds for the captured turns; what became of them.

        Held person turns are released first. The report counts every turn this
        capability captured: ``delivered``, ``refused`` (with ``reasons``; a refused
        turn is never counted as delivered) and ``pending``.

        Example:
            ```python
            report = memory.flush()
            assert report.all_delivered, report.reasons
            ```
        """
        return self._memory.flush(timeout)

    def close(self, timeout: float | None = None) -> DeliveryReport:
        """Flush for up to ``timeout`` seconds, then release the queue and the connection.

        ``timeout=None``: ``MEMORYSYNC_CLOSE_TIMEOUT`` seconds (5 when unset).

        Idempotent (returns the same report again). Afterwards the hooks do nothing and
        explicit calls raise RuntimeError.
        """
        self._group.detach_owned_by(self._owner)
        self._group = Group()  # lets the shared group go once its last member closes
        return self._memory.close(timeout)

    # ------------------------------------------------------------------ plumbing

    def _guard(self, where: str, action: Callable[[], None]) -> None:
        try:
            action()
        except Exception as exc:  # a hook must never break the chat
            self._warn_once(f"{where}-error", "%s hook failed open: %s", where, type(exc).__name__)

    def _warn_once(self, key: str, message: str, *args: object) -> None:
        if key not in self._warned:
            self._warned.add(key)
            _logger.warning(message, *args)


def _check_hook_lists(agent: object) -> None:
    hooks = getattr(agent, "hook_lists", None)  # not a dict: register_hook will complain
    needed = ("process_message_before_send", "process_all_messages_before_reply")
    missing = [name for name in needed if isinstance(hooks, dict) and name not in hooks]
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
    stored = getattr(holder, "_oai_messages", None)
    if not isinstance(message, dict) or not isinstance(stored, dict):
        return None
    partner: object
    for partner, conversation in stored.items():
        if partner is exclude or not isinstance(conversation, list):
            continue
        if any(item is message for item in reversed(conversation)):
            return partner
    return None
