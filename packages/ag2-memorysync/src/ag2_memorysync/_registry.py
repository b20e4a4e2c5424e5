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

One agent may carry several capabilities. Those of different groups each do their own
work on it; those of the same group would only repeat each other, so the first one
attached acts and the others stand by, taking over when it is released.

Groups are owned by the capabilities that use them: the registry holds them weakly, so
a group lives while a capability holds it, and ``close()`` drops the capability's hold
after detaching the agents it attached (the remaining members then no longer rely on
its silent hooks). A service creating a capability per user and request does not grow.
"""

from __future__ import annotations

import collections
import threading
import weakref
from dataclasses import dataclass

# Relayed message objects remembered per group. A manager hands one object to every
# member in one go, so only the latest relays matter; the strong reference kept with
# each id stops the id from being recycled while it is remembered (message dicts cannot
# be weakly referenced). Forgetting an old relay can only cause a second capture of
# that relay, never a skipped utterance.
MAX_RELAYS = 256

GroupKey = tuple[str, str | None, str | None, str, str]


@dataclass(frozen=True)
class Attachment:
    """How one agent is attached: its role override and which sides it captures."""

    speaks_for_person: bool | None
    captures_sent: bool
    captures_received: bool
    owner: object = None  # the capability's token (its agents are detached on close)


class Group:
    """Attachments and relay bookkeeping for one (server, user, session) destination."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # Per agent, its attachments in attaching order; the first one acts.
        self._attached: weakref.WeakKeyDictionary[object, list[Attachment]] = (
            weakref.WeakKeyDictionary()
        )
        self._relays: collections.OrderedDict[int, tuple[object, set[int]]] = (
            collections.OrderedDict()
        )

    def attach(self, agent: object, attachment: Attachment) -> bool:
        """Record ``agent``; False when ``attachment.owner`` already attached it."""
        with self.lock:
            existing = self._attached.setdefault(agent, [])
            if any(other.owner is attachment.owner for other in existing):
                return False
            existing.append(attachment)
            return True

    def attachment(self, agent: object) -> Attachment | None:
        """How ``agent`` is attached to this group (the acting attachment), or None."""
        try:
            existing = self._attached.get(agent)
        except TypeError:  # an unhashable or non-weakref-able object is never attached
            return None
        return existing[0] if existing else None

    def detach_owned_by(self, owner: object) -> None:
        """Forget the agents attached by ``owner``."""
        with self.lock:
            for agent, existing in list(self._attached.items()):
                kept = [attachment for attachment in existing if attachment.owner is not owner]
                if kept:
                    self._attached[agent] = kept
                else:
                    del self._attached[agent]

    @property
    def relays_remembered(self) -> int:
        """How many relayed message objects are currently remembered."""
        return len(self._relays)

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
            while len(self._relays) > MAX_RELAYS:
                self._relays.popitem(last=False)
            return True


_groups: weakref.WeakValueDictionary[GroupKey, Group] = weakref.WeakValueDictionary()
_groups_lock = threading.Lock()


def group_for(key: GroupKey) -> Group:
    """The group of ``key``'s destination, created on first use; held by the caller."""
    with _groups_lock:
        group = _groups.get(key)
        if group is None:
            group = _groups[key] = Group()
        return group
