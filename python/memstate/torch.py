"""Record the PyTorch caching allocator's state from a training loop, for memstate.

    from memstate.torch import Recorder
    rec = Recorder("runs/exp1", every=50)   # run name: the folder's name unless run= is given
    for batch in loader:
        ...                                  # the training step
        rec.step()                           # the k-th call writes a snapshot when k is a multiple of every
    rec.close()

Each due step writes FOLDER/rank-R/step-K.pickle: the dict `torch.cuda.memory._snapshot()` gives
(segments and blocks, and traces when history recording is on), pickled as
`torch.cuda.memory._dump_snapshot` pickles it, with one key more, "memstate", holding the run, the
rank (from torch.distributed when it is initialized, else 0), the step and the time. memstate's
reader of allocator snapshots turns that into memories and allocations (src/import/source/torch/
recorder.rs says how); nothing is translated here. A file appears whole: it is written under a
hidden name (which memstate skips) and renamed.

With oom=True (the default) an out-of-memory observer is attached: when the allocator cannot
place a request, the state then is written with the failed request (device, size, the driver's
free bytes) as step-K-oom.pickle, so that `memstate oom` tells its story.

torch is imported when a Recorder is made, not before; a step that is not due does nothing else
than count.
"""

import os
import pickle
import time

FORMAT = "memstate-torch-recorder"
VERSION = 1


def _rank(torch):
    distributed = getattr(torch, "distributed", None)
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return int(distributed.get_rank())
    return 0


class Recorder:
    """Writes the allocator's state every `every` calls of `step()` into `folder`."""

    def __init__(self, folder, every=50, run=None, oom=True):
        import torch

        every = int(every)
        if every < 1:
            raise ValueError(f"every={every}: a snapshot every 1 or more steps")
        self.folder = os.fspath(folder)
        self.every = every
        self.run = run if run else os.path.basename(os.path.normpath(os.path.abspath(self.folder)))
        self.rank = _rank(torch)
        self.steps = 0
        self._torch = torch
        self._started = time.monotonic_ns()
        self._closed = False
        self._oom_steps = set()
        self._dir = os.path.join(self.folder, f"rank-{self.rank}")
        os.makedirs(self._dir, exist_ok=True)
        if oom and torch.cuda.is_available():
            torch._C._cuda_attach_out_of_memory_observer(self._on_oom)

    def step(self):
        """Count a step; the k-th call writes a snapshot when k is a multiple of `every`."""
        self.steps += 1
        # A step whose request failed already has its snapshot (seq = step, once).
        if self._closed or self.steps % self.every or self.steps in self._oom_steps:
            return
        self._write(self.steps, None)

    def close(self):
        """Write nothing more (the observer stays attached but does nothing)."""
        self._closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def _on_oom(self, device, alloc, device_alloc, device_free):
        # Called by torch when a request cannot be placed, during the step after the last
        # counted one: its state, once per step.
        step = self.steps + 1
        if self._closed or step in self._oom_steps:
            return
        self._oom_steps.add(step)
        oom = {
            "device": int(device),
            "alloc": int(alloc),
            "device_alloc": int(device_alloc),
            "device_free": int(device_free),
        }
        self._write(step, oom)

    def _write(self, step, oom):
        torch = self._torch
        if not torch.cuda.is_available():
            return
        snapshot = dict(torch.cuda.memory._snapshot())
        snapshot["memstate"] = {
            "format": FORMAT,
            "version": VERSION,
            "run": self.run,
            "rank": self.rank,
            "step": step,
            "time_ns": time.monotonic_ns() - self._started,
            "wall_time_ns": time.time_ns(),
            "oom": oom,
        }
        name = f"step-{step:09d}{'-oom' if oom else ''}.pickle"
        path = os.path.join(self._dir, name)
        hidden = os.path.join(self._dir, f".{name}.{os.getpid()}.tmp")
        with open(hidden, "wb") as out:
            pickle.dump(snapshot, out)
            out.flush()
            os.fsync(out.fileno())
        os.replace(hidden, path)
