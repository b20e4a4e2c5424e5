"""The SQLite schema: numbered migrations, each a script and an optional Python step.

``database.Database`` runs the versions a file lacks, in one transaction, when it
opens it. The per-memory edit records (``memory_revisions``) and the index of
when memories were said are created apart, with ``IF NOT EXISTS``
(:data:`REVISIONS_DDL`, :data:`SAID_INDEX_DDL`), when a server opens the file.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from memorysync_local._storage.sqlite.backfill import backfill_attributes, backfill_stems

SCHEMA_VERSION = 7

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE memories (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        text TEXT NOT NULL,
        kind TEXT NOT NULL DEFAULT 'other',
        source TEXT,
        session_id TEXT,
        metadata TEXT NOT NULL DEFAULT '{}',
        tags TEXT,
        importance REAL,
        origin TEXT NOT NULL,
        history_id INTEGER,
        request_id TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX memories_by_user ON memories (tenant_id, user_id, created_at, id);
    CREATE INDEX memories_by_history ON memories (history_id) WHERE history_id IS NOT NULL;
    CREATE VIRTUAL TABLE memories_fts USING fts5 (
        text, content='memories', content_rowid='id', tokenize='porter unicode61'
    );
    CREATE TRIGGER memories_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_fts (rowid, text) VALUES (new.id, new.text);
    END;
    CREATE TRIGGER memories_ad AFTER DELETE ON memories BEGIN
        INSERT INTO memories_fts (memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
    END;
    CREATE TABLE turn_receipts (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        speaker TEXT NOT NULL,
        occurred_at TEXT NOT NULL,
        text_hash TEXT NOT NULL,
        request_id TEXT NOT NULL,
        received_at TEXT NOT NULL
    );
    CREATE INDEX turn_receipts_replay
        ON turn_receipts (tenant_id, user_id, speaker, occurred_at, text_hash, received_at);
    CREATE TABLE history (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        source TEXT NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        content_hash TEXT NOT NULL,
        seq INTEGER,
        occurred_at TEXT,
        payload TEXT,
        idempotency_key TEXT,
        created_at TEXT NOT NULL
    );
    CREATE INDEX history_by_session ON history (tenant_id, user_id, session_id, seq, id);
    CREATE UNIQUE INDEX history_idempotency_key
        ON history (tenant_id, user_id, session_id, idempotency_key)
        WHERE idempotency_key IS NOT NULL;
    CREATE UNIQUE INDEX history_seq_role_content
        ON history (tenant_id, user_id, session_id, seq, role, content_hash)
        WHERE seq IS NOT NULL AND idempotency_key IS NULL;
    CREATE TABLE client_refs (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        client_ref TEXT NOT NULL,
        memory_ids TEXT NOT NULL,
        PRIMARY KEY (tenant_id, user_id, client_ref)
    );
    CREATE TABLE usage (
        key_id TEXT NOT NULL,
        month TEXT NOT NULL,
        adds INTEGER NOT NULL DEFAULT 0,
        refused INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (key_id, month)
    );
    """,
    # Conversation order: a stored sort key (seq, else occurred_at, else created_at,
    # the times in integer microseconds since the epoch) and an index that lists a
    # session in that order. The seq lookup index serves the contract's retry rule
    # (same seq + role + content, whatever the idempotency keys); the old unique
    # index stays as it was, so existing rows never make the upgrade fail.
    2: """
    ALTER TABLE history ADD COLUMN sort_key INTEGER;
    UPDATE history SET sort_key = COALESCE(seq, ms_micros(occurred_at), ms_micros(created_at));
    DROP INDEX history_by_session;
    CREATE INDEX history_in_order ON history (tenant_id, user_id, session_id, sort_key, id);
    CREATE INDEX history_by_seq ON history (tenant_id, user_id, session_id, seq, role)
        WHERE seq IS NOT NULL;
    """,
    # Recall by word forms: each memory's stems and a token of its owner so that a
    # search reads only that user's postings. Filled for existing memories by
    # backfill_stems (AFTER). Since issue 34 the table is re-made with exact terms by
    # backfill.reindex_words whenever the running analyzer did not make it.
    3: """
    CREATE VIRTUAL TABLE memories_stems USING fts5 (
        owner, stems, tokenize='unicode61', prefix='3 4 5'
    );
    CREATE TRIGGER memories_stems_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_stems (rowid, owner, stems)
        VALUES (new.id, ms_owner(new.tenant_id, new.user_id), ms_stems(new.text));
    END;
    CREATE TRIGGER memories_stems_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memories_stems WHERE rowid = old.id;
    END;
    """,
    # Background extraction (--async-extraction) that survives a crash: each job is
    # written in the same transaction as the turn it comes from, and deleted in the
    # transaction that stores its facts.
    4: """
    CREATE TABLE extraction_jobs (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        text TEXT NOT NULL,
        context TEXT NOT NULL,
        created_at TEXT NOT NULL
    );
    """,
    # Recall by meaning (memorysync_local._recall.vectors): one vector per memory, with the
    # embedder that made it; written with the memory when an embedder is configured,
    # filled for older memories at start (backfill_vectors), deleted with the memory.
    5: """
    CREATE TABLE memory_vectors (
        memory_id INTEGER PRIMARY KEY,
        model TEXT NOT NULL,
        vector BLOB NOT NULL
    );
    CREATE TRIGGER memory_vectors_ad AFTER DELETE ON memories BEGIN
        DELETE FROM memory_vectors WHERE memory_id = old.id;
    END;
    """,
    # Per user, how many vectors were added and memories removed: each recall by
    # meaning reads its user's row to keep its in-memory matrix in step with the file
    # (memorysync_local._recall.vector_index), whichever process wrote. Erasing a user deletes
    # their row; meta's vector_erasures then counts up, so no held matrix outlives it.
    6: """
    CREATE TABLE vector_changes (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        added INTEGER NOT NULL DEFAULT 0,
        removed INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (tenant_id, user_id)
    );
    CREATE TRIGGER vector_changes_ai AFTER INSERT ON memory_vectors BEGIN
        INSERT INTO vector_changes (tenant_id, user_id, added)
        SELECT tenant_id, user_id, 1 FROM memories WHERE id = new.memory_id
        ON CONFLICT (tenant_id, user_id) DO UPDATE SET added = added + 1;
    END;
    CREATE TRIGGER vector_changes_ad AFTER DELETE ON memories BEGIN
        INSERT INTO vector_changes (tenant_id, user_id, removed)
        VALUES (old.tenant_id, old.user_id, 1)
        ON CONFLICT (tenant_id, user_id) DO UPDATE SET removed = removed + 1;
    END;
    CREATE TRIGGER vector_changes_erased AFTER DELETE ON vector_changes BEGIN
        INSERT INTO meta (key, value) VALUES ('vector_erasures', '1')
        ON CONFLICT (key) DO UPDATE SET value = CAST(value AS INTEGER) + 1;
    END;
    """,
    # Memory that stays true (memorysync_local._service.validity): when each memory was said,
    # the attribute it states, and, once a newer fact or a retraction closed it, when
    # it stopped holding and what replaced it (valid_until NULL = current). A memory's
    # stems also index its attribute's words (_attributes.attribute_words). Existing
    # memories are said when written; their attributes are filled by
    # backfill_attributes (AFTER), which also supersedes all but the newest.
    7: """
    ALTER TABLE memories ADD COLUMN said_at TEXT;
    ALTER TABLE memories ADD COLUMN attribute TEXT;
    ALTER TABLE memories ADD COLUMN valid_until TEXT;
    ALTER TABLE memories ADD COLUMN superseded_by INTEGER;
    UPDATE memories SET said_at = created_at;
    CREATE INDEX memories_current_attribute ON memories (tenant_id, user_id, attribute)
        WHERE valid_until IS NULL AND attribute IS NOT NULL;
    DROP TRIGGER memories_stems_ai;
    CREATE TRIGGER memories_stems_ai AFTER INSERT ON memories BEGIN
        INSERT INTO memories_stems (rowid, owner, stems)
        VALUES (
            new.id,
            ms_owner(new.tenant_id, new.user_id),
            ms_stems(new.text || ' ' || ms_attribute_words(new.attribute))
        );
    END;
    """,
}
# Python steps that run after a version's statements, in the same transaction.
AFTER: dict[int, Callable[[sqlite3.Connection], object]] = {
    3: backfill_stems,
    7: backfill_attributes,
}


