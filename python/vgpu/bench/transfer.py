"""Transfer bandwidth of one backend, run in a child process: copies a tensor onto GPU:0
(host to device) and back (device to host) and prints one JSON line with the times.

    VGPU_BACKEND=unix:///tmp/vgpu.sock python -m vgpu.bench.transfer --megabytes 64 --repeats 5

The backend (in-process, or a server's address) comes from VGPU_BACKEND.
"""
from __future__ import annotations

import json
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_float("megabytes", 64, "Size of the tensor copied, in MiB.")
flags.DEFINE_integer("repeats", 5, "Timed copies each way (after one untimed copy).")


def main(argv):
    del argv
    import numpy as np
    import tensorflow as tf

    count = max(1, int(FLAGS.megabytes * (1 << 20)) // 4)
    array = np.arange(count, dtype=np.float32)
    nbytes = count * 4
    to_device: list[float] = []
    from_device: list[float] = []
    for i in range(FLAGS.repeats + 1):  # the first copy of each way is a warm-up
        with tf.device("CPU:0"):
            host = tf.constant(array)  # a fresh handle: TensorFlow caches a handle's copies
        start = time.perf_counter()
        with tf.device("GPU:0"):
            device = tf.identity(host)
        tf.test.experimental.sync_devices()  # the copy is enqueued on a stream: wait for it
        middle = time.perf_counter()
        back = device.numpy()
        end = time.perf_counter()
        if i > 0:
            to_device.append(middle - start)
            from_device.append(end - middle)
        if back.shape[0] != count or back[-1] != count - 1:
            raise RuntimeError("the copy back differs from the tensor sent")
        del host, device, back
    import vgpu

    result = {"bytes": nbytes, "repeats": FLAGS.repeats,
              "htod_s": to_device, "dtoh_s": from_device,
              "backends": vgpu.info()["backends"]}
    print("VGPU_BENCH_RESULT " + json.dumps(result))


if __name__ == "__main__":
    app.run(main)
