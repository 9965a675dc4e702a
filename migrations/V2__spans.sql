-- Why: storage v2. A run dumps periodically and most allocations survive from one dump to the
-- next, so v1's one row per allocation per snapshot grew with snapshots x live allocations, and
-- every view joined memory_state rows that carried the whole hole list as JSON (an overflow chain
-- read on every key compare). Now:
--
-- * allocation_span stores an allocation once per span: a maximal run of consecutive imported
--   snapshots of its run and node (in seq order) in which all its stored attributes are the same.
--   hole_span does the same for holes (a hole is its offset and size). memory_state keeps the
--   per-snapshot figures only, as small rows.
-- * A span is [first_seq, last_seq]; last_seq is NULL while the span is open, that is while the
--   allocation is present in the node's latest imported snapshot, so importing the next dump of a
--   node writes only what changed.
-- * Finding the spans that contain one snapshot (seq p) is an interval-stabbing question. Spans are
--   clustered by (memory_id, level, first_seq), where `level` is a length class: a closed span
--   with last_seq - first_seq < 4^L is at level L (the smallest such L, 0 to 32), an open span at
--   level 64. A span of level L that contains p starts in [p - (4^L - 1), p], so one index range
--   per level (span_level.reach = 4^L - 1) finds every span containing p, besides a few spans of
--   that level that ended shortly before p: work in proportion to the live allocations, never a
--   scan of the run. Open spans (reach = the largest integer) contain p exactly when they start
--   at or before it. The views write one arm per level with constant bounds, so the plan does not
--   depend on the planner's statistics; base 4 keeps the arms few (34), so that one statement can
--   name the views several times within SQLite's limit of cursors.
-- * snapshot.ordinal is a snapshot's position among its node's snapshots (1 = first), so the
--   number of snapshots a span covers is a difference of two ordinals.
-- * memory.kind_seq and name_seq make the newest description of a memory win in any import order.
-- * Following a uid across snapshots compares the canonical text '0x' + 16 hex digits: an index
--   on that very expression lets `WHERE uid = '0x...'` on the views use it.
-- The public views keep their names, columns and rows; `allocation_spans` is new.

CREATE TABLE span_level (
    level INTEGER PRIMARY KEY,
    reach INTEGER NOT NULL
);

INSERT INTO span_level (level, reach)
WITH RECURSIVE levels (level, reach) AS (
    SELECT 0, 0
    UNION ALL
    SELECT level + 1, reach * 4 + 3 FROM levels WHERE level < 31
)
SELECT level, reach FROM levels;

INSERT INTO span_level (level, reach) VALUES (32, 9223372036854775807), (64, 9223372036854775807);

ALTER TABLE snapshot ADD COLUMN ordinal INTEGER NOT NULL DEFAULT 0;

-- Version 1 hashed a dump's content in its written order; version 2 hashes it in a canonical order.
-- A snapshot imported before keeps its old digest: the importer compares such a snapshot with a dump
-- of the same identity through its stored rows, and then records the new digest.
ALTER TABLE snapshot ADD COLUMN digest_version INTEGER NOT NULL DEFAULT 1;

-- The seq of the dump that gave a memory's kind and name: the newest description wins, whatever
-- the order of imports (-1: from before this version, or never named).
ALTER TABLE memory ADD COLUMN kind_seq INTEGER NOT NULL DEFAULT -1;
ALTER TABLE memory ADD COLUMN name_seq INTEGER NOT NULL DEFAULT -1;

UPDATE snapshot
SET ordinal = (SELECT count(*) FROM snapshot t WHERE t.run_id = snapshot.run_id AND t.node = snapshot.node AND t.seq <= snapshot.seq);

-- state: 0 valid, 1 collectable, 2 pending_free, 3 pending_alloc. uid and handle: 64-bit patterns.
CREATE TABLE allocation_span (
    memory_id   INTEGER NOT NULL,
    level       INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    uid         INTEGER NOT NULL,
    last_seq    INTEGER,
    offset      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    kind        INTEGER NOT NULL,
    handle      INTEGER,
    alignment   INTEGER,
    created_ns  INTEGER,
    provenance  INTEGER,
    label       INTEGER,
    gc_priority INTEGER,
    attrs       TEXT,
    PRIMARY KEY (memory_id, level, first_seq, uid)
) WITHOUT ROWID;

