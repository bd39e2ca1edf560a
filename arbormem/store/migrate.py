"""Copy a store to another, of any back-end (``arbormem migrate SRC DST``).

Everything goes through the storage interfaces (:class:`~arbormem.store.base.Backend`),
so any back-end copies to any other: SQLite to PostgreSQL and back, or a store to a
new file of the same kind. Per thread:

1. its messages, in position order, in batches (each one transaction), with their
   positions, sessions, times, metadata and the vectors of every model stored;
2. then in one transaction: its topic tree (nodes, each message's leaf, topic and
   segment documents, the cursor, whether it passed its check), which messages are
   archived, its sessions' working memory, and the topic summaries' vectors;
3. its image memories with their bytes (one transaction; those the destination holds
   already are skipped).

It is **resumable**: run again after an interruption, it checks that what the
destination holds of a thread is what the source holds at the same positions, and
goes on from there (a tree copied in part is never seen: step 2 is one
transaction). At the end it **verifies** the copy: the counts of threads,
messages, sessions, tree nodes, session states and vectors per model, and a
SHA-256 of each store's export (:func:`export_digest`), which must be equal.

Not copied: the tree's operation log (its undo records name the source's node
ids), and derived caches each back-end rebuilds (approximate vector indexes).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from arbormem.errors import StoreError
from arbormem.store.base import Backend
from arbormem.store.types import NODE_KEYS, NewMessage, NodeRow, Row, Thread, TreeState
from arbormem.text import analyze_message

#: Messages per transaction while copying.
BATCH = 2000
#: A leaf id no node has: messages archived apart from their leaf are archived
#: through it (the interface archives by leaf), then given their leaf back.
_LOOSE = -1


@dataclass
class Counts:
    """What a store holds, for the verification."""

    threads: int = 0
    messages: int = 0
    sessions: int = 0
    nodes: int = 0
    session_states: int = 0
    archived: int = 0
    images: int = 0
    #: Vectors of the messages' and topics' texts, per model (a store may keep
    #: others, no longer used, until it is purged: those are not copied).
    vectors: dict[str, int] = field(default_factory=dict)


@dataclass
class Migrated:
    """What :func:`migrate` did, and what it checked."""

    threads: int = 0
    #: Messages copied now, and those found in the destination already (a resumed copy).
    copied: int = 0
    already: int = 0
    trees: int = 0
    #: Image memories copied now, with their bytes.
    images: int = 0
    source: Counts = field(default_factory=Counts)
    destination: Counts = field(default_factory=Counts)
    source_sha256: str = ""
    destination_sha256: str = ""

    @property
    def verified(self) -> bool:
        return self.source == self.destination and self.source_sha256 == self.destination_sha256

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["verified"] = self.verified
        return out


def _key(thread: Thread) -> tuple[str, str, str]:
    return (thread.tenant, thread.user, thread.agent)


def export_digest(backend: Backend) -> str:
    """The SHA-256 of the store's export (every thread, in a fixed order, as
    :func:`arbormem.ingest.transfer.export_thread` writes it; no export date)."""
    from arbormem.ingest.transfer import export_thread

    digest = hashlib.sha256()
    for thread in sorted(backend.threads(tenant=None), key=_key):
        item = export_thread(backend, thread)
        if thread.tenant:
            item["tenant"] = thread.tenant
        digest.update(json.dumps(item, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def count(backend: Backend) -> Counts:
    """The counts :func:`migrate` compares."""
    out = Counts()
    used: set[str] = set()
    for thread in backend.threads(tenant=None):
        out.threads += 1
        out.messages += backend.count(thread)
        out.sessions += len(backend.sessions(thread))
        briefs = backend.node_briefs(thread)
        out.nodes += len(briefs)
        out.session_states += len(backend.session_states(thread))
        out.archived += len(backend.archived_rowids(thread))
        out.images += len(backend.images([thread]))
        used.update(b.chash for b in briefs if b.chash)
        used.update(r.chash for r in backend.iter_rows(thread))
    wanted = sorted(used)
    for model in sorted(backend.vector_models()):
        out.vectors[model] = sum(
            len(backend.vectors(model, wanted[i : i + BATCH])) for i in range(0, len(wanted), BATCH)
        )
    return out


def total_messages(backend: Backend) -> int:
    """How many messages the source holds (for a progress bar)."""
    return sum(backend.count(t) for t in backend.threads(tenant=None))


def migrate(
    source: Backend,
    destination: Backend,
    *,
    batch: int = BATCH,
    progress: Callable[[int], None] | None = None,
    verify: bool = True,
) -> Migrated:
    """Copy every thread of ``source`` into ``destination`` (see the module
    docstring); ``progress`` is called with the number of messages each step dealt
    with. Raises :class:`StoreError` when the destination holds something else at a
    thread's positions."""
    destination.writable()
    out = Migrated()
    for thread in sorted(source.threads(tenant=None), key=_key):
        out.threads += 1
        target = destination.thread(thread.user, thread.agent, create=True, tenant=thread.tenant)
        assert target is not None
        copied, already = _copy_messages(source, thread, destination, target, batch, progress)
        out.copied += copied
        out.already += already
        if _copy_derived(source, thread, destination, target):
            out.trees += 1
        out.images += _copy_images(source, thread, destination, target)
    if verify:
        out.source, out.destination = count(source), count(destination)
        out.source_sha256, out.destination_sha256 = (
            export_digest(source),
            export_digest(destination),
        )
    return out


