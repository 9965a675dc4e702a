-- Allocations followed by uid across the snapshots of a run: when each was first and last seen,
-- in how many snapshots, and how big; the longest-lived first. Long-lived small allocations in
-- the middle of a memory are the usual cause of fragmentation. Reads allocation_spans: one row
-- per stretch of unchanged snapshots, not one per snapshot.
--
-- @param run  text     the run (runs.run)
-- @param top  integer  at most this many allocations (default 20)
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
SELECT node,
       uid,
       kind,
       provenance,
       max(size) AS size,
       min(first_seq) AS first_seq,
       max(last_seq) AS last_seq,
       sum(snapshot_count) AS snapshots,
       (max(last_time_ns) - min(first_time_ns)) / 1e9 AS lifetime_s
FROM allocation_spans
WHERE run = :run
GROUP BY node, uid, kind, provenance
ORDER BY snapshots DESC, lifetime_s DESC, node, uid
LIMIT :top;
