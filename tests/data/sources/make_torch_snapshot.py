"""Writes torch-snapshot.pickle, a memstate test fixture: a PyTorch CUDA caching-allocator snapshot
as `torch.cuda.memory._dump_snapshot` pickles it (the dict of `torch.cuda.memory._snapshot()`, keys
as in pytorch torch/csrc/cuda/Module.cpp and torch/cuda/_memory_viz.py, PyTorch 2.x), written by
hand with the standard pickle module (protocol 4, as torch writes it).

Device 0 has two 2 MiB segments, A at 0x7f0000000000 and B at 0x7f0000200000. At the end A holds a
1 MiB active block (allocated at train.py:10), a 512 KiB inactive block and a 512 KiB block pending
free; B is one inactive block. The trace allocates and frees in A, maps B, then fails a request
of 3 MiB (oom), then frees A's last block; a trailing `snapshot` entry closes it.
"""

import pickle
import sys

MIB = 1 << 20
A, B = 0x7F0000000000, 0x7F0000200000


def block(address, size, state, frames=()):
    return {"address": address, "size": size, "requested_size": size, "state": state,
            "frames": list(frames)}


snapshot = {
    "segments": [
        {"device": 0, "address": A, "total_size": 2 * MIB, "allocated_size": 3 * MIB // 2,
         "active_size": MIB, "requested_size": MIB, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
         "blocks": [
             block(A, MIB, "active_allocated",
                   [{"filename": "/usr/lib/python3/site-packages/torch/nn/modules/linear.py",
                     "line": 125, "name": "forward"},
                    {"filename": "train.py", "line": 10, "name": "step"}]),
             block(A + MIB, MIB // 2, "inactive"),
             block(A + 3 * MIB // 2, MIB // 2, "active_pending_free"),
         ]},
        {"device": 0, "address": B, "total_size": 2 * MIB, "allocated_size": 0,
         "active_size": 0, "requested_size": 0, "stream": 0, "segment_type": "large",
         "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
         "blocks": [block(B, 2 * MIB, "inactive")]},
    ],
    "device_traces": [[
        {"action": "segment_alloc", "addr": A, "size": 2 * MIB, "stream": 0, "time_us": 1000, "frames": []},
        {"action": "alloc", "addr": A, "size": MIB, "stream": 0, "time_us": 1010, "frames": []},
        {"action": "alloc", "addr": A + MIB, "size": 500000, "stream": 0, "time_us": 1020, "frames": []},
        {"action": "free_requested", "addr": A + MIB, "size": 500000, "stream": 0, "time_us": 1030, "frames": []},
        {"action": "free_completed", "addr": A + MIB, "size": 500000, "stream": 0, "time_us": 1040, "frames": []},
        {"action": "alloc", "addr": A + 3 * MIB // 2, "size": 500000, "stream": 0, "time_us": 1050, "frames": []},
        {"action": "segment_alloc", "addr": B, "size": 2 * MIB, "stream": 0, "time_us": 1060, "frames": []},
        {"action": "oom", "addr": 0, "size": 3 * MIB, "stream": 0, "time_us": 1070, "device_free": 0, "frames": []},
        {"action": "free_requested", "addr": A + 3 * MIB // 2, "size": 500000, "stream": 0, "time_us": 1080, "frames": []},
        {"action": "snapshot", "addr": 0, "size": 0, "stream": 0, "time_us": 1090, "frames": []},
    ]],
    "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1},
}

with open(sys.argv[1] if len(sys.argv) > 1 else "torch-snapshot.pickle", "wb") as out:
    pickle.dump(snapshot, out, protocol=4)
