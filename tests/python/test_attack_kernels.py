"""Finding 3 of issue 10: hostile launch parameters. A raw-socket tenant (no TensorFlow) launches
kernels whose extents multiply past 64 bits, whose counts run past the buffers it passes, whose
ranks are out of range or whose counts are huge, for every kernel family the attack used to crash
the server with (relu/activation, element-wise binary, training, softmax, pooling). Each launch
must fail as that tenant's InvalidArgument (or ResourceExhausted) at its stream's
synchronisation, naming the kernel; the server must stay alive, a bystander's data written
before the attacks must be intact, and a bystander's whole round trip must complete."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from raw_tenant import (ACTIVATION_DESCRIPTOR, ACTIVATION_FORWARD, LAUNCH, TENSOR_DESCRIPTOR,
                        RawTenant, ServerProcess, activation_settings, bystander_round_trip,
                        descriptor_section, tensor_settings)

INVALID_ARGUMENT, RESOURCE_EXHAUSTED = 3, 8
OP_TENSOR_DESCRIPTOR, POOLING_DESCRIPTOR = 6, 4
ELEMENTWISE_BINARY, POOLING_FORWARD, POOLING_BACKWARD = 200, 400, 401
SOFTMAX, APPLY_GRADIENT_DESCENT, REARRANGE = 520, 900, 330
FLOAT32, ADD = 1, 1
WRAPS = 1 << 32          # WRAPS * WRAPS == 2**64: wraps to 0 in 64 bits
HUGE = (1 << 62) + 7


def op_tensor_settings(op=ADD, dtype=FLOAT32):
    """OpTensorDescriptorSettings: op, dtype (8 bytes)."""
    return struct.pack("<iI", op, dtype)


def pooling_settings(window=(2, 2, 1), stride=(2, 2, 1), mode=0, spatial=2):
    """PoolingDescriptorSettings: mode, data format (NHWC), spatial dims, NaN propagation,
    window[3], stride[3], pad_before[3], pad_after[3] (64 bytes)."""
    return struct.pack("<iiii3i3i3i3i", mode, 0, spatial, 0, *window, *stride, 0, 0, 0, 0, 0, 0)


# Each hostile launch: (name, kernel id, descriptor entries, number of buffers, params).
def _relu(dims):
    return (ACTIVATION_FORWARD, [(ACTIVATION_DESCRIPTOR, activation_settings()),
                                 (TENSOR_DESCRIPTOR, tensor_settings(dims))], 2, b"")


def _relu_rank(rank):
    settings = struct.pack("<Ii8q", FLOAT32, rank, *([2] * 8))
    return (ACTIVATION_FORWARD, [(ACTIVATION_DESCRIPTOR, activation_settings()),
                                 (TENSOR_DESCRIPTOR, settings)], 2, b"")


def _binary(a, b, out):
    return (ELEMENTWISE_BINARY, [(OP_TENSOR_DESCRIPTOR, op_tensor_settings()),
                                 (TENSOR_DESCRIPTOR, tensor_settings(a)),
                                 (TENSOR_DESCRIPTOR, tensor_settings(b)),
                                 (TENSOR_DESCRIPTOR, tensor_settings(out))], 3, b"")


def _gradient_descent(count):
    return (APPLY_GRADIENT_DESCENT, [], 3, struct.pack("<IIQ", FLOAT32, 0, count))


def _softmax(dims):
    return (SOFTMAX, [(TENSOR_DESCRIPTOR, tensor_settings(dims))], 2, struct.pack("<I", 0))


def _pooling(kernel, x, y, buffers):
    return (kernel, [(POOLING_DESCRIPTOR, pooling_settings()), (TENSOR_DESCRIPTOR,
                                                                tensor_settings(x)),
                     (TENSOR_DESCRIPTOR, tensor_settings(y))], buffers, b"")


def _rearrange_summing(terms):
    """RearrangeParams: summed_rank, ties[8], x_strides[8], summed_sizes[8], summed_strides[8];
    x [2], y [1], one summed dimension of `terms` terms with stride 0 (x[0] summed `terms` times:
    before the fix a launch of 8 bytes held the compute pool for hours)."""
    params = struct.pack("<i8i4x8q8q8q", 1, *([-1] * 8), *([0] * 8), terms, *([0] * 7), *([0] * 8))
    return (REARRANGE, [(TENSOR_DESCRIPTOR, tensor_settings([2])),
                        (TENSOR_DESCRIPTOR, tensor_settings([1]))], 2, params)


HOSTILE_LAUNCHES = {
    "rearrange_sums_more_terms_than_x_holds": _rearrange_summing(1 << 40),
    "relu_dims_wrap_64_bits": _relu([WRAPS, WRAPS]),
    "relu_bytes_wrap_64_bits": _relu([1 << 31, 1 << 31]),
    "relu_huge_count": _relu([HUGE]),
    "relu_count_past_buffers": _relu([1 << 20]),
    "relu_negative_dims": _relu([-4, -4]),
    "relu_zero_hides_huge_dim": _relu([0, HUGE]),
    "activation_rank_past_max": _relu_rank(100),
    "activation_negative_rank": _relu_rank(-1),
    "binary_broadcast_wraps": _binary([WRAPS, 1], [1, WRAPS], [WRAPS, WRAPS]),
    "binary_huge_count": _binary([HUGE], [HUGE], [HUGE]),
    "binary_count_past_buffers": _binary([1 << 20], [1 << 20], [1 << 20]),
    "training_huge_count": _gradient_descent(HUGE),
    "training_count_wraps_bytes": _gradient_descent(1 << 62),
    "training_count_past_buffers": _gradient_descent(1 << 20),
    "softmax_dims_wrap": _softmax([WRAPS, WRAPS]),
    "softmax_huge_classes": _softmax([1, HUGE]),
    "softmax_count_past_buffers": _softmax([1024, 1024]),
    "pooling_dims_wrap": _pooling(POOLING_FORWARD, [WRAPS, 2, 2, WRAPS], [WRAPS, 1, 1, WRAPS], 2),
    "pooling_huge_image": _pooling(POOLING_FORWARD, [1, HUGE, 2, 1], [1, HUGE // 2, 1, 1], 2),
    "pooling_count_past_buffers": _pooling(POOLING_FORWARD, [64, 32, 32, 8], [64, 16, 16, 8], 2),
    "pooling_backward_dims_wrap": _pooling(POOLING_BACKWARD, [WRAPS, 2, 2, WRAPS],
                                           [WRAPS, 1, 1, WRAPS], 3),
}

BUFFER_BYTES = 256


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with ServerProcess(tmp_path_factory.mktemp("attack-kernels")) as process:
        yield process


@pytest.fixture(scope="module")
def bystander(server):
    """An honest tenant whose data sits on the device while the attacks run."""
    values = np.arange(-512, 512, dtype=np.float32)
    with RawTenant(server.address) as tenant:
        stream = tenant.create_stream()
        address = tenant.allocate(values.nbytes)
        tenant.write(stream, address, values.tobytes())
        assert tenant.synchronize(stream).ok
        yield tenant, stream, address, values


def _attack(address, kernel, entries, buffer_count, params):
    """Launches the hostile kernel on a fresh tenant's stream; returns the synchronisation's
    reply (the launch's error surfaces there)."""
    with RawTenant(address) as attacker:
        stream = attacker.create_stream()
        buffers = [(attacker.allocate(BUFFER_BYTES), BUFFER_BYTES) for _ in range(buffer_count)]
        attacker.post(LAUNCH, stream=stream, obj=kernel, buffers=buffers, params=params,
                      descriptors=descriptor_section(*entries) if entries else b"")
        reply = attacker.synchronize(stream)
        # The stream reports the launch's error; the tenant's connection is still served.
        assert attacker.allocate(BUFFER_BYTES)
        return reply


@pytest.mark.parametrize("name", sorted(HOSTILE_LAUNCHES))
def test_hostile_launch_is_the_attackers_error_and_harms_no_one(server, bystander, name):
    kernel, entries, buffer_count, params = HOSTILE_LAUNCHES[name]
    reply = _attack(server.address, kernel, entries, buffer_count, params)
    assert reply.code in (INVALID_ARGUMENT, RESOURCE_EXHAUSTED), reply
    # Refused for its sizes, not because this test wrote a malformed parameter block.
    assert "truncated" not in reply.message and "malformed" not in reply.message, reply
    assert server.alive(), server.output()
    # The bystander's data written before the attack is intact, and a new round trip completes.
    tenant, stream, address, values = bystander
    data = tenant.read(stream, address, values.nbytes)
    np.testing.assert_array_equal(np.frombuffer(data, np.float32), values)
    bystander_round_trip(server.address)


def test_server_logs_the_refused_launches_without_crashing(server, bystander):
    kernel, entries, buffer_count, params = HOSTILE_LAUNCHES["relu_dims_wrap_64_bits"]
    reply = _attack(server.address, kernel, entries, buffer_count, params)
    assert reply.code == INVALID_ARGUMENT
    assert "activation_forward" in reply.message, reply
    assert server.alive()
    assert "Segmentation" not in server.output() and "terminate called" not in server.output()
