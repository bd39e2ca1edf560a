"""The PostgreSQL schema and its forward migrations.

As for SQLite (:mod:`arbormem.store.sqlite.schema`): each migration runs once, in
order, in one transaction (DDL is transactional here), recorded in
``schema_migrations``; a database whose newest migration this arbormem does not
know is refused. Each migration's transaction first takes an advisory lock and
reads the version again, so processes opening a new database together migrate
it once.

Every table but the content-addressed caches (``vectors``, ``image_blobs``,
``image_captions``) carries ``scope_id`` (a user of a tenant, see
:func:`~arbormem.store.postgres.common.scope_id`) in its primary key, most of them
first; ``messages``, ``message_leaves``, ``tree_nodes`` and ``tree_log`` lead with
their store-wide id: see docs/postgres.md, "Tables".
"""

from __future__ import annotations

import logging
from typing import Any

from arbormem.errors import SchemaError

log = logging.getLogger(__name__)

#: The advisory lock migrations take (a constant of this application).
MIGRATION_LOCK = 0x61726D6D  # "armm"

MIGRATIONS: list[tuple[int, str, str]] = [
    (
        1,
        "scopes, threads, sessions, messages, lexical postings and statistics, vectors,"
        " topic trees, session state",
        """
        CREATE SEQUENCE thread_ids;
        CREATE SEQUENCE session_ids;
        CREATE SEQUENCE message_ids;
        CREATE SEQUENCE node_ids;
        CREATE SEQUENCE tree_log_ids;
        -- One row per user of a tenant. ticks: raised when one of its threads is
        -- deleted (the scope's change mark, with its threads' change counters).
        CREATE TABLE scopes (
            scope_id    bigint PRIMARY KEY,
            tenant      text NOT NULL,
            user_id     text NOT NULL,
            ticks       bigint NOT NULL DEFAULT 0
        );
        CREATE TABLE threads (
            scope_id    bigint NOT NULL,
            id          bigint NOT NULL,
            tenant      text NOT NULL,
            user_id     text NOT NULL,
            agent_id    text NOT NULL,
            created_at  timestamptz NOT NULL,
            next_index  bigint NOT NULL DEFAULT 0,
            generation  bigint NOT NULL,
            -- Raised by every write that adds or removes documents.
            changes     bigint NOT NULL DEFAULT 0,
            time_ordered boolean NOT NULL DEFAULT true,
            latest      timestamptz,
            -- How far (in message ids) a window reaches back from its centre, at most.
            window_reach bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (scope_id, id),
            UNIQUE (scope_id, agent_id)
        );
        CREATE INDEX threads_by_id ON threads (id);
        CREATE TABLE sessions (
            scope_id    bigint NOT NULL,
            id          bigint NOT NULL,
            thread_id   bigint NOT NULL,
            key         text NOT NULL,
            started_at  timestamptz NOT NULL,
            last_at     timestamptz NOT NULL,
            first_index bigint NOT NULL,
            message_count bigint NOT NULL DEFAULT 0,
            metadata    text NOT NULL DEFAULT '{}',
            PRIMARY KEY (scope_id, id),
            UNIQUE (scope_id, thread_id, key)
        );
        CREATE INDEX sessions_in_order ON sessions (scope_id, thread_id, first_index);
        -- terms: the analysed terms (the turn key's document); tlen its length;
        -- wlen the length of its window document (NULL: none written yet);
        -- stale_window: an archived message's window as it was (see storage.md).
        CREATE TABLE messages (
            id          bigint NOT NULL,
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            session_id  bigint NOT NULL,
            idx         bigint NOT NULL,
            uid         text NOT NULL,
            role        text NOT NULL,
            speaker     text,
            content     text NOT NULL,
            ts          timestamptz NOT NULL,
            metadata    text NOT NULL DEFAULT '{}',
            chash       text NOT NULL,
            terms       text NOT NULL,
            tlen        integer NOT NULL,
            wlen        integer,
            stale_window text,
            leaf_id     bigint,
            archived    boolean NOT NULL DEFAULT false,
            PRIMARY KEY (id, scope_id)
        );
        CREATE UNIQUE INDEX messages_uid ON messages (uid);
        CREATE UNIQUE INDEX messages_position ON messages (scope_id, thread_id, idx);
        CREATE INDEX messages_by_session ON messages (scope_id, session_id, idx);
        CREATE INDEX messages_by_time ON messages (scope_id, thread_id, ts);
        CREATE INDEX messages_by_hash ON messages (chash);
        CREATE INDEX messages_by_leaf ON messages (scope_id, leaf_id) WHERE leaf_id IS NOT NULL;
        CREATE INDEX messages_archived ON messages (scope_id, thread_id, id) WHERE archived;
        CREATE INDEX messages_by_speaker ON messages (scope_id, thread_id, speaker)
            WHERE speaker IS NOT NULL;
        -- The turn key's inverted index. Each posting also carries the windows its
        -- message belongs to (their centre ids and lengths): the window key is
        -- searched from these postings, with no window documents stored.
        CREATE TABLE turn_postings (
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            term        text NOT NULL,
            doc         bigint NOT NULL,
            tf          integer NOT NULL,
            len         integer NOT NULL,
            wids        bigint[] NOT NULL,
            wlens       integer[] NOT NULL,
            PRIMARY KEY (scope_id, thread_id, term, doc) INCLUDE (tf, len, wids, wlens)
        );
        -- Topic names (key 2) and topic contents (key 3).
        CREATE TABLE node_postings (
            scope_id    bigint NOT NULL,
            key         smallint NOT NULL,
            thread_id   bigint NOT NULL,
            term        text NOT NULL,
            node        bigint NOT NULL,
            tf          integer NOT NULL,
            len         integer NOT NULL,
            PRIMARY KEY (scope_id, key, thread_id, term, node) INCLUDE (tf, len)
        );
        -- BM25's statistics, per thread (a thread's writes touch only its own rows),
        -- summed over a scope when read.
        CREATE TABLE lex_stats (
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            key         smallint NOT NULL,
            docs        bigint NOT NULL DEFAULT 0,
            tokens      bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (scope_id, key, thread_id)
        );
        CREATE TABLE lex_df (
            scope_id    bigint NOT NULL,
            key         smallint NOT NULL,
            term        text NOT NULL,
            thread_id   bigint NOT NULL,
            df          bigint NOT NULL,
            PRIMARY KEY (scope_id, key, term, thread_id)
        );
        CREATE INDEX lex_df_store_wide ON lex_df (key, term);
        -- Content-addressed vectors (messages' and topic summaries'), as SQLite keeps
        -- them: the embedding cache. No scope: a row is found by its text's hash.
        CREATE TABLE vectors (
            chash       text NOT NULL,
            model       text NOT NULL,
            dim         integer NOT NULL,
            vec         vector NOT NULL,
            PRIMARY KEY (chash, model)
        );
        -- Each live message's vector, by thread: what nearest-neighbour search reads
        -- (exact for small threads, an HNSW index per large thread).
        CREATE TABLE message_vectors (
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            model       text NOT NULL,
            message_id  bigint NOT NULL,
            session_id  bigint NOT NULL,
            vec         vector NOT NULL,
            PRIMARY KEY (scope_id, thread_id, model, message_id)
        );
        -- How far each thread's message_vectors are complete, per model.
        CREATE TABLE vector_progress (
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            model       text NOT NULL,
            upto        bigint NOT NULL,
            PRIMARY KEY (scope_id, thread_id, model)
        );
        CREATE TABLE session_vectors (
            scope_id    bigint NOT NULL,
            session_id  bigint NOT NULL,
            model       text NOT NULL,
            total       vector NOT NULL,
            PRIMARY KEY (scope_id, session_id)
        );
        CREATE TABLE tree_nodes (
            id            bigint NOT NULL,
            scope_id      bigint NOT NULL,
            thread_id     bigint NOT NULL,
            parent_id     bigint,
            kind          text NOT NULL,
            seq           bigint NOT NULL,
            level         integer NOT NULL DEFAULT 0,
            name          text NOT NULL DEFAULT '',
            summary       text NOT NULL DEFAULT '',
            keyphrases    text NOT NULL DEFAULT '[]',
            first_index   bigint NOT NULL,
            last_index    bigint NOT NULL,
            first_at      timestamptz NOT NULL,
            last_at       timestamptz NOT NULL,
            message_count bigint NOT NULL DEFAULT 0,
            child_count   bigint NOT NULL DEFAULT 0,
            frozen        boolean NOT NULL DEFAULT false,
            archived      boolean NOT NULL DEFAULT false,
            origin        text NOT NULL DEFAULT 'heuristic',
            chash         text,
            topic_terms   text,
            segment_terms text,
            PRIMARY KEY (id, scope_id)
        );
        CREATE INDEX tree_children ON tree_nodes (scope_id, thread_id, parent_id, seq);
        CREATE INDEX tree_by_kind ON tree_nodes (scope_id, thread_id, kind, frozen);
        CREATE INDEX tree_by_hash ON tree_nodes (chash);
        CREATE INDEX tree_nodes_archived ON tree_nodes (scope_id, id) WHERE archived;
        CREATE TABLE tree_state (
            scope_id      bigint NOT NULL,
            thread_id     bigint NOT NULL,
            version       bigint NOT NULL DEFAULT 0,
            active_id     bigint,
            leaf_id       bigint,
            next_seq      bigint NOT NULL DEFAULT 0,
            updated_at    timestamptz NOT NULL,
            checked_version bigint,
            PRIMARY KEY (scope_id, thread_id)
        );
        CREATE TABLE tree_log (
            id            bigint NOT NULL,
            scope_id      bigint NOT NULL,
            thread_id     bigint NOT NULL,
            kind          text NOT NULL,
            at            timestamptz NOT NULL,
            stats         text NOT NULL DEFAULT '{}',
            undo          text NOT NULL DEFAULT '[]',
            undone_at     timestamptz,
            PRIMARY KEY (id, scope_id)
        );
        CREATE INDEX tree_log_by_thread ON tree_log (scope_id, thread_id, id);
        CREATE TABLE session_state (
            scope_id      bigint NOT NULL,
            thread_id     bigint NOT NULL,
            session_key   text NOT NULL,
            state         text NOT NULL DEFAULT '{}',
            updated_at    timestamptz NOT NULL,
            PRIMARY KEY (scope_id, thread_id, session_key)
        )
        """,
    ),
    (
        2,
        "typed records: one JSON row per record and per composite, and each thread's cursor",
        """
        CREATE TABLE record_rows (
            scope_id      bigint NOT NULL,
            thread_id     bigint NOT NULL,
            id            text NOT NULL,
            seq           bigint NOT NULL,
            data          text NOT NULL,
            PRIMARY KEY (scope_id, thread_id, id)
        );
        CREATE TABLE record_composites (
            scope_id      bigint NOT NULL,
            thread_id     bigint NOT NULL,
            id            text NOT NULL,
            data          text NOT NULL,
            PRIMARY KEY (scope_id, thread_id, id)
        );
        CREATE TABLE record_cursors (
            scope_id      bigint NOT NULL,
            thread_id     bigint NOT NULL,
            position      bigint NOT NULL,
            PRIMARY KEY (scope_id, thread_id)
        )
        """,
    ),
    (
        3,
        "image memories: their rows, their bytes and a vision model's captions",
        """
        CREATE SEQUENCE image_ids;
        -- An image memory: its caption is indexed through a message of its thread
        -- (caption_rowid, NULL while soft-expired); one per thread and content hash.
        CREATE TABLE images (
            scope_id       bigint NOT NULL,
            thread_id      bigint NOT NULL,
            digest         text NOT NULL,
            id             bigint NOT NULL,
            uid            text NOT NULL,
            mime           text NOT NULL,
            size           bigint NOT NULL,
            width          integer,
            height         integer,
            phash          text,
            session_key    text NOT NULL,
            ts             timestamptz NOT NULL,
            caption        text NOT NULL,
            caption_source text NOT NULL,
            scene          text NOT NULL,
            importance     double precision NOT NULL,
            entities       text NOT NULL DEFAULT '[]',
            speaker        text,
            caption_rowid  bigint,
            shared_in      text,
            url            text,
            metadata       text NOT NULL DEFAULT '{}',
            recalls        bigint NOT NULL DEFAULT 0,
            recalled_at    timestamptz,
            expired_at     timestamptz,
            created_at     timestamptz NOT NULL,
            PRIMARY KEY (scope_id, thread_id, digest)
        );
        CREATE UNIQUE INDEX images_by_uid ON images (uid);
        CREATE INDEX images_by_caption ON images (scope_id, caption_rowid);
        CREATE INDEX images_by_session ON images (scope_id, thread_id, session_key);
        CREATE INDEX images_by_digest ON images (digest);
        -- Content-addressed, as the vector cache is: reached only through an image
        -- row of the reader's scope.
        CREATE TABLE image_blobs (
            digest  text PRIMARY KEY,
            data    bytea NOT NULL
        );
        CREATE TABLE image_captions (
            digest  text NOT NULL,
            model   text NOT NULL,
            answer  text NOT NULL,
            PRIMARY KEY (digest, model)
        )
        """,
    ),
    (
        4,
        "tree versions carry a structure epoch in their high 32 bits",
        """
        -- Nothing to rewrite: every version stored so far is in epoch 0. The number
        -- keeps out earlier arbormem, which would change a tree beyond its growth
        -- without moving its epoch, and so leave other processes' searches reading
        -- the tree as it was (see store/postgres/tree.py, EPOCH_BITS).
        UPDATE tree_state SET version = version WHERE false
        """,
    ),
    (
        5,
        "window lists in turn_windows, one row per message, no longer on every turn posting;"
        " topic postings without padding",
        """
        -- The windows each message with terms belongs to (their centre ids and
        -- lengths), read by a window search for each turn posting it sums. Kept
        -- on every posting (and in their covering key) they were two thirds of the
        -- postings' bytes, and every posting of a session's last messages was
        -- rewritten as the session grew; here one row of a message changes. The
        -- key covers the lists: a window search looks up about a thousand
        -- messages at 100,000 turns, a fifth faster without visiting the table.
        CREATE TABLE turn_windows (
            scope_id    bigint NOT NULL,
            doc         bigint NOT NULL,
            thread_id   bigint NOT NULL,
            wids        bigint[] NOT NULL,
            wlens       integer[] NOT NULL,
            PRIMARY KEY (scope_id, doc) INCLUDE (wids, wlens)
        );
        INSERT INTO turn_windows (scope_id, doc, thread_id, wids, wlens)
            SELECT DISTINCT ON (scope_id, doc) scope_id, doc, thread_id, wids, wlens
            FROM turn_postings ORDER BY scope_id, doc;
        -- The postings without the lists, copied in their key's order, the key
        -- built once after them (sorted: no page split leaves pages half full).
        CREATE TABLE turn_postings_slim (
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            term        text NOT NULL,
            doc         bigint NOT NULL,
            tf          integer NOT NULL,
            len         integer NOT NULL
        );
        INSERT INTO turn_postings_slim (scope_id, thread_id, term, doc, tf, len)
            SELECT scope_id, thread_id, term, doc, tf, len FROM turn_postings
            ORDER BY scope_id, thread_id, term, doc;
        DROP TABLE turn_postings;
        ALTER TABLE turn_postings_slim RENAME TO turn_postings;
        ALTER TABLE turn_postings ADD PRIMARY KEY (scope_id, thread_id, term, doc) INCLUDE (tf, len);
        -- Topic postings with their columns in an order that leaves no padding
        -- between them (the key code, two bytes, sat between two 8-byte columns):
        -- about 8 bytes less a row and a key entry, of some 23 postings a turn.
        CREATE TABLE node_postings_packed (
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            node        bigint NOT NULL,
            tf          integer NOT NULL,
            len         integer NOT NULL,
            key         smallint NOT NULL,
            term        text NOT NULL
        );
        INSERT INTO node_postings_packed (scope_id, thread_id, node, tf, len, key, term)
            SELECT scope_id, thread_id, node, tf, len, key, term FROM node_postings
            ORDER BY scope_id, thread_id, key, term, node;
        DROP TABLE node_postings;
        ALTER TABLE node_postings_packed RENAME TO node_postings;
        ALTER TABLE node_postings ADD PRIMARY KEY (scope_id, thread_id, key, term, node)
            INCLUDE (tf, len)
        """,
    ),
    (
        6,
        "message placements in their topic-tree leaves move to message_leaves",
        """
        -- Placing a message in its leaf rewrote its whole row, which adds an entry to
        -- each of the table's indexes (leaf_id was one of them, so no update could be
        -- made in place): once per message of an import. A narrow row of its own is
        -- written instead, and moved by one row when the message changes leaves.
        CREATE TABLE message_leaves (
            scope_id    bigint NOT NULL,
            thread_id   bigint NOT NULL,
            message_id  bigint NOT NULL,
            leaf_id     bigint NOT NULL
        );
        INSERT INTO message_leaves (scope_id, thread_id, message_id, leaf_id)
            SELECT scope_id, thread_id, id, leaf_id FROM messages WHERE leaf_id IS NOT NULL
            ORDER BY id;
        ALTER TABLE message_leaves ADD PRIMARY KEY (message_id, scope_id);
        CREATE INDEX message_leaves_by_leaf ON message_leaves (scope_id, thread_id, leaf_id);
        DROP INDEX messages_by_leaf;
        ALTER TABLE messages DROP COLUMN leaf_id
        """,
    ),
    (
        7,
        "turn postings say whether their message's terms end with them",
        """
        -- A pair of terms that spans two messages ("... car" then "serviced ...")
        -- is counted from the messages whose terms end with the first. Found from
        -- all its postings, each read its message: the 15 slowest pair counts of
        -- 300 searches at a million turns read 203,240 messages, of which 12,907
        -- could count across two. Flagged here, and looked up by a partial key
        -- of the flagged postings alone.
        ALTER TABLE turn_postings ADD COLUMN ends boolean NOT NULL DEFAULT false;
        -- The posting of a message's last term. A term over 200 bytes is keyed by
        -- its SHA-1 (term_key), which SQL has no function for: a message ending
        -- with one flags all its keyed postings, a few more than needed (the
        -- flag only narrows what a pair count reads; the count checks the text).
        UPDATE turn_postings p SET ends = true FROM (SELECT scope_id, thread_id, id,
            substring(terms from '[^ ]+$') AS last FROM messages WHERE terms <> '') m
            WHERE p.scope_id = m.scope_id AND p.thread_id = m.thread_id AND p.doc = m.id
            AND (p.term = m.last OR (octet_length(m.last) > 200 AND p.term LIKE '#%'));
        CREATE INDEX turn_postings_ending ON turn_postings (scope_id, thread_id, term, doc)
            WHERE ends
        """,
    ),
    (
        8,
        "threads say how far ahead of a window's centre its members lie",
        """
        -- A search within date spans reads only the postings of the spans' runs of
        -- message ids (see PostgresLexical._span_runs). A window centred in a run
        -- has members up to window_reach ids before it and, kept here, up to
        -- window_ahead ids after it: the window key's runs are widened by both.
        -- Taken from the window lists stored so far; each write raises it after.
        ALTER TABLE threads ADD COLUMN window_ahead bigint NOT NULL DEFAULT 0;
        UPDATE threads t SET window_ahead = x.ahead FROM (SELECT w.scope_id,
            w.thread_id, max(w.doc - (SELECT min(c) FROM unnest(w.wids) AS c)) AS ahead
            FROM turn_windows w GROUP BY w.scope_id, w.thread_id) x
            WHERE t.scope_id = x.scope_id AND t.id = x.thread_id AND x.ahead > 0
        """,
    ),
]

