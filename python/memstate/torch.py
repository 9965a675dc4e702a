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
rank, the step, the time and each device's free and total bytes (`torch.cuda.mem_get_info`:
the device's capacity in memstate). memstate's
reader of allocator snapshots turns that into memories and allocations (src/import/source/torch/
recorder.rs says how); nothing is translated here. A file appears whole: it is written under a
hidden name (which memstate skips) and renamed.

With oom=True (the default) an out-of-memory observer is attached: when the allocator cannot
place a request, the state then is written with the failed request (device, size, the driver's
free bytes) as step-K-oom.pickle, so that `memstate oom` tells its story.

The rank is `rank=` when given, else torch.distributed's when it is initialized, else the one
the launcher set in the environment (RANK from torchrun, SLURM_PROCID, OMPI_COMM_WORLD_RANK,
PMI_RANK, PMIX_RANK), else 0. A Recorder holds a lock on its rank's folder while it lives: a
second process that would record the same run and rank into the same folder (two processes of
one job made before torch.distributed is initialized, say) is told at once, with a warning, and
records as run "RUN-pPID" into rank-R-pPID, so both are kept and both import.

A Recorder that cannot write (a full disk, a folder taken away) never stops the job: it says so
once on standard error, leaves no partial file, and goes on (later due steps try again).

torch is imported when a Recorder is made, not before; a step that is not due does nothing else
than count.
"""

import os
import pickle
import sys
import time
import warnings

FORMAT = "memstate-torch-recorder"
VERSION = 1


# What launchers set for each process before torch.distributed is initialized.
_RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")

# The rank folders this process records into (a lock is per process, so two Recorders of one
# process are told apart here).
_CLAIMED = set()


def _rank(torch):
    distributed = getattr(torch, "distributed", None)
    if distributed is not None and distributed.is_available() and distributed.is_initialized():
        return int(distributed.get_rank())
    for name in _RANK_VARIABLES:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return 0


def _claim(folder):
    """Lock `folder` for this Recorder: the open lock file, or None when another holds it."""
    key = os.path.realpath(folder)
    if key in _CLAIMED:
        return None
    path = os.path.join(folder, ".memstate-recorder.lock")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        import fcntl
    except ImportError:  # no POSIX locks here: only this process's Recorders are told apart
        _CLAIMED.add(key)
        return (key, fd)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    _CLAIMED.add(key)
    return (key, fd)


class Recorder:
    """Writes the allocator's state every `every` calls of `step()` into `folder`."""

    def __init__(self, folder, every=50, run=None, oom=True, rank=None):
        import torch

        every = int(every)
        if every < 1:
            raise ValueError(f"every={every}: a snapshot every 1 or more steps")
        self.folder = os.fspath(folder)
        self.every = every
        self.run = run if run else os.path.basename(os.path.normpath(os.path.abspath(self.folder)))
        self.rank = int(rank) if rank is not None else _rank(torch)
        if self.rank < 0:
            raise ValueError(f"rank={self.rank}: a rank is 0 or more")
        self.steps = 0
        self._torch = torch
        self._started = time.monotonic_ns()
        self._closed = False
        self._oom_steps = set()
        self._failed = False
        self._lock = None
        self._dir = os.path.join(self.folder, f"rank-{self.rank}")
        try:
            os.makedirs(self._dir, exist_ok=True)
            self._lock = _claim(self._dir)
            if self._lock is None:
                mine = f"rank-{self.rank}-p{os.getpid()}"
                warnings.warn(
                    f"memstate Recorder: another Recorder is recording run {self.run!r} rank "
                    f"{self.rank} into {self._dir} (is torch.distributed not initialized yet? give "
                    f"rank=); this one records as run {self.run + '-p' + str(os.getpid())!r} into "
                    f"{os.path.join(self.folder, mine)}, so both are kept",
                    RuntimeWarning,
                    stacklevel=2,
                )
                self.run = f"{self.run}-p{os.getpid()}"
                self._dir = os.path.join(self.folder, mine)
                os.makedirs(self._dir, exist_ok=True)
                self._lock = _claim(self._dir)
        except OSError as error:
            self._cannot_write(error)
        if oom and torch.cuda.is_available():
            torch._C._cuda_attach_out_of_memory_observer(self._on_oom)

    def step(self):
        """Count a step; the k-th call writes a snapshot when k is a multiple of `every`."""
        self.steps += 1
        # A step whose request failed already has its snapshot (seq = step, once).
        if self._closed or self.steps % self.every or self.steps in self._oom_steps:
            return
        self._try_write(self.steps, None)

    def close(self):
        """Write nothing more (the observer stays attached but does nothing)."""
        self._closed = True
        if self._lock is not None:
            key, fd = self._lock
            self._lock = None
            _CLAIMED.discard(key)
            try:
                os.close(fd)
            except OSError:
                pass

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
        self._try_write(step, oom)

    def _try_write(self, step, oom):
        # Whatever goes wrong in writing (a full disk, a folder removed, the allocator's state
        # not to be had) is said once and never raised into the training loop.
        try:
            self._write(step, oom)
        except Exception as error:  # noqa: BLE001 - the job must go on
            self._cannot_write(error)

    def _cannot_write(self, error):
        if self._failed:
            return
        self._failed = True
        print(
            f"memstate Recorder: cannot write into {self._dir} ({error}); the job goes on "
            "without these snapshots (said once; later due steps try again)",
            file=sys.stderr,
            flush=True,
        )

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
            "devices": _devices(torch, snapshot),
        }
        name = f"step-{step:09d}{'-oom' if oom else ''}.pickle"
        path = os.path.join(self._dir, name)
        hidden = os.path.join(self._dir, f".{name}.{os.getpid()}.tmp")
        try:
            with open(hidden, "wb") as out:
                pickle.dump(snapshot, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(hidden, path)
        except BaseException:
            # No partial file is left: the hidden one goes.
            try:
                os.unlink(hidden)
            except OSError:
                pass
            raise


def _devices(torch, snapshot):
    """What each device with a segment had free and in all (`torch.cuda.mem_get_info`), as
    [{"device": D, "free": F, "total": T}]: memstate's capacity of the device. A device whose
    figures cannot be had is left out (its capacity stays unknown)."""
    found = []
    for device in sorted({segment.get("device", 0) for segment in snapshot.get("segments", [])}):
        try:
            free, total = torch.cuda.mem_get_info(device)
        except Exception:  # noqa: BLE001 - an unknown figure, not a failed snapshot
            continue
        found.append({"device": int(device), "free": int(free), "total": int(total)})
    return found
