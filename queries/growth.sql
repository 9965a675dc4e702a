-- Provenances whose live bytes (valid, collectable and pending_alloc allocations) grow across a
-- run, per node: leak suspects, the biggest growth first. Only provenances that grew are listed.
-- Reads allocation_spans once: the live bytes of a provenance rise where its spans start and fall
-- after they end, so a running sum over those events gives every snapshot's figure (the peak is
-- reached where a span starts).
--
-- @param run  text     the run (runs.run)
-- @param top  integer  at most this many rows (default 20)
--
-- @column node          id     the node
-- @column provenance    text   where the program asked for the allocations
-- @column first_bytes   bytes  live bytes at the node's first snapshot
-- @column last_bytes    bytes  live bytes at the node's last snapshot
-- @column growth_bytes  bytes  last_bytes - first_bytes
-- @column peak_bytes    bytes  the most live bytes at any snapshot of the node
WITH bounds AS (
    SELECT node, min(seq) AS first_seq, max(seq) AS last_seq
    FROM snapshots WHERE run = :run GROUP BY node
),
live AS (
    SELECT node, provenance, first_seq, last_seq, size
    FROM allocation_spans
    WHERE run = :run AND state IN ('valid', 'collectable', 'pending_alloc')
),
events AS (
    SELECT node, provenance, first_seq AS seq, 0 AS phase, size AS delta FROM live
    UNION ALL
    SELECT node, provenance, last_seq AS seq, 1 AS phase, -size AS delta FROM live
),
running AS (
    SELECT node, provenance, phase,
           sum(delta) OVER (PARTITION BY node, provenance ORDER BY seq, phase ROWS UNBOUNDED PRECEDING) AS bytes
    FROM events
),
peaks AS (
    SELECT node, provenance, max(bytes) AS peak_bytes FROM running WHERE phase = 0 GROUP BY node, provenance
),
ends AS (
    SELECT l.node, l.provenance,
           sum(CASE WHEN l.first_seq = b.first_seq THEN l.size ELSE 0 END) AS first_bytes,
           sum(CASE WHEN l.last_seq = b.last_seq THEN l.size ELSE 0 END) AS last_bytes
    FROM live l JOIN bounds b ON b.node = l.node
    GROUP BY l.node, l.provenance
)
SELECT e.node,
       e.provenance,
       e.first_bytes,
       e.last_bytes,
       e.last_bytes - e.first_bytes AS growth_bytes,
       p.peak_bytes
FROM ends e
JOIN peaks p ON p.node = e.node AND p.provenance IS e.provenance
WHERE e.last_bytes - e.first_bytes > 0
ORDER BY growth_bytes DESC, e.node, e.provenance
LIMIT :top;
