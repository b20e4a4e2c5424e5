"""Memory that stays true: supersession, retraction, and which memories a read sees.

A memory is *current* until it stops holding; then it is *superseded*: it keeps
its text and gains ``valid_until`` (when it stopped holding: the time the newer
fact or the retraction was said) and ``superseded_by`` (the memory that replaced
it; null when a retraction closed it). Every memory also carries ``said_at``: when
the user said it (the turn's ``occurred_at``, else the time it was written).

Supersession follows the attribute a fact states (``_attributes.classify``): a new
fact on a single-valued attribute closes the user's current facts on it; on a
multi-valued one it adds. A fact that arrives late (said before the current fact
on its attribute) is stored already superseded by it, so the newest word stands.
"""

from __future__ import annotations

import re
import sqlite3
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from memorysync_local._attributes import attribute_words, classify, is_multi_valued
from memorysync_local._extract import Retraction
from memorysync_local._stemming import Matcher, index_text, query_stems


@dataclass(frozen=True)
class ReadWindow:
    """Which memories a read returns: current ones (or all, ``history``), said in
    ``[since, until)`` when given (canonical timestamps, as ``_timeutil.render``)."""

    history: bool = False
    since: str | None = None
    until: str | None = None

    def keep(self, items: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
        """The items (``memory_item`` dicts) inside this window, in their order."""
        return [item for item in items if self.admits(item)]

    def admits(self, item: dict[str, Any]) -> bool:
        """Whether one ``memory_item`` dict is inside this window."""
        if not self.history and item.get("state") != "current":
            return False
        said = item.get("said_at") or item.get("created_at") or ""
        if self.since is not None and said < self.since:
            return False
        return self.until is None or said < self.until

    def sql(self) -> tuple[str, list[Any]]:
        """The window as extra ``WHERE`` clauses over ``memories`` and their parameters."""
        clauses: list[str] = []
        params: list[Any] = []
        if not self.history:
            clauses.append("valid_until IS NULL")
        if self.since is not None:
            clauses.append("said_at >= ?")
            params.append(self.since)
        if self.until is not None:
            clauses.append("said_at < ?")
            params.append(self.until)
        return "".join(f" AND {c}" for c in clauses), params


CURRENT = ReadWindow()


def validity_fields(row: sqlite3.Row) -> dict[str, Any]:
    """``said_at``, ``state`` and, once superseded, ``valid_until`` and ``superseded_by``."""
    fields: dict[str, Any] = {
        "said_at": row["said_at"] or row["created_at"],
        "state": "current" if row["valid_until"] is None else "superseded",
    }
    if row["valid_until"] is not None:
        fields["valid_until"] = row["valid_until"]
        fields["superseded_by"] = row["superseded_by"]
    return fields


def supersede(
    conn: sqlite3.Connection,
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
        named = conn.execute(
            "SELECT id FROM memories WHERE id = ? AND tenant_id = ? AND user_id = ? "
            "AND valid_until IS NULL",
            (replaces, tenant, user_id),
        ).fetchone()
        closed = [] if named is None else [replaces]
        _close(conn, closed, said_at, memory_id)
        return closed
    if attribute is None or is_multi_valued(attribute):
        return []
    scope = (tenant, user_id, attribute, memory_id)
    newer = conn.execute(
        "SELECT id, said_at FROM memories WHERE tenant_id = ? AND user_id = ? AND attribute = ? "
        "AND valid_until IS NULL AND id != ? AND said_at > ? ORDER BY said_at DESC, id DESC "
        "LIMIT 1",
        (*scope, said_at),
    ).fetchone()
    if newer is not None:  # said before the current fact: history from the start
        _close(conn, [memory_id], str(newer["said_at"]), int(newer["id"]))
        return []
    older = [
        int(r[0])
        for r in conn.execute(
            "SELECT id FROM memories WHERE tenant_id = ? AND user_id = ? AND attribute = ? "
            "AND valid_until IS NULL AND id != ?",
            scope,
        )
    ]
    _close(conn, older, said_at, memory_id)
    return older


def retract(
    conn: sqlite3.Connection, tenant: str, user_id: str, retraction: Retraction, said_at: str
) -> list[int]:
    """Close the user's current memories a retraction denies; their ids.

    A retraction with an attribute closes the current facts on it that name its value;
    without a match there (or an attribute), the current facts that contain every word
    of the denied fact; an empty one closes the most recently said current fact; one
    with a ``memory_id`` closes that memory (when it is the user's and current).
    """
    rows = conn.execute(
        "SELECT id, text, attribute FROM memories WHERE tenant_id = ? AND user_id = ? "
        "AND valid_until IS NULL AND said_at <= ? ORDER BY said_at DESC, id DESC",
        (tenant, user_id, said_at),
    ).fetchall()
    if retraction.memory_id is not None:
        closed = [int(r["id"]) for r in rows if int(r["id"]) == retraction.memory_id]
    elif not retraction.text:
        closed = [int(rows[0]["id"])] if rows else []
    else:
        closed = _by_value(rows, retraction) or _by_words(rows, retraction.text)
    _close(conn, closed, said_at, None)
    return closed


def _by_value(rows: Sequence[sqlite3.Row], retraction: Retraction) -> list[int]:
    if retraction.attribute is None or not retraction.value:
        return []
    named = re.compile(rf"\b{re.escape(retraction.value)}", re.IGNORECASE)
    return [
        int(r["id"])
        for r in rows
        if r["attribute"] == retraction.attribute and named.search(str(r["text"]))
    ]


def _by_words(rows: Sequence[sqlite3.Row], text: str) -> list[int]:
    stems = query_stems(text)
    if not stems:
        return []
    matcher = Matcher(stems)
    return [int(r["id"]) for r in rows if all(matcher.hits(index_text(str(r["text"]))))]


def _close(
    conn: sqlite3.Connection, ids: Sequence[int], until: str, replaced_by: int | None
) -> None:
    conn.executemany(
        "UPDATE memories SET valid_until = ?, superseded_by = ? WHERE id = ?",
        [(until, replaced_by, memory_id) for memory_id in ids],
    )


def backfill_attributes(conn: sqlite3.Connection) -> int:
    """Schema 7's upgrade step: classify every stored memory (and index its attribute's
    words with its stems), then keep only the newest
    current fact per user on each single-valued attribute (each older one superseded by
    the next); how many memories were classified."""
    found = [
        (key[0], int(row[0]), str(row[1]))
        for row in conn.execute("SELECT id, text FROM memories")
        if (key := classify(str(row[1]))) is not None
    ]
    conn.executemany(
        "UPDATE memories SET attribute = ? WHERE id = ?", [(key, i) for key, i, _ in found]
    )
    conn.executemany(
        "UPDATE memories_stems SET stems = ? WHERE rowid = ?",
        [(index_text(f"{text} {attribute_words(key)}"), i) for key, i, text in found],
    )
    groups: dict[tuple[str, str, str], list[tuple[str, int]]] = defaultdict(list)
    for row in conn.execute(
        "SELECT tenant_id, user_id, attribute, said_at, id FROM memories "
        "WHERE attribute IS NOT NULL ORDER BY said_at, id"
    ):
        if not is_multi_valued(str(row[2])):
            groups[(row[0], row[1], row[2])].append((str(row[3]), int(row[4])))
    for facts in groups.values():
        for (_, older), (said, newer) in pairwise(facts):
            _close(conn, [older], said, newer)
    return len(found)
