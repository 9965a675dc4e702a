"""torch.cuda.memory: the allocator's state as `_snapshot()` gives it."""


def _snapshot(device=None):
    import torch

    return {
        "segments": torch._segments(),
        "device_traces": [[]],
        "allocator_settings": {"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1},
    }
