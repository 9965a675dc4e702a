-- Provenances whose live bytes (valid, collectable and pending_alloc allocations) grow across a
-- run, per node: leak suspects, the biggest growth first. Only provenances that grew are listed.
-- Reads allocation_spans once: the live bytes of a provenance rise where its spans start and fall
-- after they end. The bytes starting and ending are summed per snapshot first (one sort of the
-- spans), then a running sum over those few rows gives the figure at every snapshot where
-- something changed: started up to it, less ended before it. The peak is one of those.
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
per_seq AS (
    SELECT node, provenance, seq, sum(starting) AS starting, sum(ending) AS ending
    FROM (SELECT node, provenance, first_seq AS seq, size AS starting, 0 AS ending FROM live
          UNION ALL
          SELECT node, provenance, last_seq AS seq, 0 AS starting, size AS ending FROM live)
    GROUP BY node, provenance, seq
),
running AS (
    SELECT node, provenance, seq,
           sum(starting) OVER w - sum(ending) OVER w + ending AS bytes
    FROM per_seq
    WINDOW w AS (PARTITION BY node, provenance ORDER BY seq ROWS UNBOUNDED PRECEDING)
),
figures AS (
    SELECT r.node, r.provenance,
           coalesce(sum(CASE WHEN r.seq = b.first_seq THEN r.bytes END), 0) AS first_bytes,
           coalesce(sum(CASE WHEN r.seq = b.last_seq THEN r.bytes END), 0) AS last_bytes,
           max(r.bytes) AS peak_bytes
    FROM running r JOIN bounds b ON b.node = r.node
    GROUP BY r.node, r.provenance
)
SELECT node,
       provenance,
       first_bytes,
       last_bytes,
       last_bytes - first_bytes AS growth_bytes,
       peak_bytes
FROM figures
WHERE last_bytes - first_bytes > 0
ORDER BY growth_bytes DESC, node, provenance
LIMIT :top;
