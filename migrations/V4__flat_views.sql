-- Why: users' own SQL must be fast through the views as they write it. Version 2's `allocations`
-- and `holes` were a UNION ALL of 34 arms, one per span level. SQLite pushes a constant
-- `snapshot_id = 7` into every arm, but it cannot flatten a compound view into a join, so a
-- snapshot named by a subquery, a join on `snapshots`, a CTE or a uid self-join expanded every
-- span of the run (seconds to minutes at 10 million rows).
--
-- * Both views become one SELECT: snapshot -> its node's memories -> span level -> the spans of
--   that level whose first_seq lies within the level's reach before the snapshot's seq. A plain
--   join is flattened into whatever query names the view, so the planner drives it from whatever
--   the query names: a snapshot (by id, by seq, by a subquery or a CTE), a memory, or a uid
--   (through allocation_span_by_uid, whose entries end with the primary key, so a uid lookup
--   also narrows by memory and level). Storage does not change.
-- * Provenance and label are scalar subqueries, not joins: a query that does not read them does
--   not look them up (SQLite drops an unused LEFT JOIN only outside aggregates, so count(*) over
--   every row would pay for each).
-- * GROUP BY state or kind over every row would sort every row (SQLite has no hash aggregate:
--   3 to 5 s at 10 million rows). An index on the view's very state expression, and one on the
--   kind, give the rows in that order instead. For that the span table keeps the kind as text
--   (it was a string id; a join to `string` cannot be read in text order without letting the
--   planner drive one-snapshot questions from the kind): the table is rebuilt below. Kinds are a
--   short vocabulary, so the text costs little more than the id did.
-- * Holes of two snapshots are matched by memory and offset: an index on those.
-- * New columns at the end of both views: span_first_seq and span_last_seq, the stretch of the
--   node's snapshots over which this row is unchanged. Two snapshots of one node share every row
--   whose stretch holds both, so "what changed between A and B" reads only the rows whose stretch
--   does not (memstate diff does).
-- * The planner orders a join by the row counts it believes. Without statistics it takes every
--   table for a million rows, span_level included, and then scans a memory's spans rather than 34
--   short ranges. Fixed statistics below describe a large database (10 million spans, 1,000
--   snapshots per node, a few memories per node, 34 span levels), so plans are the same on a test
--   fixture as at scale and the same in every SQLite that opens the file (sqlite3 shells, Python,
--   Datasette, Grafana). Spans are counted high on purpose: with fewer, SQLite 3.5x prefers to
--   read every span of the run and filter snapshots afterwards when a query names its snapshot
--   by an expression (`time_s = ...`) whose selectivity it cannot know.
--   They are the shape, not the size: memstate never runs ANALYZE (a user who does gets plans
--   from the real figures, which also use the indexes).

-- The views that read the span table go first; they are made again below.
DROP VIEW allocations;
DROP VIEW allocation_spans;

CREATE TABLE allocation_span_v4 (
    memory_id   INTEGER NOT NULL,
    level       INTEGER NOT NULL,
    first_seq   INTEGER NOT NULL,
    uid         INTEGER NOT NULL,
    last_seq    INTEGER,
    offset      INTEGER NOT NULL,
    size        INTEGER NOT NULL,
    state       INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    handle      INTEGER,
    alignment   INTEGER,
    created_ns  INTEGER,
    provenance  INTEGER,
    label       INTEGER,
    gc_priority INTEGER,
    attrs       TEXT,
    PRIMARY KEY (memory_id, level, first_seq, uid)
) WITHOUT ROWID;

INSERT INTO allocation_span_v4 (memory_id, level, first_seq, uid, last_seq, offset, size, state, kind, handle,
                                alignment, created_ns, provenance, label, gc_priority, attrs)
SELECT a.memory_id, a.level, a.first_seq, a.uid, a.last_seq, a.offset, a.size, a.state,
       (SELECT k.value FROM string k WHERE k.id = a.kind),
       a.handle, a.alignment, a.created_ns, a.provenance, a.label, a.gc_priority, a.attrs
FROM allocation_span a;

DROP TABLE allocation_span;
ALTER TABLE allocation_span_v4 RENAME TO allocation_span;
CREATE INDEX allocation_span_by_uid ON allocation_span (printf('0x%016x', uid));
CREATE INDEX allocation_span_by_kind ON allocation_span (kind);

