"""Writes torch-expandable.pickle, a memstate test fixture: what
`torch.cuda.memory._dump_snapshot` pickles (the dict of `torch.cuda.memory._snapshot()`) for a
run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True on two GPUs, written by hand with the
standard pickle module (protocol 4, as torch writes it). Keys as pytorch v2.1.0 to v2.9.0 write
them (torch/csrc/cuda/Module.cpp, `THCPModule_memorySnapshot`: a segment's `stream`,
`segment_type`, `segment_pool_id` and `is_expandable`; trace entries with `time_us`), and as the
allocator reports an expandable segment: one segment per contiguous mapped range
(c10/cuda/CUDACachingAllocator.cpp, `DeviceCachingAllocator::snapshot`), `segment_map` and
`segment_unmap` trace entries for each range mapped or unmapped.

Device 0 has one expandable segment reserved at E. The trace maps 20 MiB at E, allocates 8 MiB
at E and 10 MiB at E+8M, maps 20 MiB more at E+20M, allocates 16 MiB at E+18M, frees the block
at E (free_requested, then free_completed), and unmaps E..E+8M: at the end the mapped range is
E+8M..E+40M (32 MiB), holding 10 MiB and 16 MiB active and 6 MiB inactive. Device 1 has a
2 MiB small-pool segment at D1 (not expandable) with 1 MiB allocated, and fails a 4 MiB request
with 1 MiB free on the device. The traces are merged by `time_us` in the order written below.
"""

import pickle
import sys

MIB = 1 << 20
E, D1 = 0x7F2000000000, 0x7F3000000000


def event(action, addr, size, time_us, stream=0, **more):
    entry = {"action": action, "addr": addr, "size": size, "stream": stream,
             "time_us": time_us, "frames": []}
    entry.update(more)
    return entry


def block(address, size, state):
    return {"address": address, "size": size, "requested_size": size, "state": state,
            "frames": []}


snapshot = {
    "segments": [
        {"device": 0, "address": E + 8 * MIB, "total_size": 32 * MIB,
         "allocated_size": 26 * MIB, "active_size": 26 * MIB, "requested_size": 26 * MIB,
         "stream": 0, "segment_type": "large", "segment_pool_id": (0, 0),
         "is_expandable": True, "frames": [],
         "blocks": [block(E + 8 * MIB, 10 * MIB, "active_allocated"),
                    block(E + 18 * MIB, 16 * MIB, "active_allocated"),
                    block(E + 34 * MIB, 6 * MIB, "inactive")]},
        {"device": 1, "address": D1, "total_size": 2 * MIB,
         "allocated_size": MIB, "active_size": MIB, "requested_size": MIB,
         "stream": 0, "segment_type": "small", "segment_pool_id": (0, 0),
         "is_expandable": False, "frames": [],
         "blocks": [block(D1, MIB, "active_allocated"), block(D1 + MIB, MIB, "inactive")]},
    ],
    "device_traces": [
        [
            event("segment_map", E, 20 * MIB, 100),
            event("alloc", E, 8 * MIB, 110),
            event("alloc", E + 8 * MIB, 10 * MIB, 130),
            event("segment_map", E + 20 * MIB, 20 * MIB, 150),
            event("alloc", E + 18 * MIB, 16 * MIB, 160),
            event("free_requested", E, 8 * MIB, 170),
            event("free_completed", E, 8 * MIB, 180),
            event("segment_unmap", E, 8 * MIB, 200),
            event("snapshot", 0, 0, 210),
        ],
        [
            event("segment_alloc", D1, 2 * MIB, 120),
            event("alloc", D1, MIB, 140),
            {"action": "oom", "device_free": MIB, "size": 4 * MIB, "stream": 0,
             "time_us": 190, "frames": []},
        ],
    ],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
                           "max_split_size": -1, "expandable_segments": True},
}

with open(sys.argv[1] if len(sys.argv) > 1 else "torch-expandable.pickle", "wb") as out:
    pickle.dump(snapshot, out, protocol=4)