def _pairs(
    source: Backend, src: Thread, destination: Backend, dst: Thread
) -> Iterator[tuple[Row, Row | None]]:
    """The source's rows with the destination's at the same place, in order."""
    theirs = destination.iter_rows(dst)
    for row in source.iter_rows(src):
        yield row, next(theirs, None)


def _copy_messages(
    source: Backend,
    src: Thread,
    destination: Backend,
    dst: Thread,
    batch: int,
    progress: Callable[[int], None] | None,
) -> tuple[int, int]:
    held = destination.state(dst).next_index
    already = copied = 0
    pending: list[Row] = []
    models = sorted(source.vector_models())
    for row, theirs in _pairs(source, src, destination, dst):
        m = row.message
        if theirs is not None:
            t = theirs.message
            if (t.id, t.index, t.content, t.session) != (m.id, m.index, m.content, m.session):
                raise StoreError(
                    f"the destination's thread {dst.user}/{dst.agent} holds message {t.id!r}"
                    f" at position {t.index}, where the source has {m.id!r}: it is not an"
                    " earlier copy of this store (copy into an empty store)"
                )
            already += 1
            if progress is not None and already % batch == 0:
                progress(batch)
            continue
        if m.index < held:
            raise StoreError(
                f"the destination's thread {dst.user}/{dst.agent} has positions up to"
                f" {held - 1} but not the source's message {m.id!r} at {m.index}"
            )
        pending.append(row)
        if len(pending) >= batch:
            _append(source, destination, dst, pending, models)
            copied += len(pending)
            if progress is not None:
                progress(len(pending))
            pending = []
    if progress is not None and already % batch:
        progress(already % batch)
    if pending:
        _append(source, destination, dst, pending, models)
        copied += len(pending)
        if progress is not None:
            progress(len(pending))
    return copied, already


def _append(
    source: Backend, destination: Backend, dst: Thread, rows: Sequence[Row], models: Sequence[str]
) -> None:
    chashes = list(dict.fromkeys(r.chash for r in rows))
    found = {model: source.vectors(model, chashes) for model in models}
    # The model most messages have a vector of goes with the messages (the
    # destination indexes it for search); the others are stored beside.
    primary = max(models, key=lambda m: (len(found[m]), m)) if models else None
    news = [
        NewMessage(
            id=r.message.id,
            role=r.message.role,
            content=r.message.content,
            timestamp=r.message.timestamp,
            session=r.message.session,
            speaker=r.message.speaker,
            metadata=dict(r.message.metadata),
            terms=" ".join(analyze_message(r.message.content, r.message.speaker)),
            chash=r.chash,
            index=r.message.index,
        )
        for r in rows
    ]
    with destination.transaction():
        for model in models:
            if model != primary and found[model]:
                destination.put_vectors(model, found[model])
        destination.append(dst, news, found.get(primary) if primary else None, primary)