CREATE INDEX allocation_span_by_uid ON allocation_span (printf('0x%016x', uid));

CREATE TABLE hole_span (
    memory_id INTEGER NOT NULL,
    level     INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    offset    INTEGER NOT NULL,
    last_seq  INTEGER,
    size      INTEGER NOT NULL,
    PRIMARY KEY (memory_id, level, first_seq, offset)
) WITHOUT ROWID;

CREATE INDEX allocation_object_by_uid ON allocation_object (run_id, printf('0x%016x', uid));

-- Allocation rows to spans: consecutive ordinals with the same attributes form one island
-- (ordinal minus the row's rank among equal rows is constant along an island).
INSERT INTO allocation_span (memory_id, level, first_seq, uid, last_seq, offset, size, state, kind, handle,
                             alignment, created_ns, provenance, label, gc_priority, attrs)
WITH rows AS (
    SELECT a.*, s.seq, s.ordinal, s.run_id, s.node,
           s.ordinal - row_number() OVER (
               PARTITION BY a.memory_id, a.uid, a.offset, a.size, a.state, a.kind, a.handle, a.alignment,
                            a.created_ns, a.provenance, a.label, a.gc_priority, a.attrs
               ORDER BY s.ordinal) AS island
    FROM allocation a
    JOIN snapshot s ON s.id = a.snapshot_id
),
spans AS (
    SELECT memory_id, uid, offset, size, state, kind, handle, alignment, created_ns, provenance, label,
           gc_priority, attrs, run_id, node, min(seq) AS first_seq, max(seq) AS last_seq, max(ordinal) AS last_ordinal
    FROM rows
    GROUP BY memory_id, uid, offset, size, state, kind, handle, alignment, created_ns, provenance, label,
             gc_priority, attrs, island
),
closed AS (
    SELECT spans.*,
           last_ordinal = (SELECT max(t.ordinal) FROM snapshot t WHERE t.run_id = spans.run_id AND t.node = spans.node) AS open
    FROM spans
)
SELECT memory_id,
       CASE WHEN open THEN 64 ELSE (SELECT min(level) FROM span_level WHERE reach >= last_seq - first_seq) END,
       first_seq, uid,
       CASE WHEN open THEN NULL ELSE last_seq END,
       offset, size, state, kind, handle, alignment, created_ns, provenance, label, gc_priority, attrs
FROM closed;

INSERT INTO hole_span (memory_id, level, first_seq, offset, last_seq, size)
WITH rows AS (
    SELECT ms.memory_id, s.seq, s.ordinal, s.run_id, s.node,
           json_extract(h.value, '$[0]') AS offset,
           json_extract(h.value, '$[1]') AS size
    FROM memory_state ms
    JOIN snapshot s ON s.id = ms.snapshot_id,
         json_each(ms.holes) h
),
islands AS (
    SELECT rows.*, ordinal - row_number() OVER (PARTITION BY memory_id, offset, size ORDER BY ordinal) AS island
    FROM rows
),
spans AS (
    SELECT memory_id, offset, size, run_id, node, min(seq) AS first_seq, max(seq) AS last_seq, max(ordinal) AS last_ordinal
    FROM islands
    GROUP BY memory_id, offset, size, island
),
closed AS (
    SELECT spans.*,
           last_ordinal = (SELECT max(t.ordinal) FROM snapshot t WHERE t.run_id = spans.run_id AND t.node = spans.node) AS open
    FROM spans
)
SELECT memory_id,
       CASE WHEN open THEN 64 ELSE (SELECT min(level) FROM span_level WHERE reach >= last_seq - first_seq) END,
       first_seq, offset,
       CASE WHEN open THEN NULL ELSE last_seq END,
       size
FROM closed;

-- The views that read the old tables go first, then the tables.
DROP VIEW runs;
DROP VIEW memory_stats;
DROP VIEW memory_trend;
DROP VIEW allocations;
DROP VIEW holes;

DROP TABLE allocation;

-- memory_state without the hole list.
CREATE TABLE memory_figures (
    snapshot_id         INTEGER NOT NULL,
    memory_id           INTEGER NOT NULL,
    capacity            INTEGER NOT NULL,
    alignment           INTEGER,
    allocation_count    INTEGER NOT NULL,
    used_bytes          INTEGER NOT NULL,
    free_bytes          INTEGER NOT NULL,
    hole_count          INTEGER NOT NULL,
    largest_hole        INTEGER NOT NULL,
    fragmentation       REAL NOT NULL,
    reclaimable_bytes   INTEGER NOT NULL,
    largest_reclaimable INTEGER NOT NULL,
    unaccounted_bytes   INTEGER NOT NULL,
    holes_listed        INTEGER NOT NULL,
    PRIMARY KEY (snapshot_id, memory_id)
) WITHOUT ROWID;

INSERT INTO memory_figures
SELECT snapshot_id, memory_id, capacity, alignment, allocation_count, used_bytes, free_bytes, hole_count,
       largest_hole, fragmentation, reclaimable_bytes, largest_reclaimable, unaccounted_bytes, holes_listed
FROM memory_state;

DROP TABLE memory_state;
ALTER TABLE memory_figures RENAME TO memory_state;
CREATE INDEX memory_state_by_memory ON memory_state (memory_id, snapshot_id);

-- The producer of a run is the one named by its latest snapshot (highest seq, then node) that
-- names one, whatever order the dumps were imported in.
CREATE VIEW runs AS
SELECT r.id AS run_id,
       r.name AS run,
       r.node_count,
       (SELECT p.value FROM snapshot s JOIN string p ON p.id = s.producer
        WHERE s.run_id = r.id ORDER BY s.seq DESC, s.node DESC LIMIT 1) AS producer,
       (SELECT count(*) FROM snapshot s WHERE s.run_id = r.id) AS snapshot_count
FROM run r;

CREATE VIEW memory_stats AS
SELECT snapshot_id,
       memory_id,
       capacity,
       allocation_count,
       used_bytes,
       free_bytes,
       hole_count,
       largest_hole,
       fragmentation,
       reclaimable_bytes,
       largest_reclaimable,
       unaccounted_bytes,
       alignment,
       holes_listed
FROM memory_state;

CREATE VIEW memory_trend AS
SELECT r.name AS run,
       s.node,
       s.seq,
       s.time_ns,
       s.time_ns / 1e9 AS time_s,
       s.wall_time,
       printf('0x%016x', m.handle) AS handle,
       k.value AS kind,
       ms.capacity,
       ms.allocation_count,
       ms.used_bytes,
       ms.free_bytes,
       ms.hole_count,
       ms.largest_hole,
       ms.fragmentation,
       ms.reclaimable_bytes,
       ms.largest_reclaimable,
       ms.unaccounted_bytes,
       ms.snapshot_id,
       ms.memory_id,
       n.value AS name,
       s.reason
FROM memory_state ms
JOIN snapshot s ON s.id = ms.snapshot_id
JOIN memory m ON m.id = ms.memory_id
JOIN run r ON r.id = s.run_id
JOIN string k ON k.id = m.kind
LEFT JOIN string n ON n.id = m.name;

-- One row per allocation per snapshot: each snapshot with the spans of its node's memories that
-- contain it, one arm per span level (a constant level and reach make each arm one index range,
-- whatever the query planner knows about the data).
CREATE VIEW allocations AS
SELECT at_snapshot.snapshot_id,
       at_snapshot.memory_id,
       printf('0x%016x', at_snapshot.uid) AS uid,
       CASE WHEN at_snapshot.handle IS NULL THEN NULL ELSE printf('0x%016x', at_snapshot.handle) END AS handle,
       k.value AS kind,
       CASE at_snapshot.state
           WHEN 0 THEN 'valid'
           WHEN 1 THEN 'collectable'
           WHEN 2 THEN 'pending_free'
           ELSE 'pending_alloc'
       END AS state,
       at_snapshot.offset,
       at_snapshot.size,
       at_snapshot.alignment,
       at_snapshot.created_ns,
       p.value AS provenance,
       l.value AS label,
       at_snapshot.gc_priority,
       at_snapshot.attrs,
       at_snapshot.offset + at_snapshot.size AS end_offset
FROM (
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 0 AND a.first_seq BETWEEN s.seq - 0 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 1 AND a.first_seq BETWEEN s.seq - 3 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 2 AND a.first_seq BETWEEN s.seq - 15 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 3 AND a.first_seq BETWEEN s.seq - 63 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 4 AND a.first_seq BETWEEN s.seq - 255 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 5 AND a.first_seq BETWEEN s.seq - 1023 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 6 AND a.first_seq BETWEEN s.seq - 4095 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 7 AND a.first_seq BETWEEN s.seq - 16383 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 8 AND a.first_seq BETWEEN s.seq - 65535 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 9 AND a.first_seq BETWEEN s.seq - 262143 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 10 AND a.first_seq BETWEEN s.seq - 1048575 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 11 AND a.first_seq BETWEEN s.seq - 4194303 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 12 AND a.first_seq BETWEEN s.seq - 16777215 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 13 AND a.first_seq BETWEEN s.seq - 67108863 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 14 AND a.first_seq BETWEEN s.seq - 268435455 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 15 AND a.first_seq BETWEEN s.seq - 1073741823 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 16 AND a.first_seq BETWEEN s.seq - 4294967295 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 17 AND a.first_seq BETWEEN s.seq - 17179869183 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 18 AND a.first_seq BETWEEN s.seq - 68719476735 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 19 AND a.first_seq BETWEEN s.seq - 274877906943 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 20 AND a.first_seq BETWEEN s.seq - 1099511627775 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 21 AND a.first_seq BETWEEN s.seq - 4398046511103 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 22 AND a.first_seq BETWEEN s.seq - 17592186044415 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 23 AND a.first_seq BETWEEN s.seq - 70368744177663 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 24 AND a.first_seq BETWEEN s.seq - 281474976710655 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 25 AND a.first_seq BETWEEN s.seq - 1125899906842623 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 26 AND a.first_seq BETWEEN s.seq - 4503599627370495 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 27 AND a.first_seq BETWEEN s.seq - 18014398509481983 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 28 AND a.first_seq BETWEEN s.seq - 72057594037927935 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 29 AND a.first_seq BETWEEN s.seq - 288230376151711743 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 30 AND a.first_seq BETWEEN s.seq - 1152921504606846975 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 31 AND a.first_seq BETWEEN s.seq - 4611686018427387903 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 32 AND a.first_seq BETWEEN s.seq - 9223372036854775807 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, a.*
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN allocation_span a ON a.memory_id = m.id AND a.level = 64 AND a.first_seq BETWEEN s.seq - 9223372036854775807 AND s.seq
                     AND s.seq <= coalesce(a.last_seq, 9223372036854775807)
) at_snapshot
JOIN string k ON k.id = at_snapshot.kind
LEFT JOIN string p ON p.id = at_snapshot.provenance
LEFT JOIN string l ON l.id = at_snapshot.label;

-- One row per hole per snapshot, found like the allocations above.
CREATE VIEW holes AS
SELECT at_snapshot.snapshot_id,
       at_snapshot.memory_id,
       at_snapshot.offset,
       at_snapshot.size
FROM (
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 0 AND h.first_seq BETWEEN s.seq - 0 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 1 AND h.first_seq BETWEEN s.seq - 3 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 2 AND h.first_seq BETWEEN s.seq - 15 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 3 AND h.first_seq BETWEEN s.seq - 63 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 4 AND h.first_seq BETWEEN s.seq - 255 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 5 AND h.first_seq BETWEEN s.seq - 1023 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 6 AND h.first_seq BETWEEN s.seq - 4095 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 7 AND h.first_seq BETWEEN s.seq - 16383 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 8 AND h.first_seq BETWEEN s.seq - 65535 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 9 AND h.first_seq BETWEEN s.seq - 262143 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 10 AND h.first_seq BETWEEN s.seq - 1048575 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 11 AND h.first_seq BETWEEN s.seq - 4194303 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 12 AND h.first_seq BETWEEN s.seq - 16777215 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 13 AND h.first_seq BETWEEN s.seq - 67108863 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 14 AND h.first_seq BETWEEN s.seq - 268435455 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 15 AND h.first_seq BETWEEN s.seq - 1073741823 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 16 AND h.first_seq BETWEEN s.seq - 4294967295 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 17 AND h.first_seq BETWEEN s.seq - 17179869183 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 18 AND h.first_seq BETWEEN s.seq - 68719476735 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 19 AND h.first_seq BETWEEN s.seq - 274877906943 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 20 AND h.first_seq BETWEEN s.seq - 1099511627775 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 21 AND h.first_seq BETWEEN s.seq - 4398046511103 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 22 AND h.first_seq BETWEEN s.seq - 17592186044415 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 23 AND h.first_seq BETWEEN s.seq - 70368744177663 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 24 AND h.first_seq BETWEEN s.seq - 281474976710655 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 25 AND h.first_seq BETWEEN s.seq - 1125899906842623 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 26 AND h.first_seq BETWEEN s.seq - 4503599627370495 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 27 AND h.first_seq BETWEEN s.seq - 18014398509481983 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 28 AND h.first_seq BETWEEN s.seq - 72057594037927935 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 29 AND h.first_seq BETWEEN s.seq - 288230376151711743 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 30 AND h.first_seq BETWEEN s.seq - 1152921504606846975 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 31 AND h.first_seq BETWEEN s.seq - 4611686018427387903 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 32 AND h.first_seq BETWEEN s.seq - 9223372036854775807 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
    UNION ALL
    SELECT s.id AS snapshot_id, h.memory_id, h.offset, h.size
    FROM snapshot s JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
    JOIN hole_span h ON h.memory_id = m.id AND h.level = 64 AND h.first_seq BETWEEN s.seq - 9223372036854775807 AND s.seq
                     AND s.seq <= coalesce(h.last_seq, 9223372036854775807)
) at_snapshot;

-- One row per span: an allocation over the consecutive snapshots of its node in which nothing
-- about it changed.
CREATE VIEW allocation_spans AS
SELECT r.name AS run,
       m.node,
       m.id AS memory_id,
       printf('0x%016x', a.uid) AS uid,
       f.id AS first_snapshot_id,
       l.id AS last_snapshot_id,
       f.seq AS first_seq,
       l.seq AS last_seq,
       f.time_ns AS first_time_ns,
       l.time_ns AS last_time_ns,
       l.ordinal - f.ordinal + 1 AS snapshot_count,
       a.last_seq IS NULL AS open,
       CASE WHEN a.handle IS NULL THEN NULL ELSE printf('0x%016x', a.handle) END AS handle,
       k.value AS kind,
       CASE a.state
           WHEN 0 THEN 'valid'
           WHEN 1 THEN 'collectable'
           WHEN 2 THEN 'pending_free'
           ELSE 'pending_alloc'
       END AS state,
       a.offset,
       a.size,
       a.alignment,
       a.created_ns,
       p.value AS provenance,
       lb.value AS label,
       a.gc_priority,
       a.attrs,
       a.offset + a.size AS end_offset,
       m.run_id
FROM allocation_span a
JOIN memory m ON m.id = a.memory_id
JOIN run r ON r.id = m.run_id
JOIN snapshot f ON f.run_id = m.run_id AND f.node = m.node AND f.seq = a.first_seq
JOIN snapshot l ON l.run_id = m.run_id AND l.node = m.node
               AND l.seq = coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = m.run_id AND t.node = m.node))
JOIN string k ON k.id = a.kind
LEFT JOIN string p ON p.id = a.provenance
LEFT JOIN string lb ON lb.id = a.label;