# Per-memory change records (the official client's ``history(id)``). Created outside
# the numbered migrations, with IF NOT EXISTS: an older server opening the file
# ignores the table, and the trigger drops a memory's records with it, so an erase
# never leaves what a memory said behind.
REVISIONS_DDL = (
    "CREATE TABLE IF NOT EXISTS memory_revisions ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, memory_id INTEGER NOT NULL,"
    " changed_fields TEXT NOT NULL, diff TEXT NOT NULL, created_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memory_revisions_by_memory ON memory_revisions (memory_id, id)",
    "CREATE TRIGGER IF NOT EXISTS memory_revisions_ad AFTER DELETE ON memories BEGIN"
    " DELETE FROM memory_revisions WHERE memory_id = old.id; END",
)

# Recall of a question naming a date reads the user's memories said in a period
# (``SQLiteMemories.said_in``); without this index that is a scan of all of them. The
# second indexes the expression the reads filter on (``records.SAID_TIME_SQL``).
SAID_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS memories_said ON memories (tenant_id, user_id, said_at)",
    "CREATE INDEX IF NOT EXISTS memories_said_time ON memories"
    " (tenant_id, user_id, COALESCE(said_at, created_at))",
)

# Who said a memory and its place in its session (recall's dialog rules read them:
# ``_recall/dialog.py``), added to ``memories`` when a server opens the file, as
# nullable columns (an older server reading the file ignores them), with the index
# that reads a session's memories by position.
DIALOG_COLUMNS = (("speaker", "TEXT"), ("session_position", "INTEGER"))
DIALOG_INDEX_DDL = (
    "CREATE INDEX IF NOT EXISTS memories_in_session"
    " ON memories (tenant_id, user_id, session_id, session_position)"
    " WHERE session_position IS NOT NULL",
)


def add_dialog_columns(conn: sqlite3.Connection) -> None:
    """Add :data:`DIALOG_COLUMNS` that ``memories`` lacks (SQLite has no ``ADD COLUMN
    IF NOT EXISTS``), then their index."""
    have = {str(row[1]) for row in conn.execute("PRAGMA table_info(memories)")}
    for name, kind in DIALOG_COLUMNS:
        if name not in have:
            conn.execute(f"ALTER TABLE memories ADD COLUMN {name} {kind}")
    for statement in DIALOG_INDEX_DDL:
        conn.execute(statement)
