"""The GNU OpenMP settings the backing executor runs oneDNN under, applied before libgomp loads
(by ``tensorflow_vgpu.pth`` at interpreter start, and by ``vgpu server`` before it starts the
server binary). libgomp reads them once, when it loads; a value the user set wins.

* ``OMP_WAIT_POLICY=PASSIVE``: between kernels oneDNN's OpenMP threads sleep rather than spin
  for libgomp's default 300 000 rounds against the executor's Eigen pool and the thread issuing
  the next ops (two cores are shared by all of them).
* ``GOMP_SPINCOUNT=20000``: but they spin for a short while first (about 0.2 ms by libgomp's own
  estimate of 100 000 rounds a millisecond), so that the convolutions and matrix products of a
  training step, which follow each other closely on the stream's worker, find their team
  awake. Measured in docs/benchmarks.md (medians of interleaved A/Bs): cnn 9.9-10.0 against
  9.5-9.8 ms a step in process, 11.8 against 11.2 ms through a server; mlp, resnet and
  mobilenetv2 unchanged.
"""
import os
from typing import MutableMapping

DEFAULTS = {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "20000"}


def apply_defaults(environ: MutableMapping[str, str] = os.environ) -> None:
    """Sets each of DEFAULTS in `environ` that is not set there already."""
    for name, value in DEFAULTS.items():
        environ.setdefault(name, value)
