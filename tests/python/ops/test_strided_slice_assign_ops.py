"""Slice assignment on the virtual GPU: ResourceStridedSliceAssign (`variable[...].assign(x)`)
and TensorStridedSliceUpdate (`tf.tensor_strided_slice_update`), against TensorFlow's CPU
kernels: every dtype a variable may have, masks, negative strides, new and shrunk axes, a value
that broadcasts, an empty slice, and TensorFlow's errors."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import random_array

DTYPES = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype, np.int32, np.int64,
          np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64, np.complex64,
          np.complex128, np.bool_]


def values(shape, dtype, seed):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.random.default_rng(seed).integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.complexfloating):
        return (random_array(shape, np.float64, seed) +
                1j * random_array(shape, np.float64, seed + 1)).astype(dtype)
    if np.issubdtype(dtype, np.integer):
        return np.random.default_rng(seed).integers(0, 100, size=shape).astype(dtype)
    return random_array(shape, dtype, seed)


def assign_on(device, initial, index, value):
    with tf.device(device):
        variable = tf.Variable(initial)
        variable[index].assign(value)
        return variable.read_value().numpy(), variable.device


# (variable shape, index expression, shape of the assigned value)
CASES = [
    ((6,), np.s_[1:5:2], (2,)),
    ((4, 5), np.s_[1:3, ::2], (2, 3)),
    ((4, 5), np.s_[::-1, 4:0:-2], (4, 2)),
    ((3, 4, 5), np.s_[..., 1], (3, 4)),             # ellipsis, shrunk last axis
    ((3, 4, 5), np.s_[1, tf.newaxis, :, 2:4], (1, 4, 2)),  # shrink + new axis
    ((4, 5), np.s_[1:3], (5,)),                     # the value broadcasts over rows
    ((4, 5), np.s_[:, 2], ()),                      # a scalar value broadcasts
    ((4, 5), np.s_[2:2], (0, 5)),                   # an empty slice changes nothing
]


@pytest.mark.parametrize("dtype", DTYPES)
def test_variable_slice_assign_matches_cpu_for_every_dtype(dtype):
    initial = values((4, 5), dtype, seed=1)
    value = values((2, 3), dtype, seed=2)
    vgpu.reset_stats()
    actual, device = assign_on("/GPU:0", initial, np.s_[1:3, ::2], value)
    expected, _ = assign_on("/CPU:0", initial, np.s_[1:3, ::2], value)
    np.testing.assert_array_equal(actual, expected)
    if dtype == np.int32:  # int32 variables live in host memory, as on TensorFlow's GPUs
        assert "CPU" in device
    else:
        assert "GPU" in device
        assert vgpu.stats()["launches"] >= 1


@pytest.mark.parametrize("shape,index,value_shape", CASES)
def test_variable_slice_assign_matches_cpu_for_every_slice_form(shape, index, value_shape):
    initial = values(shape, np.float32, seed=3)
    value = values(value_shape, np.float32, seed=4)
    actual, _ = assign_on("/GPU:0", initial, index, value)
    expected, _ = assign_on("/CPU:0", initial, index, value)
    np.testing.assert_array_equal(actual, expected)


@pytest.mark.parametrize("shape,index,value_shape", CASES)
def test_tensor_strided_slice_update_matches_cpu(shape, index, value_shape):
    initial = values(shape, np.float32, seed=5)
    value = values(value_shape, np.float32, seed=6)

    begin, end, strides, masks = strided_spec(shape, index)
    results = []
    for device in ("/GPU:0", "/CPU:0"):
        with tf.device(device):
            results.append(tf.raw_ops.TensorStridedSliceUpdate(
                input=tf.constant(initial), begin=begin, end=end, strides=strides,
                value=tf.constant(value), **masks).numpy())
    np.testing.assert_array_equal(results[0], results[1])


def strided_spec(shape, index):
    """begin, end, strides and masks of a NumPy-style index, as TensorFlow's __getitem__ makes
    them."""
    begin, end, strides = [], [], []
    masks = dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    for i, item in enumerate(index if isinstance(index, tuple) else (index,)):
        bit = 1 << i
        if item is Ellipsis:
            begin.append(0), end.append(0), strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif item is None:
            begin.append(0), end.append(0), strides.append(1)
            masks["new_axis_mask"] |= bit
        elif isinstance(item, slice):
            begin.append(item.start or 0), end.append(item.stop or 0)
            strides.append(item.step or 1)
            if item.start is None:
                masks["begin_mask"] |= bit
            if item.stop is None:
                masks["end_mask"] |= bit
        else:
            begin.append(item), end.append(item + 1), strides.append(1)
            masks["shrink_axis_mask"] |= bit
    as_tensor = lambda v: tf.constant(v, tf.int32)
    return as_tensor(begin), as_tensor(end), as_tensor(strides), masks


def test_slice_assign_errors_match_tensorflow():
    with tf.device("/GPU:0"):
        variable = tf.Variable(np.zeros((4, 5), np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot broadcast input shape"):
            variable[1:3].assign(np.ones((3, 5), np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="out of bounds"):
            variable[7].assign(np.ones((5,), np.float32))
        with pytest.raises((tf.errors.InvalidArgumentError, ValueError), match="non-zero|0"):
            variable[::0].assign(np.ones((4, 5), np.float32))
        np.testing.assert_array_equal(variable.numpy(), np.zeros((4, 5), np.float32))
        variable[1:3].assign(np.ones((2, 5), np.float32))  # the stream is still usable
    assert variable.numpy().sum() == 10
