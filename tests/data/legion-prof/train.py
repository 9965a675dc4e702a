"""A training-loop pattern under memory pressure, for memstate's Legion Prof fixtures.

Each of 40 steps makes an activation and its output (0.5 to 3.5 MiB each), runs a task over them
and drops them; every fifth step's output is kept as a checkpoint. With 32 MiB of system memory
the runtime collects the instances of dropped stores to place new ones (the memory is full at its
peak); with 16 MiB the mapper runs out of memory first.
"""
import gc

import numpy as np
from legate.core import get_legate_runtime, types as ty
from legate.core.task import task, InputStore, OutputStore


@task
def forward(x: InputStore, y: OutputStore) -> None:
    np.asarray(y.get_inline_allocation())[:] = np.asarray(x.get_inline_allocation()) * 2.0


runtime = get_legate_runtime()
kept = []
for step in range(40):
    elements = 64 * 1024 * (1 + (step * 5) % 7)
    activation = runtime.create_store(ty.float64, shape=(elements,))
    runtime.issue_fill(activation, float(step))
    output = runtime.create_store(ty.float64, shape=(elements,))
    forward(activation, output)
    if step % 5 == 0:
        kept.append(output)
    del activation, output
    gc.collect()
    runtime.issue_execution_fence(block=True)
print("steps done; checkpoints kept:", len(kept))
