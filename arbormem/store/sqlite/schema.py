"""The SQLite schema and its forward migrations.

Each migration runs once, in order, inside one transaction, and is recorded in
``schema_migrations``. A database whose newest migration is unknown to this
version of arbormem is refused rather than guessed at.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from arbormem.errors import SchemaError
from arbormem.store.sqlite.driver import sqlite3
from arbormem.store.sqlite.windows import WINDOW_RADIUS, window_doc
from arbormem.timeutil import format_timestamp, utcnow

log = logging.getLogger(__name__)

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "messages, sessions, threads, lexical index, vectors",
        """
        CREATE TABLE threads (
            id          INTEGER PRIMARY KEY,
            user_id     TEXT NOT NULL,
            agent_id    TEXT NOT NULL,
            created_at  TEXT NOT NULL,
            next_index  INTEGER NOT NULL DEFAULT 0,
            generation  INTEGER NOT NULL DEFAULT 0,
            UNIQUE (user_id, agent_id)
        );
        CREATE TABLE sessions (
            id          INTEGER PRIMARY KEY,
            thread_id   INTEGER NOT NULL REFERENCES threads(id),
            key         TEXT NOT NULL,
            started_at  TEXT NOT NULL,
            last_at     TEXT NOT NULL,
            first_index INTEGER NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0,
            metadata    TEXT NOT NULL DEFAULT '{}',
            UNIQUE (thread_id, key)
        );
        CREATE TABLE messages (
            id          INTEGER PRIMARY KEY,
            uid         TEXT NOT NULL UNIQUE,
            thread_id   INTEGER NOT NULL REFERENCES threads(id),
            session_id  INTEGER NOT NULL REFERENCES sessions(id),
            idx         INTEGER NOT NULL,
            role        TEXT NOT NULL,
            speaker     TEXT,
            content     TEXT NOT NULL,
            ts          TEXT NOT NULL,
            metadata    TEXT NOT NULL DEFAULT '{}',
            chash       TEXT NOT NULL,
            UNIQUE (thread_id, idx)
        );
        CREATE INDEX messages_by_session ON messages (session_id, idx);
        CREATE INDEX messages_by_time ON messages (thread_id, ts);
        CREATE INDEX messages_by_hash ON messages (chash);
        -- Lexical keys hold analysed terms (arbormem.text), rowid = messages.id.
        CREATE VIRTUAL TABLE turn_fts USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0');
        CREATE VIRTUAL TABLE window_fts USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0');
        -- Vectors are keyed by (model, content hash): the store and the cache in one.
        CREATE TABLE vectors (
            model       TEXT NOT NULL,
            chash       TEXT NOT NULL,
            dim         INTEGER NOT NULL,
            vec         BLOB NOT NULL,
            PRIMARY KEY (model, chash)
        ) WITHOUT ROWID;
        """,
    ),
]

MIGRATIONS.append(
    (
        2,
        "topic tree: nodes, message leaves, tree state, topic indexes, reorganisation log",
        """
        CREATE TABLE tree_nodes (
            id            INTEGER PRIMARY KEY,
            thread_id     INTEGER NOT NULL REFERENCES threads(id),
            parent_id     INTEGER,
            kind          TEXT NOT NULL,
            seq           INTEGER NOT NULL,
            level         INTEGER NOT NULL DEFAULT 0,
            name          TEXT NOT NULL DEFAULT '',
            summary       TEXT NOT NULL DEFAULT '',
            keyphrases    TEXT NOT NULL DEFAULT '[]',
            first_index   INTEGER NOT NULL,
            last_index    INTEGER NOT NULL,
            first_at      TEXT NOT NULL,
            last_at       TEXT NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0,
            child_count   INTEGER NOT NULL DEFAULT 0,
            frozen        INTEGER NOT NULL DEFAULT 0,
            archived      INTEGER NOT NULL DEFAULT 0,
            origin        TEXT NOT NULL DEFAULT 'heuristic',
            chash         TEXT
        );
        CREATE INDEX tree_children ON tree_nodes (thread_id, parent_id, seq);
        CREATE INDEX tree_by_kind ON tree_nodes (thread_id, kind, frozen);
        ALTER TABLE messages ADD COLUMN leaf_id INTEGER;
        -- Soft-archived messages (trivial exchanges) stay stored but leave recall.
        ALTER TABLE messages ADD COLUMN archived INTEGER NOT NULL DEFAULT 0;
        CREATE INDEX messages_by_leaf ON messages (leaf_id);
        CREATE TABLE tree_state (
            thread_id     INTEGER PRIMARY KEY REFERENCES threads(id),
            version       INTEGER NOT NULL DEFAULT 0,
            active_id     INTEGER,
            leaf_id       INTEGER,
            next_seq      INTEGER NOT NULL DEFAULT 0,
            updated_at    TEXT NOT NULL
        );
        CREATE TABLE tree_log (
            id            INTEGER PRIMARY KEY,
            thread_id     INTEGER NOT NULL,
            kind          TEXT NOT NULL,
            at            TEXT NOT NULL,
            stats         TEXT NOT NULL DEFAULT '{}',
            undo          TEXT NOT NULL DEFAULT '[]',
            undone_at     TEXT
        );
        CREATE INDEX tree_log_by_thread ON tree_log (thread_id, id);
        -- Names, summaries and keyphrases of topics (rowid = tree_nodes.id).
        CREATE VIRTUAL TABLE topic_fts USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0');
        -- Full content of the topics that hold leaves (rowid = tree_nodes.id).
        CREATE VIRTUAL TABLE segment_fts USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0');
        CREATE VIRTUAL TABLE turn_vocab USING fts5vocab (turn_fts, 'row')
        """,
    )
)

MIGRATIONS.append(
    (
        3,
        "per-session working memory: mode, tracked state, rolling summary",
        """
        CREATE TABLE session_state (
            thread_id     INTEGER NOT NULL REFERENCES threads(id),
            session_key   TEXT NOT NULL,
            state         TEXT NOT NULL DEFAULT '{}',
            updated_at    TEXT NOT NULL,
            PRIMARY KEY (thread_id, session_key)
        )
        """,
    )
)

MIGRATIONS.append(
    (
        4,
        "windows of two turns either side; running BM25 statistics per lexical key",
        """
        CREATE TABLE lexicon_stats (
            key           TEXT PRIMARY KEY,
            docs          INTEGER NOT NULL DEFAULT 0,
            tokens        INTEGER NOT NULL DEFAULT 0
        );
        CREATE VIRTUAL TABLE window_vocab USING fts5vocab (window_fts, 'row')
        """,
    )
)

MIGRATIONS.append(
    (
        5,
        "a phrase key: adjacent term pairs of each turn's window",
        """
        CREATE VIRTUAL TABLE pair_fts USING fts5 (
            terms, tokenize = "unicode61 remove_diacritics 0 tokenchars '_'"
        );
        CREATE VIRTUAL TABLE pair_vocab USING fts5vocab (pair_fts, 'row')
        """,
    )
)

MIGRATIONS.append(
    (
        6,
        "topic nodes by content hash, so forgetting can find the vectors no one uses",
        """
        CREATE INDEX tree_by_hash ON tree_nodes (chash);
        """,
    )
)

MIGRATIONS.append(
    (
        7,
        "vectors in a rowid table: appended in place instead of split across random pages",
        """
        -- A vector (1 KB at 256 dimensions) is too large for a WITHOUT ROWID row: each
        -- one took an overflow page, and keys by content hash scattered every insert
        -- over the tree (about fifteen pages written per stored exchange).
        CREATE TABLE vectors_rowid (
            id          INTEGER PRIMARY KEY,
            model       TEXT NOT NULL,
            chash       TEXT NOT NULL,
            dim         INTEGER NOT NULL,
            vec         BLOB NOT NULL
        );
        INSERT INTO vectors_rowid (model, chash, dim, vec)
            SELECT model, chash, dim, vec FROM vectors;
        DROP TABLE vectors;
        ALTER TABLE vectors_rowid RENAME TO vectors;
        CREATE UNIQUE INDEX vectors_key ON vectors (chash, model)
        """,
    )
)

MIGRATIONS.append(
    (
        8,
        "messages by speaker, so a thread's speakers are found without reading every message",
        """
        -- Partial: a query must say "speaker IS NOT NULL" (or compare the speaker) to
        -- use it, so the planner never walks it for queries on thread_id alone.
        CREATE INDEX messages_by_speaker ON messages (thread_id, speaker)
            WHERE speaker IS NOT NULL
        """,
    )
)

MIGRATIONS.append(
    (
        9,
        "the tree version that last passed the consistency check, so an unchanged tree is not read again",
        """
        ALTER TABLE tree_state ADD COLUMN checked_version INTEGER
        """,
    )
)

MIGRATIONS.append(
    (
        10,
        "term pairs counted by phrase queries on the window key instead of a third index",
        """
        -- The pair index was only ever read for its document frequencies, and a phrase
        -- query on the window index gives the same counts. Keeping it cost a third of
        -- the full-text writing of every stored message and a fifth of the file.
        DROP TABLE IF EXISTS pair_vocab;
        DROP TABLE IF EXISTS pair_fts;
        DELETE FROM lexicon_stats WHERE key = 'pair'
        """,
    )
)

MIGRATIONS.append(
    (
        11,
        "the sum of each session's vectors, so a search reads one row per session",
        """
        -- Kept by every append, dropped when a session's membership changes otherwise
        -- (forget, archive) and rebuilt by its next append. A session without a row, or
        -- with another model's, is summed from the vector index at search time.
        CREATE TABLE session_vectors (
            session_id  INTEGER PRIMARY KEY,
            model       TEXT NOT NULL,
            total       BLOB NOT NULL
        )
        """,
    )
)

MIGRATIONS.append(
    (
        12,
        "whether each thread's messages were stored in time order, so a date range maps to a rowid range",
        """
        -- 1 while every message's time is at least that of the message stored before
        -- it, and an append that breaks this sets 0 for good. A date-bounded search of
        -- such a thread asks the full-text index for the rows between the first and
        -- the last message of the range instead of every match of the whole thread.
        ALTER TABLE threads ADD COLUMN time_ordered INTEGER NOT NULL DEFAULT 1;
        UPDATE threads SET time_ordered = 0 WHERE id IN (
            SELECT thread_id FROM (
                SELECT thread_id, ts,
                    LAG(ts) OVER (PARTITION BY thread_id ORDER BY id) AS before
                FROM messages
            ) WHERE ts < before
        )
        """,
    )
)

MIGRATIONS.append(
    (
        13,
        "a store-wide counter of forgets and rewrites, for caches to compare cheaply",
        """
        -- Raised by every change that can lower a document count: a thread forgotten,
        -- or its rows rewritten (its generation raised). Cached term statistics compare
        -- it and the newest message id, instead of summing over every thread per search.
        CREATE TABLE store_clock (
            id      INTEGER PRIMARY KEY CHECK (id = 1),
            ticks   INTEGER NOT NULL
        );
        INSERT INTO store_clock (id, ticks) VALUES (1, 0);
        CREATE TRIGGER threads_forgotten AFTER DELETE ON threads
        BEGIN
            UPDATE store_clock SET ticks = ticks + 1 WHERE id = 1;
        END;
        CREATE TRIGGER threads_rewritten AFTER UPDATE OF generation ON threads
        BEGIN
            UPDATE store_clock SET ticks = ticks + 1 WHERE id = 1;
        END
        """,
    )
)

MIGRATIONS.append(
    (
        14,
        "indexes of the archived messages and tree nodes alone",
        """
        -- Archived rows are few (pruned trivial exchanges). A search checks its best
        -- full-text matches against these small indexes instead of reading each
        -- match's row.
        CREATE INDEX messages_archived ON messages (id) WHERE archived = 1;
        CREATE INDEX tree_nodes_archived ON tree_nodes (id) WHERE archived = 1
        """,
    )
)

MIGRATIONS.append(
    (
        15,
        "the tree's shape by node id, apart from names and summaries",
        """
        -- Ranking walks each candidate's leaf and topics up the tree. Read from the
        -- table, every step was a page of names, summaries and keyphrases, scattered
        -- over a large file. This index holds only what the walk reads (37 MB for
        -- 800,000 nodes against 199 MB) and stays in the page cache.
        CREATE INDEX tree_briefs ON tree_nodes
            (id, thread_id, parent_id, kind, first_index, last_index, frozen, archived, chash)
        """,
    )
)

MIGRATIONS.append(
    (
        16,
        "purges still owed by forgets, so a forget cut short by a crash is finished later",
        """
        -- A forget deletes rows and records a 'merge' row in the same transaction. The
        -- purge that merges the full-text indexes (which keep deleted terms until then)
        -- replaces it with one 'rewrite' row, which the rewrite of the file (VACUUM)
        -- clears. A process killed in between leaves its row for the next one.
        CREATE TABLE pending_purges (
            id          INTEGER PRIMARY KEY,
            stage       TEXT NOT NULL CHECK (stage IN ('merge', 'rewrite')),
            thread_id   INTEGER,
            at          TEXT NOT NULL
        )
        """,
    )
)

MIGRATIONS.append(
    (
        17,
        "threads partitioned by tenant: unique by (tenant, user, agent)",
        """
        -- A server keeps many tenants in one store, and two tenants' 'alice' are two
        -- people: the tenant is part of a thread's key. SQLite cannot change a table's
        -- UNIQUE constraint, so the table is rebuilt (its ids, which every other table
        -- refers to, are kept) and its triggers made again.
        CREATE TABLE threads_v17 (
            id           INTEGER PRIMARY KEY,
            tenant       TEXT NOT NULL DEFAULT '',
            user_id      TEXT NOT NULL,
            agent_id     TEXT NOT NULL,
            created_at   TEXT NOT NULL,
            next_index   INTEGER NOT NULL DEFAULT 0,
            generation   INTEGER NOT NULL DEFAULT 0,
            time_ordered INTEGER NOT NULL DEFAULT 1,
            UNIQUE (tenant, user_id, agent_id)
        );
        INSERT INTO threads_v17
            (id, tenant, user_id, agent_id, created_at, next_index, generation, time_ordered)
            SELECT id, '', user_id, agent_id, created_at, next_index, generation, time_ordered
            FROM threads;
        DROP TABLE threads;
        ALTER TABLE threads_v17 RENAME TO threads;
        CREATE TRIGGER threads_forgotten AFTER DELETE ON threads
        BEGIN
            UPDATE store_clock SET ticks = ticks + 1 WHERE id = 1;
        END;
        CREATE TRIGGER threads_rewritten AFTER UPDATE OF generation ON threads
        BEGIN
            UPDATE store_clock SET ticks = ticks + 1 WHERE id = 1;
        END
        """,
    )
)

MIGRATIONS.append(
    (
        18,
        "typed records: their full-text terms, sources, composites and extraction cursor",
        """
        -- One row per record (arbormem.records), unique by id in its thread. The
        -- subject is kept again as its sorted words between spaces (subject_key), so
        -- subjects are matched word by word on the index, and sort_at orders newest first.
        CREATE TABLE records (
            id            INTEGER PRIMARY KEY,
            thread_id     INTEGER NOT NULL REFERENCES threads(id),
            uid           TEXT NOT NULL,
            kind          TEXT NOT NULL,
            text          TEXT NOT NULL,
            subject       TEXT,
            subject_key   TEXT,
            attribute     TEXT,
            value         TEXT,
            negated       INTEGER NOT NULL DEFAULT 0,
            tags          TEXT NOT NULL DEFAULT '[]',
            entities      TEXT NOT NULL DEFAULT '[]',
            sources       TEXT NOT NULL DEFAULT '[]',
            valid_from    TEXT,
            valid_to      TEXT,
            superseded_by TEXT,
            supersedes    TEXT,
            confidence    REAL NOT NULL DEFAULT 0.5,
            importance    REAL NOT NULL DEFAULT 0.5,
            created_at    TEXT,
            updated_at    TEXT,
            sort_at       TEXT NOT NULL,
            recall_count  INTEGER NOT NULL DEFAULT 0,
            mentions      INTEGER NOT NULL DEFAULT 1,
            intent        TEXT,
            body          TEXT,
            UNIQUE (thread_id, uid)
        );
        CREATE INDEX records_about ON records (thread_id, attribute, subject_key)
            WHERE attribute IS NOT NULL;
        -- Few records are closed or replace another: deleting one splices its chain
        -- through these small indexes.
        CREATE INDEX records_closed_by ON records (thread_id, superseded_by)
            WHERE superseded_by IS NOT NULL;
        CREATE INDEX records_replacing ON records (thread_id, supersedes)
            WHERE supersedes IS NOT NULL;
        -- Which records cite which message ids (kept in step with records.sources),
        -- so forgetting a message finds its records without reading them all.
        CREATE TABLE record_sources (
            thread_id   INTEGER NOT NULL,
            message_id  TEXT NOT NULL,
            record_id   INTEGER NOT NULL,
            PRIMARY KEY (thread_id, message_id, record_id)
        ) WITHOUT ROWID;
        CREATE INDEX record_sources_by_record ON record_sources (record_id);
        -- Analysed terms of each record's text, subject and value (rowid = records.id).
        CREATE VIRTUAL TABLE record_fts USING fts5 (terms, tokenize = 'unicode61 remove_diacritics 0');
        CREATE TABLE record_composites (
            id          INTEGER PRIMARY KEY,
            thread_id   INTEGER NOT NULL REFERENCES threads(id),
            uid         TEXT NOT NULL,
            level       INTEGER NOT NULL,
            text        TEXT NOT NULL,
            members     TEXT NOT NULL,
            entities    TEXT NOT NULL DEFAULT '[]',
            tags        TEXT NOT NULL DEFAULT '[]',
            first_at    TEXT,
            last_at     TEXT,
            extra       TEXT NOT NULL DEFAULT '{}',
            UNIQUE (thread_id, uid)
        );
        -- Members (record or composite ids) by composite, so deleting a record finds
        -- the composites built on it.
        CREATE TABLE record_composite_members (
            thread_id    INTEGER NOT NULL,
            member       TEXT NOT NULL,
            composite_id INTEGER NOT NULL,
            PRIMARY KEY (thread_id, member, composite_id)
        ) WITHOUT ROWID;
        -- The position of the first message record extraction has not read yet.
        CREATE TABLE record_cursor (
            thread_id   INTEGER PRIMARY KEY REFERENCES threads(id),
            next_index  INTEGER NOT NULL
        )
        """,
    )
)

MIGRATIONS.append(
    (
        19,
        "image memories: their rows, a vision model's captions, and bytes kept in a table",
        """
        -- An image memory: its caption is indexed through a message of its thread
        -- (caption_rowid, NULL while soft-expired), its bytes are kept once per
        -- content hash beside the store (image_blobs only for in-memory stores).
        CREATE TABLE images (
            id             INTEGER PRIMARY KEY,
            uid            TEXT NOT NULL UNIQUE,
            thread_id      INTEGER NOT NULL REFERENCES threads(id),
            digest         TEXT NOT NULL,
            mime           TEXT NOT NULL,
            size           INTEGER NOT NULL,
            width          INTEGER,
            height         INTEGER,
            phash          TEXT,
            session_key    TEXT NOT NULL,
            ts             TEXT NOT NULL,
            caption        TEXT NOT NULL,
            caption_source TEXT NOT NULL,
            scene          TEXT NOT NULL,
            importance     REAL NOT NULL,
            entities       TEXT NOT NULL DEFAULT '[]',
            speaker        TEXT,
            caption_rowid  INTEGER,
            shared_in      TEXT,
            url            TEXT,
            metadata       TEXT NOT NULL DEFAULT '{}',
            recalls        INTEGER NOT NULL DEFAULT 0,
            recalled_at    TEXT,
            expired_at     TEXT,
            created_at     TEXT NOT NULL,
            UNIQUE (thread_id, digest)
        );
        CREATE INDEX images_by_caption ON images (caption_rowid);
        CREATE INDEX images_by_session ON images (thread_id, session_key);
        CREATE INDEX images_by_digest ON images (digest);
        CREATE TABLE image_captions (
            digest  TEXT NOT NULL,
            model   TEXT NOT NULL,
            answer  TEXT NOT NULL,
            PRIMARY KEY (digest, model)
        );
        CREATE TABLE image_blobs (
            digest  TEXT PRIMARY KEY,
            data    BLOB NOT NULL
        );
        -- Forgetting the message that indexes a caption forgets the image with it.
        CREATE TRIGGER images_caption_forgotten AFTER DELETE ON messages
        BEGIN
            DELETE FROM images WHERE caption_rowid = old.id;
        END;
        CREATE TRIGGER images_thread_forgotten AFTER DELETE ON threads
        BEGIN
            DELETE FROM images WHERE thread_id = old.id;
        END
        """,
    )
)
MIGRATIONS.append(
    (
        20,
        "tree versions carry a structure epoch in their high 32 bits",
        """
        -- Nothing to rewrite: every version stored so far is in epoch 0. The number
        -- keeps out earlier arbormem, which would move a reshaped tree's version
        -- without moving its epoch, and so leave other processes' searches reading
        -- the tree as it was (see store/sqlite/tree.py, EPOCH_BITS).
        UPDATE tree_state SET version = version WHERE 0
        """,
    )
)

#: Work a migration does in Python after its SQL (same transaction).
STEPS: dict[int, Callable[[sqlite3.Connection], None]] = {}


def _rebuild_windows_and_stats(conn: sqlite3.Connection) -> None:

    conn.execute("DELETE FROM window_fts")
    sessions = [r[0] for r in conn.execute("SELECT id FROM sessions")]
    window_tokens = 0
    for sid in sessions:
        rows = conn.execute(
            "SELECT m.id, f.terms FROM messages m JOIN turn_fts f ON f.rowid = m.id"
            " WHERE m.session_id = ? ORDER BY m.idx",
            (sid,),
        ).fetchall()
        for i, (rowid, _) in enumerate(rows):
            doc = window_doc(
                [t for _, t in rows[max(0, i - WINDOW_RADIUS) : i + WINDOW_RADIUS + 1]]
            )
            window_tokens += len(doc.split())
            conn.execute("INSERT INTO window_fts (rowid, terms) VALUES (?, ?)", (rowid, doc))
    turn_docs, turn_tokens = 0, 0
    for (terms,) in conn.execute("SELECT terms FROM turn_fts"):
        turn_docs += 1
        turn_tokens += len(terms.split())
    conn.execute(
        "INSERT OR REPLACE INTO lexicon_stats VALUES ('turn', ?, ?)", (turn_docs, turn_tokens)
    )
    conn.execute(
        "INSERT OR REPLACE INTO lexicon_stats VALUES ('window', ?, ?)", (turn_docs, window_tokens)
    )


STEPS[4] = _rebuild_windows_and_stats


def _sum_session_vectors(conn: sqlite3.Connection) -> None:
    import numpy as np

    top = conn.execute(
        "SELECT model FROM vectors GROUP BY model ORDER BY COUNT(*) DESC LIMIT 1"
    ).fetchone()
    if top is None:
        return
    model = top[0]
    session, total = None, None

    def flush() -> None:
        if session is not None and total is not None:
            conn.execute(
                "INSERT OR REPLACE INTO session_vectors VALUES (?, ?, ?)",
                (session, model, total.astype("<f4").tobytes()),
            )

    # A session with a message that has no vector gets no sum (searches sum it from
    # the vector index, which embeds what is missing).
    for sid, blob in conn.execute(
        "SELECT m.session_id, v.vec FROM messages m"
        " LEFT JOIN vectors v ON v.chash = m.chash AND v.model = ?"
        " WHERE m.archived = 0 ORDER BY m.session_id, m.idx",
        (model,),
    ):
        if sid != session:
            flush()
            session, total = sid, np.zeros(0)
        if total is None:
            continue  # this session already lacks a vector
        if blob is None:
            total = None
            continue
        vec = np.frombuffer(blob, dtype="<f4").astype(np.float64)
        total = vec if not total.size else total + vec
    flush()


STEPS[11] = _sum_session_vectors


LATEST = MIGRATIONS[-1][0]


def current_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if not exists:
        return 0
    row = conn.execute("SELECT MAX(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Bring the database up to :data:`LATEST`; returns the version it was at."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations ("
        " version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL)"
    )
    before = current_version(conn)
    if before > LATEST:
        raise SchemaError(
            f"{path} has schema version {before}, newer than this arbormem understands "
            f"({LATEST}); upgrade arbormem (pip install -U arbormem) to open it"
        )
    # Migrations move and rebuild derived rows; none removes what a user asked to
    # forget, so overwriting the freed pages with zeros (secure_delete) would only
    # double the writing of a large store's upgrade.
    secure = conn.execute("PRAGMA secure_delete").fetchone()[0]
    conn.execute("PRAGMA secure_delete = OFF")
    try:
        _apply(conn, path, before)
    finally:
        conn.execute(f"PRAGMA secure_delete = {int(secure)}")
    return before


def _apply(conn: sqlite3.Connection, path: str, before: int) -> None:
    for version, description, sql in MIGRATIONS:
        if version <= before:
            continue
        if before:
            log.info("upgrading %s to schema %d (%s)", path, version, description)
        try:
            conn.execute("BEGIN IMMEDIATE")
            # Another process opening the store at the same time may have applied it
            # while this one waited for the write lock.
            if conn.execute(
                "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
            ).fetchone():
                conn.execute("COMMIT")
                continue
            for statement in _statements(sql):
                conn.execute(statement)
            if version in STEPS:
                STEPS[version](conn)
            conn.execute(
                "INSERT INTO schema_migrations (version, description, applied_at) VALUES (?, ?, ?)",
                (version, description, format_timestamp(utcnow())),
            )
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise SchemaError(f"{path}: migration {version} ({description}) failed: {exc}") from exc


def _statements(sql: str) -> list[str]:
    """Split a migration script into statements. A trigger's body holds semicolons
    of its own: pieces are joined until SQLite says the statement is complete. (No
    semicolons inside our SQL strings or comments.)"""
    out = []
    pending = ""
    for part in sql.split(";"):
        lines = [ln for ln in part.splitlines() if not ln.strip().startswith("--")]
        pending += "\n".join(lines).strip() + ";"
        if sqlite3.complete_statement(pending):
            statement = pending[:-1].strip()
            if statement:
                out.append(statement)
            pending = ""
    if pending.strip("; \n"):
        raise SchemaError(f"migration SQL ends inside a statement: {pending[:80]!r}")
    return out
