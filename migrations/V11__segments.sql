-- Why: a PyTorch run was stored as one memory per segment of the caching allocator, so a 3-GPU
-- pickle became a dozen "memories" ranked by fragmentation, and a full segment (normal in a
-- caching allocator) read as a memory with no room (issue 60). A GPU is now one memory
-- (`cuda:N`), and its segments are a level inside it (format v1's `memories[].segments`).
--
-- * `segment`: one row per segment of a memory at a snapshot: where it is placed in the memory
--   (`offset`, `size`), its address on the device, its pool (`large`, `small`, or a private
--   pool's), its stream, whether it is an expandable segment, and the bytes its allocations take
--   (`allocated_bytes`, counted by the importer). Per snapshot, not as spans: a run has tens to
--   hundreds of segments against thousands of blocks.
-- * `memory_state.device_free`: what the device had free outside every allocator when the
--   snapshot was taken (PyTorch's `torch.cuda.mem_get_info`, recorded by the Recorder), NULL
--   when not recorded.
-- * `memory_stats` again: listed holes are the allocator's own free list, so they stay facts
--   where only the capacity is unknown (a GPU whose size was not recorded): free_bytes,
--   hole_count, largest_hole and fragmentation are shown; what needs the capacity
--   (largest_reclaimable, unaccounted_bytes) stays NULL.

CREATE TABLE segment (
    snapshot_id     INTEGER NOT NULL,
    memory_id       INTEGER NOT NULL,
    offset          INTEGER NOT NULL,
    size            INTEGER NOT NULL,
    address         INTEGER NOT NULL,
    pool            INTEGER,
    stream          INTEGER,
    expandable      INTEGER NOT NULL,
    allocated_bytes INTEGER NOT NULL,
    PRIMARY KEY (snapshot_id, memory_id, offset)
) WITHOUT ROWID;

ALTER TABLE memory_state ADD COLUMN device_free INTEGER;

CREATE VIEW segments AS
SELECT sg.snapshot_id,
       sg.memory_id,
       sg.offset,
       sg.size,
       printf('0x%016x', sg.address) AS address,
       p.value AS pool,
       sg.stream,
       sg.expandable,
       sg.allocated_bytes,
       sg.size - sg.allocated_bytes AS free_bytes
FROM segment sg
LEFT JOIN string p ON p.id = sg.pool;

DROP VIEW memory_stats;
CREATE VIEW memory_stats AS
SELECT snapshot_id,
       memory_id,
       CAST(CASE WHEN instr(unknown, 'capacity') THEN NULL ELSE capacity END AS INTEGER) AS capacity,
       allocation_count,
       CAST(CASE WHEN instr(unknown, 'allocations') THEN NULL ELSE used_bytes END AS INTEGER) AS used_bytes,
       CAST(CASE WHEN instr(unknown, 'allocations') OR (instr(unknown, 'capacity') AND NOT holes_listed) THEN NULL
                 ELSE free_bytes END AS INTEGER) AS free_bytes,
       CAST(CASE WHEN unknown IS NULL OR (unknown = 'capacity' AND holes_listed) THEN hole_count END AS INTEGER) AS hole_count,
       CAST(CASE WHEN unknown IS NULL OR (unknown = 'capacity' AND holes_listed) THEN largest_hole END AS INTEGER) AS largest_hole,
       CAST(CASE WHEN unknown IS NULL OR (unknown = 'capacity' AND holes_listed) THEN fragmentation END AS REAL) AS fragmentation,
       reclaimable_bytes,
       CAST(CASE WHEN unknown IS NULL THEN largest_reclaimable END AS INTEGER) AS largest_reclaimable,
       CAST(CASE WHEN unknown IS NULL THEN unaccounted_bytes END AS INTEGER) AS unaccounted_bytes,
       alignment,
       holes_listed,
       unknown,
       device_free
FROM memory_state;
