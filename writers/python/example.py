"""A run of three dumps of one node with two memories, written with memstate.writer into the
directory given (which must exist and be empty): what a runtime would write periodically and at
its allocator's failure path.

    python3 writers/python/example.py DIR && memstate import DIR
"""

import os
import sys

# The writer lives in memstate's Python package (python/memstate/writer.py), which `pip install`
# of memstate's wheel installs; from a checkout, it is found here.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from memstate.writer import DumpWriter  # noqa: E402

MIB = 1 << 20
GPU, SYSTEM = 0x1E00000000000003, 0x1E00000000000000


def main(argv):
    if len(argv) != 2:
        print("usage: %s DIR (an existing, empty directory)" % argv[0], file=sys.stderr)
        return 2
    for seq in range(3):
        oom = seq == 2
        with DumpWriter(argv[1], run="python-example", node=0, seq=seq,
                        time_ns=seq * 1_000_000_000, reason="oom" if oom else "periodic") as dump:
            # The GPU framebuffer: seq + 1 instances of 1 MiB, 2 MiB apart, in a 16 MiB memory.
            dump.memory(GPU, "GPU_FB_MEM", 16 * MIB)
            for i in range(seq + 1):
                dump.allocation(100 + i, "instance", "valid", offset=i * 2 * MIB, size=MIB,
                                provenance="example.py:28")
            if oom:
                dump.failed_request(15 * MIB)
            # System memory: one 4 KiB future.
            dump.memory(SYSTEM, "SYSTEM_MEM", 64 * MIB)
            dump.allocation(1, "future", "valid", offset=0, size=4096)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
