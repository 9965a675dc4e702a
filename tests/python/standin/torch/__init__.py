"""A stand-in for the parts of torch memstate.torch.Recorder calls, for memstate's tests only (on
sys.path in those tests alone). Its structures copy the shape of real snapshots: the dict
`torch.cuda.memory._snapshot()` returns in PyTorch 2.x (torch/csrc/cuda/Module.cpp), as the
committed fixture tests/data/sources/make_torch_snapshot.py writes it.

One device, one 8 MiB segment at 0x7f0000000000: 2 MiB of weights, then the activation of the
current step (`advance(k)`: (k % 3 + 1) MiB), the rest one inactive block. `fail(size)` plays an
allocation of `size` bytes the allocator cannot place: the out-of-memory observers are called as
torch calls them, observer(device, alloc, device_alloc, device_free).
"""

from . import _C, cuda, distributed  # noqa: F401

MIB = 1 << 20
SEGMENT = 0x7F0000000000
CAPACITY = 8 * MIB
# The device's size as torch.cuda.mem_get_info tells it: the allocator's 8 MiB segment and 2 MiB
# held outside it (the CUDA context, another process), none of it free.
DEVICE_TOTAL = 10 * MIB
WEIGHTS = 2 * MIB

_step = 0


def _activation():
    return (_step % 3 + 1) * MIB


def advance(step):
    global _step
    _step = step


def fail(size):
    used = WEIGHTS + _activation()
    for observer in list(_C._observers):
        observer(0, size, CAPACITY, 0)
    return used


def _block(address, size, state):
    return {"address": address, "size": size, "requested_size": size, "state": state, "frames": []}


def _segments():
    used = WEIGHTS + _activation()
    return [{
        "device": 0, "address": SEGMENT, "total_size": CAPACITY, "allocated_size": used,
        "active_size": used, "requested_size": used, "stream": 0, "segment_type": "large",
        "segment_pool_id": (0, 0), "is_expandable": False, "frames": [],
        "blocks": [
            _block(SEGMENT, WEIGHTS, "active_allocated"),
            _block(SEGMENT + WEIGHTS, _activation(), "active_allocated"),
            _block(SEGMENT + used, CAPACITY - used, "inactive"),
        ],
    }]
