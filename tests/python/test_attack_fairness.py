"""Attack test for issue 10, finding 8 (starvation): through a raw socket, one tenant launches a
legal kernel whose every compute-pool task runs for seconds (a max pooling whose window covers
the whole image, so each output row costs a whole image's work); an honest bystander's round trip
(big enough to use the compute pool) must still complete in a small fraction of the attacker's
time, with the right data, and the attacker's kernel must complete too."""
from __future__ import annotations

import struct
import time

import numpy as np

from raw_tenant import (FLOAT32, LAUNCH, TENSOR_DESCRIPTOR, RawTenant, ServerProcess,
                        bystander_round_trip, descriptor_section, tensor_settings)

POOLING_DESCRIPTOR = 4     # DescriptorKind::kPooling (protocol/descriptors.h)
POOLING_FORWARD = 400      # pooling::kForward (protocol/kernels/pooling.h)
MAX_MODE, NHWC = 0, 0

# The attacker's image side: its whole-image window makes the kernel take ~10 s on the two
# compute threads of ServerProcess, in blocks of over a second each.
SIDE = 320
# The bystander's element count: 4 MiB transfers and a relu that Eigen splits into pool tasks.
BYSTANDER_COUNT = 1 << 20


def whole_image_max_pooling(side):
    """PoolingDescriptorSettings: max, NHWC, 2-D, window = the image, stride 1, padded so that
    the output has the input's size (each padding smaller than the window)."""
    before, after = side // 2, side - 1 - side // 2
    return struct.pack("<4i3i3i3i3i", MAX_MODE, NHWC, 2, 0, side, side, 1, 1, 1, 1,
                       before, before, 0, after, after, 0)


def test_bystander_is_not_starved_by_a_kernel_of_long_pool_tasks(tmp_path):
    rng = np.random.default_rng(8)
    image = rng.standard_normal((SIDE, SIDE), dtype=np.float32)
    nbytes = image.nbytes
    with ServerProcess(tmp_path) as server, RawTenant(server.address, timeout=120) as attacker:
        stream = attacker.create_stream()
        x, y = attacker.allocate(nbytes), attacker.allocate(nbytes)
        attacker.write(stream, x, image.tobytes())
        assert attacker.synchronize(stream).ok
        shape = tensor_settings([1, SIDE, SIDE, 1], FLOAT32)
        started = time.monotonic()
        attacker.post(LAUNCH, stream=stream, obj=POOLING_FORWARD,
                      buffers=[(x, nbytes), (y, nbytes)],
                      descriptors=descriptor_section(
                          (POOLING_DESCRIPTOR, whole_image_max_pooling(SIDE)),
                          (TENSOR_DESCRIPTOR, shape), (TENSOR_DESCRIPTOR, shape)))
        done = attacker.notify(stream)
        time.sleep(0.5)  # let the attacker's blocks take every compute thread

        bystander_started = time.monotonic()
        bystander_round_trip(server.address, count=BYSTANDER_COUNT, timeout=120)
        bystander_seconds = time.monotonic() - bystander_started

        code, message = attacker.wait_notified(done, timeout=120)
        attacker_seconds = time.monotonic() - started
        assert code == 0, message
        result = attacker.read(stream, y, nbytes)
        assert attacker.synchronize(stream).ok
        assert server.alive(), server.output()

    pooled = np.frombuffer(result, np.float32).reshape(SIDE, SIDE)
    before = SIDE // 2  # output (0, 0) covers rows and columns [0, SIDE - before)
    assert pooled[0, 0] == image[:SIDE - before, :SIDE - before].max()
    assert pooled[SIDE // 2, SIDE // 2] == image.max()
    # Before fair scheduling the bystander waited for nearly the whole kernel (~90%).
    assert bystander_seconds < 0.25 * attacker_seconds, (bystander_seconds, attacker_seconds)
