"""A training loop of 10 steps recorded every 2 steps, then an allocation of 7 MiB that fails
(the stand-in torch plays it): run by tests/it/recorder.rs with the stand-in and memstate's
Python package on sys.path, and the folder to write into as its argument."""

import sys

import torch
from memstate.torch import Recorder

rec = Recorder(sys.argv[1], every=2)
for step in range(1, 11):
    torch.advance(step)
    rec.step()
torch.advance(11)
torch.fail(7 * torch.MIB)
rec.close()
