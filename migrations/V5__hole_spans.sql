-- hole_spans: the holes' spans as a public view, as allocation_spans is for allocations. One row
-- per free range of a memory over a stretch of consecutive snapshots of its node (by seq) in
-- which it stays the same; `last_seq` is the node's latest seq while the span is open. The rows of
-- `holes` are exactly these spans' rows at each snapshot they cover. (The Parquet export writes
-- it per run and node, with natural keys.)
CREATE VIEW hole_spans AS
SELECT r.name AS run,
       m.node,
       m.id AS memory_id,
       f.id AS first_snapshot_id,
       l.id AS last_snapshot_id,
       f.seq AS first_seq,
       l.seq AS last_seq,
       f.time_ns AS first_time_ns,
       l.time_ns AS last_time_ns,
       l.ordinal - f.ordinal + 1 AS snapshot_count,
       h.last_seq IS NULL AS open,
       h.offset,
       h.size,
       h.offset + h.size AS end_offset,
       m.run_id
FROM hole_span h
JOIN memory m ON m.id = h.memory_id
JOIN run r ON r.id = m.run_id
JOIN snapshot f ON f.run_id = m.run_id AND f.node = m.node AND f.seq = h.first_seq
JOIN snapshot l ON l.run_id = m.run_id AND l.node = m.node
               AND l.seq = coalesce(h.last_seq, (SELECT max(t.seq) FROM snapshot t WHERE t.run_id = m.run_id AND t.node = m.node));
