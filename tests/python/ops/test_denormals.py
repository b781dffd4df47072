"""Denormal floats: TensorFlow-CPU runs its kernels with flush-to-zero and denormals-are-zero, so
a denormal input reads as 0 and a denormal result is written as 0. The virtual GPU's kernels must
give the same bits, whether a launch runs inline on TensorFlow's thread (a small one), on the
stream's worker, split over the compute pool (a large one) or in oneDNN (a matrix product)."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from .op_testing import run_on

DENORMAL = np.float32(1e-40)  # below float32's smallest normal, 1.18e-38


def assert_same_bits(fn, *args):
    expected = run_on("/CPU:0", fn, *args)
    vgpu.reset_stats()
    actual = run_on("/GPU:0", fn, *args)
    assert vgpu.stats()["launches"] >= 1
    assert actual.device.endswith("GPU:0")
    e, a = expected.numpy(), actual.numpy()
    assert e.dtype == a.dtype and e.shape == a.shape
    assert np.array_equal(e.view(np.uint32), a.view(np.uint32)), (
        f"{np.count_nonzero(e.view(np.uint32) != a.view(np.uint32))} of {e.size} values differ; "
        f"first: TF-CPU {e.ravel()[0]!r}, virtual GPU {a.ravel()[0]!r}")


# 4 elements run inline on TensorFlow's thread; 2^20 on the stream's worker, split over the pool.
@pytest.mark.parametrize("size", [4, 1 << 20])
@pytest.mark.parametrize("op", ["scale", "add", "square", "sqrt"])
def test_denormals_in_element_wise_kernels_read_and_write_as_zero_as_on_cpu(size, op):
    x = np.full([size], DENORMAL, np.float32)
    x[1::2] = np.float32(3e-39)
    fn = {"scale": lambda t: t * 3.0, "add": lambda t: t + t,
          "square": lambda t: tf.math.square(t * 1e20),  # a normal input, a denormal result
          "sqrt": tf.math.sqrt}[op]
    assert_same_bits(fn, x)
    if op != "square":  # denormal inputs: every value reads, and is written, as 0
        assert not run_on("/GPU:0", fn, x).numpy().any()


def test_a_matrix_product_of_denormals_is_zero_as_on_cpu():
    a = np.full([64, 256], DENORMAL, np.float32)
    b = np.full([256, 64], np.float32(2.0), np.float32)
    assert_same_bits(tf.linalg.matmul, a, b)


def test_a_sum_of_denormals_is_zero_as_on_cpu():
    x = np.full([256, 1024], DENORMAL, np.float32)
    assert_same_bits(lambda t: tf.reduce_sum(t, axis=0), x)