LATEST = MIGRATIONS[-1][0]


def _statements(sql: str) -> list[str]:
    """A migration script as statements (comment lines dropped first; no
    semicolons inside our SQL's strings or bodies)."""
    code = "\n".join(ln for ln in sql.splitlines() if not ln.strip().startswith("--"))
    return [part.strip() for part in code.split(";") if part.strip()]


def current_version(conn: Any) -> int:
    """The newest migration applied (0 for a database arbormem has not used)."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
    return int(row[0] or 0)


def foreign(conn: Any) -> bool:
    """Whether the database's schema holds tables but none of arbormem's."""
    row = conn.execute(
        "SELECT count(*), count(*) FILTER (WHERE tablename = 'schema_migrations')"
        " FROM pg_tables WHERE schemaname = current_schema()"
    ).fetchone()
    return bool(row[0]) and not row[1]


def refuse_newer(version: int, where: str) -> None:
    if version > LATEST:
        raise SchemaError(
            f"{where} has schema version {version}, newer than this arbormem understands "
            f"({LATEST}); upgrade arbormem (pip install -U arbormem) to open it"
        )


def migrate(conn: Any, where: str) -> int:
    """Bring the database up to :data:`LATEST` on an autocommit connection;
    returns the version it was at."""
    import psycopg

    before = current_version(conn)
    refuse_newer(before, where)
    if before == LATEST:
        return before
    for version, description, sql in MIGRATIONS:
        if version <= before:
            continue
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
                    " description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
                )
                # Another process may have applied it while this one waited for the lock.
                done = conn.execute(
                    "SELECT 1 FROM schema_migrations WHERE version = %s", (version,)
                ).fetchone()
                if done:
                    continue
                refuse_newer(current_version(conn), where)
                if before:
                    log.info("upgrading %s to schema %d (%s)", where, version, description)
                for statement in _statements(sql):
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_migrations (version, description) VALUES (%s, %s)",
                    (version, description),
                )
        except psycopg.Error as exc:
            raise SchemaError(
                f"{where}: migration {version} ({description}) failed: {exc}"
            ) from exc
    return before
