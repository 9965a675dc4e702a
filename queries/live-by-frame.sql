-- Live bytes of one snapshot by call-stack frame: the numbers behind a flame graph. A frame's
-- bytes are those of the allocations whose stack holds it (each allocation counted once, however
-- often the frame recurs in its stack); its self bytes those of the allocations whose innermost
-- frame it is. Allocations without a stack (a dump that gives none) are left out. PyTorch blocks
-- carry their whole stacks: every block allocated (active or pending free) counts. The joins
-- go from the snapshot's stacks to their frames (CROSS JOIN keeps SQLite from scanning every
-- stack of the database); each parameter is named once (`chosen`), so that Datasette's form of
-- it stays shallow enough for SQLite's parser.
--
-- @param snapshot_id  snapshot  the snapshot (snapshots.snapshot_id)
-- @param memory_id    memory    the memory (memories.memory_id), or every memory of the snapshot (default all)
--
-- @column frame             text   FILE:LINE NAME (the line or name left out when the dump gives none)
-- @column bytes             bytes  bytes of the allocations whose stack holds the frame
-- @column self_bytes        bytes  bytes of the allocations whose innermost frame it is
-- @column allocation_count  count  allocations whose stack holds the frame
WITH chosen AS (
    SELECT :snapshot_id AS snapshot_id, :memory_id AS memory_id
),
live AS (
    SELECT a.stack_id, sum(a.size) AS bytes, count(*) AS allocation_count
    FROM chosen c CROSS JOIN allocations a
    WHERE a.snapshot_id = c.snapshot_id
      AND (c.memory_id = -1 OR a.memory_id = c.memory_id)
      AND a.stack_id IS NOT NULL
    GROUP BY a.stack_id
),
held AS (
    SELECT DISTINCT l.stack_id, f.frame_id
    FROM live l CROSS JOIN stack_frames f ON f.stack_id = l.stack_id
),
inclusive AS (
    SELECT h.frame_id, sum(l.bytes) AS bytes, sum(l.allocation_count) AS allocation_count
    FROM held h JOIN live l ON l.stack_id = h.stack_id
    GROUP BY h.frame_id
),
innermost AS (
    SELECT f.frame_id, sum(l.bytes) AS bytes
    FROM live l CROSS JOIN stack_frames f ON f.stack_id = l.stack_id AND f.depth = 0
    GROUP BY f.frame_id
)
SELECT fr.file || coalesce(':' || fr.line, '') || coalesce(' ' || fr.name, '') AS frame,
       i.bytes,
       coalesce(s.bytes, 0) AS self_bytes,
       i.allocation_count
FROM inclusive i
JOIN frames fr ON fr.frame_id = i.frame_id
LEFT JOIN innermost s ON s.frame_id = i.frame_id
ORDER BY i.bytes DESC, self_bytes DESC, frame;
