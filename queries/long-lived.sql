-- Allocations followed by uid across the snapshots of a run: when each was first and last seen,
-- in how many snapshots, and how big; the longest-lived first. Long-lived small allocations in
-- the middle of a memory are the usual cause of fragmentation. A uid seen with another kind or
-- provenance (a producer that reuses ids) is a row of its own.
--
-- Reads the spans: one row per
-- stretch of unchanged snapshots, not one per snapshot; like growth, memstate's private span
-- table with integer ids, the texts looked up only for the rows shown.
-- Ties are broken down to the kind and provenance, so that every engine gives the rows in one
-- order.
--
-- @param run  run      the run (runs.run)
-- @param top  limit    at most this many allocations (default 20)
--
-- @column node        integer       the node that holds it
-- @column uid         id       the allocation
-- @column kind        text     its kind
-- @column provenance  text     where the program asked for it
-- @column size        bytes    its size (the largest seen)
-- @column first_seq   count    the first snapshot (seq) it appears in
-- @column last_seq    count    the last snapshot (seq) it appears in
-- @column snapshots   count    how many snapshots it appears in
-- @column lifetime_s  seconds  time between its first and last snapshot
WITH nodes AS (
    SELECT s.run_id, s.node, max(s.seq) AS last_seq
    FROM snapshot s
    WHERE s.run_id = (SELECT r.id FROM run r WHERE r.name = :run)
    GROUP BY s.run_id, s.node
),
spans AS (
    SELECT n.run_id, n.node, a.uid, a.kind, a.provenance, a.size, a.first_seq,
           coalesce(a.last_seq, n.last_seq) AS last_seq
    FROM nodes n
    JOIN memory m ON m.run_id = n.run_id AND m.node = n.node
    JOIN allocation_span a ON a.memory_id = m.id
),
lives AS (
    SELECT sp.run_id, sp.node, sp.uid, sp.kind, sp.provenance,
           max(sp.size) AS size,
           min(sp.first_seq) AS first_seq,
           max(sp.last_seq) AS last_seq,
           sum(l.ordinal - f.ordinal + 1) AS snapshots
    FROM spans sp
    JOIN snapshot f ON f.run_id = sp.run_id AND f.node = sp.node AND f.seq = sp.first_seq
    JOIN snapshot l ON l.run_id = sp.run_id AND l.node = sp.node AND l.seq = sp.last_seq
    GROUP BY sp.run_id, sp.node, sp.uid, sp.kind, sp.provenance
)
SELECT v.node,
       printf('0x%016x', v.uid) AS uid,
       v.kind,
       p.value AS provenance,
       v.size,
       v.first_seq,
       v.last_seq,
       v.snapshots,
       (l.time_ns - f.time_ns) / 1e9 AS lifetime_s
FROM lives v
JOIN snapshot f ON f.run_id = v.run_id AND f.node = v.node AND f.seq = v.first_seq
JOIN snapshot l ON l.run_id = v.run_id AND l.node = v.node AND l.seq = v.last_seq
LEFT JOIN string p ON p.id = v.provenance
ORDER BY v.snapshots DESC, lifetime_s DESC, v.node, uid, v.first_seq, v.kind, provenance
LIMIT :top;
