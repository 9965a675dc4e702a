-- Provenances whose live bytes (valid, collectable and pending_alloc allocations) grow across a
-- run, per node: leak suspects, the biggest growth first. Only provenances that grew are listed.
--
-- @param run  text     the run (runs.run)
-- @param top  integer  at most this many rows
--
-- @column node          id     the node
-- @column provenance    text   where the program asked for the allocations
-- @column first_bytes   bytes  live bytes at the node's first snapshot
-- @column last_bytes    bytes  live bytes at the node's last snapshot
-- @column growth_bytes  bytes  last_bytes - first_bytes
-- @column peak_bytes    bytes  the most live bytes at any snapshot of the node
WITH per_snapshot AS (
    SELECT s.node, s.seq, a.provenance, sum(a.size) AS bytes
    FROM allocations a
    JOIN snapshots s ON s.snapshot_id = a.snapshot_id
    WHERE s.run = :run AND a.state IN ('valid', 'collectable', 'pending_alloc')
    GROUP BY s.node, s.seq, a.provenance
),
bounds AS (
    SELECT node, min(seq) AS first_seq, max(seq) AS last_seq
    FROM snapshots WHERE run = :run GROUP BY node
),
provenances AS (
    SELECT DISTINCT node, provenance FROM per_snapshot
)
SELECT p.node,
       p.provenance,
       coalesce((SELECT bytes FROM per_snapshot f WHERE f.node = p.node AND f.provenance IS p.provenance AND f.seq = b.first_seq), 0) AS first_bytes,
       coalesce((SELECT bytes FROM per_snapshot l WHERE l.node = p.node AND l.provenance IS p.provenance AND l.seq = b.last_seq), 0) AS last_bytes,
       coalesce((SELECT bytes FROM per_snapshot l WHERE l.node = p.node AND l.provenance IS p.provenance AND l.seq = b.last_seq), 0)
         - coalesce((SELECT bytes FROM per_snapshot f WHERE f.node = p.node AND f.provenance IS p.provenance AND f.seq = b.first_seq), 0) AS growth_bytes,
       (SELECT max(bytes) FROM per_snapshot m WHERE m.node = p.node AND m.provenance IS p.provenance) AS peak_bytes
FROM provenances p
JOIN bounds b ON b.node = p.node
WHERE growth_bytes > 0
ORDER BY growth_bytes DESC, p.node, p.provenance
LIMIT :top;
