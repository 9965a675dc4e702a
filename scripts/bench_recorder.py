"""What a due step of memstate.torch.Recorder costs (issue 45, target under 50 ms for 1,000
segments), against a stand-in torch whose _snapshot() gives SEGMENTS segments of BLOCKS blocks
each with a frame apiece (the shape of tests/python/standin): the median of 20 due steps, and
what a step that is not due costs.

    python3 scripts/bench_recorder.py [SEGMENTS] [BLOCKS]
"""

import os
import statistics
import sys
import tempfile
import textwrap
import time

segments = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
blocks = int(sys.argv[2]) if len(sys.argv) > 2 else 8
work = tempfile.mkdtemp()
standin = os.path.join(work, "torch")
os.makedirs(os.path.join(standin, "cuda"))
files = {
    "__init__.py": f"""
        from . import _C, cuda, distributed
        SEGMENTS, BLOCKS, MIB = {segments}, {blocks}, 1 << 20
        def _segments():
            out = []
            for s in range(SEGMENTS):
                base = 0x7F0000000000 + s * 2 * MIB * BLOCKS
                out.append({{"device": 0, "address": base, "total_size": 2 * MIB * BLOCKS,
                    "allocated_size": MIB * BLOCKS, "active_size": MIB * BLOCKS,
                    "requested_size": MIB * BLOCKS, "stream": 0, "segment_type": "large",
                    "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
                    "blocks": [{{"address": base + b * 2 * MIB, "size": 2 * MIB,
                                "requested_size": 2 * MIB,
                                "state": "active_allocated" if b % 2 else "inactive",
                                "frames": [{{"filename": "train.py", "line": 10 + b, "name": "step"}}]}}
                               for b in range(BLOCKS)]}})
            return out
        """,
    "_C.py": "def _cuda_attach_out_of_memory_observer(observer):\n    pass\n",
    "distributed.py": "def is_available():\n    return False\n",
    "cuda/__init__.py": "from . import memory\ndef is_available():\n    return True\n",
    "cuda/memory.py": "def _snapshot(device=None):\n    import torch\n    return {'segments': torch._segments(), 'device_traces': [[]]}\n",
}
for name, text in files.items():
    with open(os.path.join(standin, name), "w") as out:
        out.write(textwrap.dedent(text))
sys.path.insert(0, work)
sys.path.insert(1, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

from memstate.torch import Recorder  # noqa: E402

rec = Recorder(os.path.join(work, "runs", "bench"), every=2)
due, idle = [], []
for _ in range(20):
    started = time.perf_counter()
    rec.step()
    idle.append(time.perf_counter() - started)
    started = time.perf_counter()
    rec.step()
    due.append(time.perf_counter() - started)
size = os.path.getsize(os.path.join(work, "runs", "bench", "rank-0", "step-000000002.pickle"))
median_ms = statistics.median(due) * 1000
print(f"{segments} segments x {blocks} blocks, {size / 1e6:.1f} MB a snapshot")
print(f"  due step (median of 20)     {median_ms:8.1f} ms   target < 50 ms   {'ok' if median_ms < 50 else 'MISSED'}")
print(f"  step not due (median of 20) {statistics.median(idle) * 1e6:8.1f} us")
