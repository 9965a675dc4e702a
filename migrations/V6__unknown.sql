-- What a dump does not know stays unknown (format v1's `unknown` on a memory: "capacity",
-- "placement", "allocations"). A report that prints no capacity, no addresses, or is cut off
-- before listing what the memory holds still imports, with stand-in values that keep it valid;
-- the stored row keeps the names of what is unknown, and the public views show NULL for every
-- figure that depends on it, so no query, dashboard or story reads a stand-in as a fact:
--
-- * capacity unknown: capacity and free_bytes are NULL;
-- * allocations unknown (the list may not be whole): used_bytes and free_bytes are NULL;
-- * anything unknown: hole_count, largest_hole, fragmentation, largest_reclaimable and
--   unaccounted_bytes are NULL (no holes are stored for that memory and snapshot).
--
-- `unknown` is NULL when the dump knows everything, so every existing row reads as before. The
-- CASTs give the figures the columns' affinity back (a CASE has none), so `capacity = '4096'`, as
-- Datasette writes its filters, still matches.

ALTER TABLE memory_state ADD COLUMN unknown TEXT;

DROP VIEW memory_stats;
CREATE VIEW memory_stats AS
SELECT snapshot_id,
       memory_id,
       CAST(CASE WHEN instr(unknown, 'capacity') THEN NULL ELSE capacity END AS INTEGER) AS capacity,
       allocation_count,
       CAST(CASE WHEN instr(unknown, 'allocations') THEN NULL ELSE used_bytes END AS INTEGER) AS used_bytes,
       CAST(CASE WHEN instr(unknown, 'capacity') OR instr(unknown, 'allocations') THEN NULL ELSE free_bytes END AS INTEGER) AS free_bytes,
       CAST(CASE WHEN unknown IS NULL THEN hole_count END AS INTEGER) AS hole_count,
       CAST(CASE WHEN unknown IS NULL THEN largest_hole END AS INTEGER) AS largest_hole,
       CAST(CASE WHEN unknown IS NULL THEN fragmentation END AS REAL) AS fragmentation,
       reclaimable_bytes,
       CAST(CASE WHEN unknown IS NULL THEN largest_reclaimable END AS INTEGER) AS largest_reclaimable,
       CAST(CASE WHEN unknown IS NULL THEN unaccounted_bytes END AS INTEGER) AS unaccounted_bytes,
       alignment,
       holes_listed,
       unknown
FROM memory_state;

DROP VIEW memory_trend;
CREATE VIEW memory_trend AS
SELECT r.name AS run,
       s.node,
       s.seq,
       s.time_ns,
       s.time_ns / 1e9 AS time_s,
       s.wall_time,
       printf('0x%016x', m.handle) AS handle,
       k.value AS kind,
       ms.capacity,
       ms.allocation_count,
       ms.used_bytes,
       ms.free_bytes,
       ms.hole_count,
       ms.largest_hole,
       ms.fragmentation,
       ms.reclaimable_bytes,
       ms.largest_reclaimable,
       ms.unaccounted_bytes,
       ms.snapshot_id,
       ms.memory_id,
       n.value AS name,
       s.reason,
       (SELECT t.time_unix FROM snapshots t WHERE t.snapshot_id = ms.snapshot_id) AS time_unix,
       printf('n%d %s 0x%016x', s.node, k.value, m.handle) AS series,
       ms.unknown
FROM memory_stats ms
JOIN snapshot s ON s.id = ms.snapshot_id
JOIN memory m ON m.id = ms.memory_id
JOIN run r ON r.id = s.run_id
JOIN string k ON k.id = m.kind
LEFT JOIN string n ON n.id = m.name;

-- PyTorch's out-of-memory event says how much the device had free outside the caching allocator
-- (`device_free`): format v1's failed request keeps it, NULL for every other producer.
ALTER TABLE failed_request ADD COLUMN device_free INTEGER;

DROP VIEW failed_requests;
CREATE VIEW failed_requests AS
SELECT f.snapshot_id,
       f.memory_id,
       f.size,
       f.alignment,
       k.value AS kind,
       p.value AS provenance,
       f.time_ns,
       n.value AS note,
       f.ordinal,
       f.device_free
FROM failed_request f
LEFT JOIN string k ON k.id = f.kind
LEFT JOIN string p ON p.id = f.provenance
LEFT JOIN string n ON n.id = f.note;
