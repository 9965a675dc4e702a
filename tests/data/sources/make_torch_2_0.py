"""Writes torch-2.0.pickle and torch-segments.pickle, memstate test fixtures, with the standard
pickle module (its default protocol, as `pickle.dump` writes it).

torch-2.0.pickle is `pickle.dump(torch.cuda.memory._snapshot(), f)` of PyTorch 2.0, keys as
`THCPModule_memorySnapshot` writes them in torch/csrc/cuda/Module.cpp of v2.0.0: a segment has
device, address, total_size, allocated_size, active_size, stream, segment_type and blocks; a
block only size, state and (when history is recorded) `history`, a list of {addr, real_size,
frames}: no `address`, blocks tile their segment in order. A trace entry has action, addr, size,
stream (and frames), no time_us; an `oom` entry carries `device_free` in place of `addr`
(`trace_entry[TraceEntry::OOM == te.action_ ? device_free_s : addr_s] = te.addr_`).

Device 0 has two 20 MiB segments. S1 at 0x7f0000000000: 8 MiB active (train.py:20), 4 MiB
inactive, 8 MiB active. S2 at 0x7f0002000000: 6 MiB inactive, 10 MiB active (train.py:31), 4 MiB
inactive. Device 1 has one 40 MiB segment, all inactive. The trace of device 0 ends with an oom of
a 12 MiB request with 2 MiB free on the device: the cache holds 14 MiB free, its largest block is
6 MiB.

torch-segments.pickle is `pickle.dump(torch.cuda.memory_snapshot(), f)`: the bare list of
segments (torch/cuda/memory.py, `memory_snapshot` returns `_cuda_memorySnapshot()["segments"]`),
here of a later release whose blocks carry `address` and `frames`: one 4 MiB segment on device 0
with a 1 MiB active block at its start and the rest inactive.
"""

import pickle
import sys

MIB = 1 << 20
S1, S2, D1 = 0x7F0000000000, 0x7F0002000000, 0x7F1000000000


def frames(line):
    return [{"filename": "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/linear.py",
             "name": "forward", "line": 114},
            {"filename": "train.py", "name": "step", "line": line}]


def block(size, state, addr=None, line=None):
    entry = {"size": size, "state": state}
    if addr is not None:
        entry["history"] = [{"addr": addr, "real_size": size, "frames": frames(line)}]
    return entry


def segment(device, address, blocks):
    total = sum(b["size"] for b in blocks)
    allocated = sum(b["size"] for b in blocks if b["state"] == "active_allocated")
    return {"device": device, "address": address, "total_size": total,
            "allocated_size": allocated, "active_size": allocated, "stream": 0,
            "segment_type": "large", "blocks": blocks}


def event(action, addr, size):
    return {"action": action, "addr": addr, "size": size, "stream": 0}


legacy = {
    "segments": [
        segment(0, S1, [block(8 * MIB, "active_allocated", S1, 20),
                        block(4 * MIB, "inactive"),
                        block(8 * MIB, "active_allocated", S1 + 12 * MIB, 21)]),
        segment(0, S2, [block(6 * MIB, "inactive"),
                        block(10 * MIB, "active_allocated", S2 + 6 * MIB, 31),
                        block(4 * MIB, "inactive")]),
        segment(1, D1, [block(40 * MIB, "inactive")]),
    ],
    "device_traces": [
        [
            event("segment_alloc", S1, 20 * MIB),
            event("alloc", S1, 8 * MIB),
            event("alloc", S1 + 8 * MIB, 4 * MIB),
            event("alloc", S1 + 12 * MIB, 8 * MIB),
            event("free_requested", S1 + 8 * MIB, 4 * MIB),
            event("free_completed", S1 + 8 * MIB, 4 * MIB),
            event("segment_alloc", S2, 20 * MIB),
            event("alloc", S2 + 6 * MIB, 10 * MIB),
            {"action": "oom", "device_free": 2 * MIB, "size": 12 * MIB, "stream": 0},
        ],
        [event("segment_alloc", D1, 40 * MIB)],
    ],
}

segments = [{
    "device": 0, "address": S1, "total_size": 4 * MIB, "allocated_size": MIB,
    "active_size": MIB, "requested_size": MIB, "stream": 0, "segment_type": "large",
    "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
    "blocks": [
        {"address": S1, "size": MIB, "requested_size": MIB, "state": "active_allocated",
         "frames": frames(40)},
        {"address": S1 + MIB, "size": 3 * MIB, "requested_size": 3 * MIB, "state": "inactive",
         "frames": []},
    ],
}]

folder = sys.argv[1] if len(sys.argv) > 1 else "."
with open(f"{folder}/torch-2.0.pickle", "wb") as out:
    pickle.dump(legacy, out)
with open(f"{folder}/torch-segments.pickle", "wb") as out:
    pickle.dump(segments, out)
