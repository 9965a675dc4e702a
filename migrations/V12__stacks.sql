-- Why: a PyTorch block carries its whole call stack, and memstate kept one frame of it (the
-- provenance): at the peak of a real run 21.76 of 21.84 GiB held had no source location
-- (issue 60). Format v1 gains `frames` and `stacks` (a dump's source locations, and its call
-- stacks as lists of frame indices, innermost first) and an allocation's `stack`.
--
-- * `frame`: each source location once per database (file and name as string ids, line; a
--   line of -1 and a name of 0 where not given), `stack`: each distinct call stack once (its frame ids, innermost first, as text),
--   `stack_frame`: the frames of each stack by depth (0 innermost), for joins.
-- * `allocation_span_stored.stack`: the allocation's stack, part of what a span holds
--   unchanged (the same block with another stack is another span).
-- * The views: `frames`, `stack_frames`, and `stack_id` at the end of `allocations` and
--   `allocation_spans` (and of the private `allocation_span`).

CREATE TABLE frame (
    id   INTEGER PRIMARY KEY,
    file INTEGER NOT NULL REFERENCES string (id),
    line INTEGER NOT NULL,
    name INTEGER NOT NULL,
    UNIQUE (file, line, name)
);

CREATE TABLE stack (
    id     INTEGER PRIMARY KEY,
    frames TEXT NOT NULL UNIQUE
);

CREATE TABLE stack_frame (
    stack_id INTEGER NOT NULL,
    depth    INTEGER NOT NULL,
    frame_id INTEGER NOT NULL,
    PRIMARY KEY (stack_id, depth)
) WITHOUT ROWID;

ALTER TABLE allocation_span_stored ADD COLUMN stack INTEGER;

CREATE VIEW frames AS
SELECT f.id AS frame_id,
       fl.value AS file,
       CASE WHEN f.line < 0 THEN NULL ELSE f.line END AS line,
       n.value AS name
FROM frame f
JOIN string fl ON fl.id = f.file
LEFT JOIN string n ON n.id = f.name;

CREATE VIEW stack_frames AS
SELECT sf.stack_id,
       sf.depth,
       sf.frame_id,
       fl.value AS file,
       CASE WHEN f.line < 0 THEN NULL ELSE f.line END AS line,
       n.value AS name
FROM stack_frame sf
JOIN frame f ON f.id = sf.frame_id
JOIN string fl ON fl.id = f.file
LEFT JOIN string n ON n.id = f.name;

DROP VIEW allocation_span;
CREATE VIEW allocation_span AS
SELECT a.memory_id,
       a.level,
       a.first_seq,
       a.uid,
       coalesce(a.last_seq,
                CASE WHEN EXISTS (SELECT 1 FROM allocation_span_end WHERE memory_id > 0)
                     THEN (SELECT e.last_seq FROM allocation_span_end e
                           WHERE e.memory_id = a.memory_id AND e.first_seq = a.first_seq AND e.uid = a.uid)
                END) AS last_seq,
       a.offset,
       a.size,
       a.state,
       a.kind,
       a.handle,
       a.alignment,
       a.created_ns,
       a.provenance,
       a.label,
       a.gc_priority,
       a.attrs,
       a.stack AS stack_id
FROM allocation_span_stored a;

DROP VIEW allocations;
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
       coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = s.run_id AND t.node = s.node)) AS span_last_seq,
       a.stack_id
FROM snapshot s
JOIN memory m ON m.run_id = s.run_id AND m.node = s.node
JOIN span_level v ON v.level % 64 <= s.top_level
JOIN allocation_span a ON a.memory_id = m.id AND a.level = v.level
                      AND a.first_seq BETWEEN s.seq - v.reach AND s.seq
                      AND s.seq <= coalesce(a.last_seq, 9223372036854775807);

DROP VIEW allocation_spans;
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
       m.run_id,
       a.stack_id
FROM allocation_span a
JOIN memory m ON m.id = a.memory_id
JOIN run r ON r.id = m.run_id
JOIN snapshot f ON f.run_id = m.run_id AND f.node = m.node AND f.seq = a.first_seq
JOIN snapshot l ON l.run_id = m.run_id AND l.node = m.node
               AND l.seq = coalesce(a.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = m.run_id AND t.node = m.node));
