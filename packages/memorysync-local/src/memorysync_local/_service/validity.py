"""Memory that stays true: supersession and retraction, over the storage interface.

A memory is *current* until it stops holding; then it is *superseded*: it keeps
its text and gains ``valid_until`` (when it stopped holding: the time the newer
fact or the retraction was said) and ``superseded_by`` (the memory that replaced
it; null when a retraction closed it). Every memory also carries ``said_at``: when
the user said it (the turn's ``occurred_at``, else the time it was written).

Supersession follows the attribute a fact states (``_text.attributes.classify``):
a new fact on a single-valued attribute closes the user's current facts on it; on a
multi-valued one it adds. A fact that arrives late (said before the current fact
on its attribute) is stored already superseded by it, so the newest word stands.
Which memories a read sees is a ``_storage.records.ReadWindow``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memorysync_local._extraction.extractor import Retraction
from memorysync_local._recall.words import Matcher, index_text, query_stems
from memorysync_local._storage.interface import MemoryTable
from memorysync_local._storage.records import MemoryRecord
from memorysync_local._text.attributes import is_multi_valued


def supersede(
    memories: MemoryTable,
    tenant: str,
    user_id: str,
    memory_id: int,
    attribute: str | None,
    said_at: str,
    replaces: int | None = None,
) -> list[int]:
    """Apply a new memory's attribute (or the memory it ``replaces``, an extractor's
    decision): the ids it superseded (in the caller's write)."""
    if replaces is not None:
        named = memories.get(replaces, tenant, user_id)
        closed = [] if named is None or named.valid_until is not None else [replaces]
        memories.close(closed, said_at, memory_id)
        return closed
    if attribute is None or is_multi_valued(attribute):
        return []
    newer = memories.said_later_on_attribute(
        tenant, user_id, attribute, besides=memory_id, said_after=said_at
    )
    if newer is not None:  # said before the current fact: history from the start
        newer_id, newer_said = newer
        memories.close([memory_id], newer_said, newer_id)
        return []
    older = memories.current_on_attribute(tenant, user_id, attribute, besides=memory_id)
    memories.close(older, said_at, memory_id)
    return older


def retract(
    memories: MemoryTable, tenant: str, user_id: str, retraction: Retraction, said_at: str
) -> list[int]:
    """Close the user's current memories a retraction denies; their ids.

    A retraction with an attribute closes the current facts on it that name its value;
    without a match there (or an attribute), the current facts that contain every word
    of the denied fact; an empty one closes the most recently said current fact; one
    with a ``memory_id`` closes that memory (when it is the user's and current).
    """
    found = memories.current_said_by(tenant, user_id, said_at)
    if retraction.memory_id is not None:
        closed = [m.id for m in found if m.id == retraction.memory_id]
    elif not retraction.text:
        closed = [found[0].id] if found else []
    else:
        closed = _by_value(found, retraction) or _by_words(found, retraction.text)
    memories.close(closed, said_at, None)
    return closed


def _by_value(found: Sequence[MemoryRecord], retraction: Retraction) -> list[int]:
    if retraction.attribute is None or not retraction.value:
        return []
    named = re.compile(rf"\b{re.escape(retraction.value)}", re.IGNORECASE)
    return [m.id for m in found if m.attribute == retraction.attribute and named.search(m.text)]


def _by_words(found: Sequence[MemoryRecord], text: str) -> list[int]:
    stems = query_stems(text)
    if not stems:
        return []
    matcher = Matcher(stems)
    return [m.id for m in found if all(matcher.hits(index_text(m.text)))]