CREATE VIEW allocations AS
SELECT s.id AS snapshot_id,
       a.memory_id,
       printf('0x%016x', a.uid) AS uid,
       CASE WHEN a.handle IS NULL THEN NULL ELSE printf('0x%016x', a.handle) END AS handle,
       a.kind,
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
       (SELECT p.value FROM string p WHERE p.id = a.provenance) AS provenance,
       (SELECT l.value FROM string l WHERE l.id = a.label) AS label,
       a.gc_priority,
       a.attrs,
       a.offset + a.size AS end_offset,
       a.first_seq AS span_first_seq,
       coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = s.run_id AND t.node = s.node)) AS span_last_seq
FROM snapshot s
JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
JOIN span_level v
JOIN allocation_span a ON a.memory_id = m.id AND a.level = v.level
                      AND a.first_seq BETWEEN s.seq - v.reach AND s.seq
                      AND s.seq <= coalesce(a.last_seq, 9223372036854775807);

DROP VIEW holes;
CREATE VIEW holes AS
SELECT s.id AS snapshot_id,
       h.memory_id,
       h.offset,
       h.size,
       h.first_seq AS span_first_seq,
       coalesce(h.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = s.run_id AND t.node = s.node)) AS span_last_seq
FROM snapshot s
JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
JOIN span_level v
JOIN hole_span h ON h.memory_id = m.id AND h.level = v.level
                AND h.first_seq BETWEEN s.seq - v.reach AND s.seq
                AND s.seq <= coalesce(h.last_seq, 9223372036854775807);

-- One row per span, as in version 2, with provenance and label looked up only when read, and
-- the first and last snapshot found in a covering index (one probe each, not two).
CREATE INDEX snapshot_by_node_seq ON snapshot (run_id, node, seq, id, time_ns, ordinal);

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
       a.kind,
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
       (SELECT p.value FROM string p WHERE p.id = a.provenance) AS provenance,
       (SELECT lb.value FROM string lb WHERE lb.id = a.label) AS label,
       a.gc_priority,
       a.attrs,
       a.offset + a.size AS end_offset,
       m.run_id
FROM allocation_span a
JOIN memory m ON m.id = a.memory_id
JOIN run r ON r.id = m.run_id
JOIN snapshot f ON f.run_id = m.run_id AND f.node = m.node AND f.seq = a.first_seq
JOIN snapshot l ON l.run_id = m.run_id AND l.node = m.node
               AND l.seq = coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = m.run_id AND t.node = m.node));

CREATE INDEX allocation_span_by_state ON allocation_span (
    CASE state WHEN 0 THEN 'valid' WHEN 1 THEN 'collectable' WHEN 2 THEN 'pending_free' ELSE 'pending_alloc' END
);
CREATE INDEX hole_span_by_offset ON hole_span (memory_id, offset);

-- The statistics: sqlite_stat1 exists once something was analysed; analysing the 34-row
-- span_level creates it, then every row is set by hand. Each figure is how many rows one value
-- of the index's leading columns selects (the table's rows first).
ANALYZE span_level;
DELETE FROM sqlite_stat1;
INSERT INTO sqlite_stat1 (tbl, idx, stat) VALUES
    ('span_level', NULL, '34'),
    ('allocation_span', 'allocation_span', '10000000 50000 10000 100 1'),
    ('allocation_span', 'allocation_span_by_uid', '10000000 2'),
    ('allocation_span', 'allocation_span_by_state', '10000000 2500000'),
    ('allocation_span', 'allocation_span_by_kind', '10000000 1000000'),
    ('snapshot', 'snapshot_by_node_seq', '1000 1000 1000 1 1 1 1'),
    ('hole_span', 'hole_span_by_offset', '10000000 50000 2'),
    ('hole_span', 'hole_span', '10000000 50000 10000 100 1'),
    ('snapshot', 'sqlite_autoindex_snapshot_1', '1000 1000 1000 1'),
    ('snapshot', 'snapshot_wall_by_node', '1000 1000 1000 1'),
    ('snapshot', 'snapshot_wall_by_time', '1000 1000 1 1'),
    ('memory', 'sqlite_autoindex_memory_1', '40 40 4 1'),
    ('memory_state', 'memory_state', '4000 4 1'),
    ('memory_state', 'memory_state_by_memory', '4000 100 1'),
    ('string', 'sqlite_autoindex_string_1', '10000 1'),
    ('run', 'sqlite_autoindex_run_1', '1 1'),
    ('allocation_object', 'allocation_object_by_uid', '100000 100000 2'),
    ('allocation_object', 'allocation_object', '100000 100000 2 1 1'),
    ('object', 'object', '10000 10000 1'),
    ('failed_request', 'failed_request', '100 2 1 1');
