-- Allocations followed by uid across the snapshots of a run: when each was first and last seen,
-- in how many snapshots, and how big; the longest-lived first. Long-lived small allocations in
-- the middle of a memory are the usual cause of fragmentation.
--
-- @param run  text     the run (runs.run)
-- @param top  integer  at most this many allocations
--
-- @column node        id       the node that holds it
-- @column uid         id       the allocation
-- @column kind        text     its kind
-- @column provenance  text     where the program asked for it
-- @column size        bytes    its size (the largest seen)
-- @column first_seq   count    the first snapshot (seq) it appears in
-- @column last_seq    count    the last snapshot (seq) it appears in
-- @column snapshots   count    how many snapshots it appears in
-- @column lifetime_s  seconds  time between its first and last snapshot
SELECT s.node,
       a.uid,
       a.kind,
       a.provenance,
       max(a.size) AS size,
       min(s.seq) AS first_seq,
       max(s.seq) AS last_seq,
       count(*) AS snapshots,
       (max(s.time_ns) - min(s.time_ns)) / 1e9 AS lifetime_s
FROM allocations a
JOIN snapshots s ON s.snapshot_id = a.snapshot_id
WHERE s.run = :run
GROUP BY s.node, a.uid, a.kind, a.provenance
ORDER BY snapshots DESC, lifetime_s DESC, s.node, a.uid
LIMIT :top;
