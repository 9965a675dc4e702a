-- Provenances whose live bytes (valid, collectable and pending_alloc allocations) grow across a
-- run, per node: leak suspects, the biggest growth first. Only provenances that grew are listed.
--
-- Reads the spans once: the live bytes of a provenance rise where its spans start and fall after
-- they end. The bytes starting and ending are summed per snapshot first (one sort of the spans),
-- then a running sum over those few rows gives the figure at every snapshot where something
-- changed: started up to it, less ended before it. The peak is one of those. It reads memstate's
-- private span table (with integer ids; texts only for the rows shown) rather than the
-- allocation_spans view, whose joins per span cost more than the whole question may take at 10
-- million allocation rows; it is released with the schema it reads.
--
-- Sizes are summed in two halves (high and low 32 bits) and put together: exact while the total
-- fits in 64 bits, a real number beyond (sizes reach 2^63 - 1, and SQLite's sum() stops with
-- "integer overflow" past that).
--
-- @param run  run      the run (runs.run)
-- @param top  limit    at most this many rows (default 20)
--
-- @column node          integer     the node
-- @column provenance    text   where the program asked for the allocations
-- @column first_bytes   bytes  live bytes at the node's first snapshot
-- @column last_bytes    bytes  live bytes at the node's last snapshot
-- @column growth_bytes  bytes  last_bytes - first_bytes
-- @column peak_bytes    bytes  the most live bytes at any snapshot of the node
WITH nodes AS (
    SELECT s.run_id, s.node, min(s.seq) AS first_seq, max(s.seq) AS last_seq
    FROM snapshot s
    WHERE s.run_id = (SELECT r.id FROM run r WHERE r.name = :run)
    GROUP BY s.run_id, s.node
),
live AS (
    SELECT n.node, a.provenance, a.first_seq, coalesce(a.last_seq, n.last_seq) AS last_seq, a.size
    FROM nodes n
    JOIN memory m ON m.run_id = n.run_id AND m.node = n.node
    JOIN allocation_span a ON a.memory_id = m.id
    WHERE a.state IN (0, 1, 3)
),
per_seq AS (
    SELECT node, provenance, seq,
           sum(starting >> 32) AS starting_high, sum(starting & 4294967295) AS starting_low,
           sum(ending >> 32) AS ending_high, sum(ending & 4294967295) AS ending_low
    FROM (SELECT node, provenance, first_seq AS seq, size AS starting, 0 AS ending FROM live
          UNION ALL
          SELECT node, provenance, last_seq AS seq, 0 AS starting, size AS ending FROM live)
    GROUP BY node, provenance, seq
),
running AS (
    SELECT node, provenance, seq,
           (sum(starting_high) OVER w - sum(ending_high) OVER w + ending_high) * 4294967296
             + (sum(starting_low) OVER w - sum(ending_low) OVER w + ending_low) AS bytes
    FROM per_seq
    WINDOW w AS (PARTITION BY node, provenance ORDER BY seq ROWS UNBOUNDED PRECEDING)
),
figures AS (
    SELECT r.node, r.provenance,
           coalesce(max(CASE WHEN r.seq = n.first_seq THEN r.bytes END), 0) AS first_bytes,
           coalesce(max(CASE WHEN r.seq = n.last_seq THEN r.bytes END), 0) AS last_bytes,
           max(r.bytes) AS peak_bytes
    FROM running r JOIN nodes n ON n.node = r.node
    GROUP BY r.node, r.provenance
)
SELECT f.node,
       p.value AS provenance,
       f.first_bytes,
       f.last_bytes,
       f.last_bytes - f.first_bytes AS growth_bytes,
       f.peak_bytes
FROM figures f
LEFT JOIN string p ON p.id = f.provenance
WHERE f.last_bytes - f.first_bytes > 0
ORDER BY growth_bytes DESC, f.node, p.value
LIMIT :top;