def _copy_derived(source: Backend, src: Thread, destination: Backend, dst: Thread) -> bool:
    """The thread's tree, archived flags, session states and topic vectors, in one
    transaction; False when the destination has them already (a resumed copy)."""
    briefs = source.node_briefs(src)
    state = source.tree_state(src)
    states = source.session_states(src)
    archived = source.archived_rowids(src)
    done = (
        len(destination.node_briefs(dst)) == len(briefs)
        and (destination.tree_state(dst).version > 0) == (state.version > 0)
        and len(destination.session_states(dst)) == len(states)
        and len(destination.archived_rowids(dst)) == len(archived)
    )
    if done and (briefs or states or archived or state.version):
        return False
    src_rows = {r.message.id: r.rowid for r in source.iter_rows(src)}
    dst_rows = {r.message.id: r.rowid for r in destination.iter_rows(dst)}
    to_dst = {src_rows[uid]: dst_rows[uid] for uid in src_rows if uid in dst_rows}
    with destination.transaction():
        destination.delete_nodes(dst)
        # In the order of their ids, so that the copies' ids keep it ("newer" topics).
        nodes = sorted(source.tree_nodes(src), key=lambda n: n.id or 0)
        fresh = [dataclasses.replace(n, id=None, parent_id=None) for n in nodes]
        destination.put_nodes(dst, fresh)
        new_id = {n.id: f.id for n, f in zip(nodes, fresh) if n.id is not None and f.id is not None}
        linked = [
            dataclasses.replace(f, parent_id=new_id[n.parent_id])
            for n, f in zip(nodes, fresh)
            if n.parent_id is not None
        ]
        destination.put_nodes(dst, linked)
        leaves: dict[int, list[int]] = {}
        for rowid, leaf in source.message_leaves(sorted(to_dst)).items():
            if leaf in new_id:
                leaves.setdefault(new_id[leaf], []).append(to_dst[rowid])
        for leaf, rowids in leaves.items():
            destination.set_message_leaf(rowids, leaf)
        for key in NODE_KEYS:
            docs = source.node_docs(key, sorted(new_id))
            if docs:
                destination.index_nodes(key, {new_id[i]: d for i, d in docs.items()})
        if state.version:
            destination.set_tree_state(
                dst,
                TreeState(
                    0,
                    new_id.get(state.active_id) if state.active_id is not None else None,
                    new_id.get(state.leaf_id) if state.leaf_id is not None else None,
                    state.next_seq,
                ),
            )
        _archive(source, src, destination, dst, archived, to_dst, new_id)
        for session, stored in states.items():
            destination.put_session_state(dst, session, stored)
        # Typed records and composites, every version, and how far extraction read.
        from arbormem.records.service import RecordService

        records = RecordService(source, src).to_dict()
        if records["records"] or records["composites"]:
            RecordService(destination, dst).load(records)
        destination.set_records_cursor(dst, source.records_cursor(src))
        _copy_topic_vectors(source, destination, nodes)
        version, checked = source.tree_checked(src)
        if checked is not None and checked == version:
            destination.mark_tree_checked(dst, destination.tree_checked(dst)[0])
    return True


def _archive(
    source: Backend,
    src: Thread,
    destination: Backend,
    dst: Thread,
    archived: set[int],
    to_dst: dict[int, int],
    new_id: dict[int, int],
) -> None:
    """Archive the destination's copies of the source's archived messages: whole
    leaves by leaf, any other message through a leaf of its own for the moment."""
    if not archived:
        return
    whole = {leaf for leaf in source.archived_leaves(src) if leaf in new_id}
    leaf_of = source.message_leaves(sorted(archived))
    loose = [r for r in sorted(archived) if leaf_of.get(r) not in whole and r in to_dst]
    if whole:
        destination.set_archived(dst, sorted(new_id[w] for w in whole), True)
    if loose:
        destination.set_message_leaf([to_dst[r] for r in loose], _LOOSE)
        destination.set_archived(dst, [_LOOSE], True)
        back: dict[int | None, list[int]] = {}
        for r in loose:
            leaf = leaf_of.get(r)
            back.setdefault(new_id.get(leaf) if leaf is not None else None, []).append(to_dst[r])
        for leaf, rowids in back.items():
            destination.set_message_leaf(rowids, leaf)


def _copy_topic_vectors(source: Backend, destination: Backend, nodes: Sequence[NodeRow]) -> None:
    chashes = sorted({n.chash for n in nodes if n.chash})
    if not chashes:
        return
    for model in source.vector_models():
        for start in range(0, len(chashes), BATCH):
            found = source.vectors(model, chashes[start : start + BATCH])
            if found:
                destination.put_vectors(model, found)


def _copy_images(source: Backend, src: Thread, destination: Backend, dst: Thread) -> int:
    """Copy a thread's image memories and their bytes (those the destination lacks)
    in one transaction; how many were copied."""
    rows = [r for r in source.images([src]) if destination.image(r.id) is None]
    if not rows:
        return 0
    captions = source.rows([r.caption_rowid for r in rows if r.caption_rowid is not None])
    with destination.transaction():
        for r in rows:
            caption = captions.get(r.caption_rowid) if r.caption_rowid is not None else None
            rowid = None
            if caption is not None:
                there = destination.get(caption.message.id)
                rowid = None if there is None else there.rowid
            data = source.blob(r.digest) if r.size else None
            if data is not None:
                destination.put_blob(r.digest, data)
            destination.insert_image(dataclasses.replace(r, thread_id=dst.id, caption_rowid=rowid))
    return len(rows)
