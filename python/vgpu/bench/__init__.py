"""Benchmarks of tensorflow-vgpu, measured side by side in one run.

Each configuration (TensorFlow's own CPU kernels, the virtual GPU in reuse or forward mode, ...)
trains the same Keras model in its own child process (the plugin reads its configuration when
TensorFlow loads it); the parent collects step times and per-step counters and reports ratios,
never absolute claims. Run ``python -m vgpu.bench --help``.
"""
