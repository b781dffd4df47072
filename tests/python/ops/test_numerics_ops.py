"""L2Loss and CheckNumerics on the virtual GPU against TensorFlow's CPU kernels, and the
functions that pin them to a tensor on GPU:0 (tf.clip_by_global_norm, tf.linalg.global_norm,
tf.debugging.assert_all_finite inside a tf.function whose arguments live on GPU:0): these
failed with "Could not satisfy explicit device specification" while the ops had no kernel
here."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (assert_gradients_match_cpu, assert_matches_cpu, random_array,
                            run_on)

raw = tf.raw_ops
FLOATING = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype]


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape", [(), (1,), (7, 5), (3, 4, 33), (0, 3)])
def test_l2_loss_matches_cpu(dtype, shape):
    x = random_array(shape, dtype, seed=1)
    assert_matches_cpu(tf.nn.l2_loss, x)


def test_l2_loss_of_large_and_extreme_values_matches_cpu():
    assert_matches_cpu(tf.nn.l2_loss, random_array((1000, 37), np.float32, seed=2))
    assert_matches_cpu(tf.nn.l2_loss, np.array([1e20, -3.0, np.inf], np.float32))
    assert_matches_cpu(tf.nn.l2_loss, np.array([np.nan, 1.0], np.float32))


def test_l2_loss_gradient_matches_cpu():
    assert_gradients_match_cpu(tf.nn.l2_loss, random_array((6, 4), np.float32, seed=3))


def _on_gpu(value):
    with tf.device("/GPU:0"):
        return tf.identity(tf.constant(value))


def test_clip_by_global_norm_of_tensors_on_the_gpu_matches_cpu():
    a = random_array((4, 3), np.float32, seed=4)
    b = random_array((3,), np.float32, seed=5)

    @tf.function
    def clip(x, y):
        clipped, norm = tf.clip_by_global_norm([x, y], 1.0)
        return clipped[0], clipped[1], norm, tf.linalg.global_norm([x, y])

    expected = clip(tf.constant(a), tf.constant(b))  # arguments on the CPU: the CPU's kernels
    vgpu.reset_stats()
    actual = clip(_on_gpu(a), _on_gpu(b))
    assert vgpu.stats()["launches"] >= 1
    for e, g in zip(expected, actual):
        np.testing.assert_allclose(g.numpy(), e.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", FLOATING)
def test_check_numerics_passes_a_finite_tensor_through(dtype):
    x = random_array((5, 3), dtype, seed=6)
    out = assert_matches_cpu(lambda t: raw.CheckNumerics(tensor=t, message="m"), x)
    assert out.device.endswith("GPU:0")


@pytest.mark.parametrize("values,what", [
    ([1.0, np.nan, 2.0], "NaN"),
    ([np.inf, 1.0], "Inf"),
    ([-np.inf, 0.0], "Inf"),
    ([np.nan, -np.inf, 3.0], "Inf and NaN"),
])
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_check_numerics_refuses_nan_and_inf_with_the_cpus_message(values, what, dtype):
    x = np.array(values, dtype)
    messages = []
    for device in ("/CPU:0", "/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError) as raised:
            run_on(device, lambda t: raw.CheckNumerics(tensor=t, message="checked here"), x)
        messages.append(raised.value.message)
    # Without the wrapper's prefix, which names the device.
    cpu, gpu = (m.split("}} ")[-1].split(" [Op:")[0] for m in messages)
    assert gpu == cpu == f"checked here : Tensor had {what} values", messages


def test_check_numerics_of_an_empty_tensor_passes():
    assert_matches_cpu(lambda t: raw.CheckNumerics(tensor=t, message="m"),
                       np.zeros((0, 4), np.float32), expect_launch=False)


def test_assert_all_finite_on_a_gpu_argument_in_a_tf_function():
    @tf.function
    def check(x):
        return tf.debugging.assert_all_finite(x, "bad gradient") * 2.0

    good = _on_gpu(np.array([1.0, 2.0], np.float32))
    np.testing.assert_array_equal(check(good).numpy(), [2.0, 4.0])
    with pytest.raises(tf.errors.InvalidArgumentError, match="bad gradient : Tensor had NaN"):
        check(_on_gpu(np.array([1.0, np.nan], np.float32))).numpy()
