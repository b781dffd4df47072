"""``python -m vgpu`` runs the ``vgpu`` command line."""
from vgpu.cli import run

run()
