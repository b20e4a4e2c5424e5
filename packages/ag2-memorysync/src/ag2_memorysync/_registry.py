"""Which agents carry the capability, and which relayed utterances were already captured.

Capabilities that write to the same place (base URL, project, tenant, user, session)
share one group, so an utterance is stored once however many attached agents see it:

- an attached agent's own words are captured by its send hook; the receiving side
  skips messages whose sender is attached to the same group;
- a group-chat manager relays one message object to every member; the first attached
  member that receives it captures it, the others recognise the same object. A
  message object delivered again to a member that already saw it is a new utterance,
  so nothing here depends on time or on the text.

Different users (or sessions) are different groups and each captures its own copy.
"""

from __future__ import annotations

import collections
import threading
import weakref
from dataclasses import dataclass

# Relayed message objects remembered per group (a strong reference keeps each id unique).
_MAX_RELAYS = 4096

GroupKey = tuple[str, str | None, str | None, str, str]


@dataclass(frozen=True)
class Attachment:
    """How one agent is attached: its role override and which sides it captures."""

    speaks_for_person: bool | None
    captures_sent: bool
    captures_received: bool


class Group:
    """Attachments and relay bookkeeping for one (server, user, session) destination."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._attached: weakref.WeakKeyDictionary[object, Attachment] = weakref.WeakKeyDictionary()
        self._relays: collections.OrderedDict[int, tuple[object, set[int]]] = (
            collections.OrderedDict()
        )

    def attach(self, agent: object, attachment: Attachment) -> bool:
        """Record ``agent``; False when it was already attached to this group."""
        with self.lock:
            if agent in self._attached:
                return False
            self._attached[agent] = attachment
            return True

    def attachment(self, agent: object) -> Attachment | None:
        """How ``agent`` is attached to this group, or None."""
        try:
            return self._attached.get(agent)
        except TypeError:  # an unhashable or non-weakref-able object is never attached
            return None

    def first_sight_of_relay(self, message: object, receiver: object) -> bool:
        """True when this delivery of a relayed ``message`` is a new utterance.

        The same object reaching another member is the same utterance (False); reaching
        a member that already received it means it was said again (True).
        """
        key, who = id(message), id(receiver)
        with self.lock:
            entry = self._relays.get(key)
            if entry is not None and entry[0] is message and who not in entry[1]:
                entry[1].add(who)
                return False
            self._relays[key] = (message, {who})
            self._relays.move_to_end(key)
            while len(self._relays) > _MAX_RELAYS:
                self._relays.popitem(last=False)
            return True


_groups: dict[GroupKey, Group] = {}
_groups_lock = threading.Lock()


def group_for(key: GroupKey) -> Group:
    """The shared group for ``key`` (created on first use)."""
    with _groups_lock:
        group = _groups.get(key)
        if group is None:
            group = _groups[key] = Group()
        return group
