"""Data movement ops (Transpose, ConcatV2, Pack, Unpack, Slice, StridedSlice, StridedSliceGrad,
Pad, PadV2, Tile, BroadcastTo) on the virtual GPU against TensorFlow's CPU kernels: bit-exact in
every registered dtype, with empty and odd shapes, negative indices and every StridedSlice mask,
gradients through GradientTape, and TensorFlow's InvalidArgumentError for bad input."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (assert_computed_on_the_gpus_host_like_cpu, assert_gradients_match_cpu,
                            assert_matches_cpu, random_array)

ALL_DTYPES = [np.float32, np.float16, tf.bfloat16.as_numpy_dtype, np.float64, np.int32, np.int64,
              np.bool_, np.uint8]
# The shape ops (ConcatV2, Pack, Unpack, Slice, StridedSlice) keep int32 in host memory, as on a
# GPU: TensorFlow's host kernels or the plugin's, computed on the host (test_int32_shape_ops_*);
# on the virtual GPU, without a launch.
SHAPE_OPS = ["ConcatV2", "Pack", "Unpack", "Slice", "StridedSlice"]
HOST_INT32_KERNELS = ["Pack", "StridedSlice"]  # the plugin's; the others are TensorFlow's
EXACT = dict(rtol=0, atol=0)


def matches_cpu(fn, *args, expect_launch=True):
    return assert_matches_cpu(fn, *args, expect_launch=expect_launch, **EXACT)


def raises_on_gpu(fn, match, *args):
    """fn(*args) on GPU:0 raises InvalidArgumentError matching `match` (and so does the CPU)."""
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError, match=match):
            fn(*[tf.constant(a) if isinstance(a, np.ndarray) else a for a in args])


# --- Transpose -----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_transpose_matches_cpu_in_every_dtype(dtype):
    x = random_array((3, 4, 5), dtype, seed=1)
    matches_cpu(lambda t: tf.transpose(t, [2, 0, 1]), x)


@pytest.mark.parametrize("shape,perm", [
    ((7, 9), (1, 0)),
    ((2, 3, 4, 5), (3, 1, 0, 2)),
    ((1, 5, 1, 3), (3, 0, 2, 1)),
    ((2, 1, 3, 1, 2, 3), (5, 4, 3, 2, 1, 0)),
    ((3, 0, 2), (2, 1, 0)),
    ((130, 257), (1, 0)),          # long rows, chunked across threads
    ((2, 3, 4, 5, 2, 3, 2, 2), (7, 0, 6, 1, 5, 2, 4, 3)),  # rank 8
])
def test_transpose_matches_cpu_for_odd_shapes(shape, perm):
    x = random_array(shape, np.float32, seed=len(shape))
    matches_cpu(lambda t: tf.transpose(t, perm), x, expect_launch=x.size > 0)


@pytest.mark.parametrize("perm", [(-1, 0, 1), (2, -3, -2), (-1, -2, -3)])
def test_transpose_with_negative_perm_entries_matches_cpu(perm):
    # TensorFlow's kernels count a negative entry from the end.
    x = random_array((2, 3, 4), np.float32, seed=9)
    matches_cpu(lambda t: tf.transpose(t, perm), x)


def test_transpose_that_only_moves_unit_dimensions_forwards_without_a_launch():
    x = random_array((1, 6, 1, 4), np.float32)
    matches_cpu(lambda t: tf.transpose(t, [2, 1, 0, 3]), x, expect_launch=False)
    matches_cpu(lambda t: tf.transpose(t, [0, 1, 2, 3]), x, expect_launch=False)


@pytest.mark.parametrize("perm,match", [
    ([0, 0, 1], "missing from"),
    ([0, 3, 1], "out of range"),
    ([0, -4, 1], "out of range"),
    ([1, 0], "transpose expects a vector of size 3"),
])
def test_transpose_with_bad_perm_is_invalid_argument(perm, match):
    raises_on_gpu(lambda t: tf.raw_ops.Transpose(x=t, perm=perm), match,
                  random_array((2, 3, 4), np.float32))


def test_transpose_gradient_matches_cpu():
    x = random_array((3, 4, 5), np.float32)
    assert_gradients_match_cpu(lambda t: tf.transpose(t, [1, 2, 0]), x)


# --- ConcatV2, Pack, Unpack ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_concat_matches_cpu_in_every_dtype(dtype):
    a = random_array((2, 3, 4), dtype, seed=1)
    b = random_array((2, 5, 4), dtype, seed=2)
    matches_cpu(lambda p, q: tf.concat([p, q], axis=1), a, b, expect_launch=dtype != np.int32)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat_matches_cpu_along_every_axis(axis):
    shapes = [[3, 4, 5], [3, 4, 5], [3, 4, 5]]
    pieces = [random_array(s, np.float32, seed=i) for i, s in enumerate(shapes)]
    matches_cpu(lambda *p: tf.concat(list(p), axis=axis), *pieces)


def test_concat_of_many_inputs_with_empty_pieces_matches_cpu():
    pieces = [random_array((4, i % 3, 3), np.int64, seed=i) for i in range(40)]
    matches_cpu(lambda *p: tf.concat(list(p), axis=1), *pieces)


def test_concat_of_only_empty_inputs_gives_an_empty_result():
    matches_cpu(lambda p, q: tf.concat([p, q], 0), np.zeros((0, 3), np.float32),
                np.zeros((0, 3), np.float32), expect_launch=False)


@pytest.mark.parametrize("shapes,axis,match", [
    ([(2, 3), (2, 3, 1)], 0, "Ranks of all input tensors should match"),
    ([(2, 3), (3, 3)], 1, "Dimension 0 in both shapes must be equal"),
    ([(2, 3), (2, 3)], 2, r"Expected concatenating dimensions in the range \[-2, 2\)"),
])
def test_concat_with_bad_shapes_is_invalid_argument(shapes, axis, match):
    pieces = [random_array(s, np.float32) for s in shapes]
    raises_on_gpu(lambda *p: tf.raw_ops.ConcatV2(values=list(p), axis=axis), match, *pieces)


def test_concat_gradient_matches_cpu():
    a = random_array((3, 2, 4), np.float32, seed=1)
    b = random_array((3, 5, 4), np.float32, seed=2)
    assert_gradients_match_cpu(lambda p, q: tf.concat([p, q], axis=1), a, b)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_pack_matches_cpu(dtype, axis):
    pieces = [random_array((3, 4), dtype, seed=i) for i in range(3)]
    matches_cpu(lambda *p: tf.stack(list(p), axis=axis), *pieces,
                expect_launch=dtype != np.int32)


def test_pack_of_scalars_and_of_one_tensor_matches_cpu():
    matches_cpu(lambda a, b: tf.stack([a, b]), np.array(3, np.int64), np.array(4, np.int64))
    matches_cpu(lambda a, b: tf.stack([a, b]), np.array(3, np.int32), np.array(4, np.int32),
                expect_launch=False)
    matches_cpu(lambda a: tf.stack([a], axis=1), random_array((2, 3), np.float32),
                expect_launch=False)


def test_pack_with_mismatched_shapes_is_invalid_argument():
    raises_on_gpu(lambda a, b: tf.raw_ops.Pack(values=[a, b]), "Shapes of all inputs must match",
                  random_array((2, 3), np.float32), random_array((3, 2), np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.bool_, np.int64, np.float16])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_unpack_matches_cpu(dtype, axis):
    x = random_array((3, 4, 2), dtype)
    matches_cpu(lambda t: tf.unstack(t, axis=axis), x)


def test_unpack_with_wrong_num_is_invalid_argument():
    raises_on_gpu(lambda t: tf.raw_ops.Unpack(value=t, num=4, axis=0), "must equal 4",
                  random_array((3, 2), np.float32))


# --- Slice ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_slice_matches_cpu_in_every_dtype(dtype):
    x = random_array((5, 6, 7), dtype)
    matches_cpu(lambda t: tf.slice(t, [1, 0, 2], [3, -1, 4]), x, expect_launch=dtype != np.int32)


@pytest.mark.parametrize("begin,size", [
    ([0, 0], [-1, -1]),   # identity: forwarded
    ([2, 3], [0, 2]),     # empty
    ([4, 6], [1, 1]),     # last element
    ([1, 0], [2, 7]),     # whole rows
])
def test_slice_matches_cpu_for_edge_cases(begin, size):
    x = random_array((5, 7), np.float32)
    expect_launch = begin != [0, 0] and 0 not in size
    matches_cpu(lambda t: tf.slice(t, begin, size), x, expect_launch=expect_launch)


@pytest.mark.parametrize("begin,size,match", [
    ([0, 6], [1, 1], r"Expected size\[1\] in \[0, 0\]"),
    ([-1, 0], [1, 1], r"Expected begin\[0\] in \[0, 5\]"),
    ([0], [1], "Expected begin and size arguments to be 1-D tensors of size 2"),
])
def test_slice_out_of_bounds_is_invalid_argument(begin, size, match):
    raises_on_gpu(lambda t: tf.raw_ops.Slice(input=t, begin=begin, size=size), match,
                  random_array((5, 6), np.float32))


def test_slice_gradient_matches_cpu():
    x = random_array((5, 6), np.float32)
    assert_gradients_match_cpu(lambda t: tf.slice(t, [1, 2], [3, 3]), x)


# --- StridedSlice --------------------------------------------------------------------------

SLICES = {
    "range_and_step": lambda t: t[1:3, ::2],
    "reverse": lambda t: t[::-1],
    "reverse_with_step": lambda t: t[5:1:-2, -1::-3],
    "ellipsis_then_index": lambda t: t[..., 0],
    "new_axis_and_ellipsis": lambda t: t[tf.newaxis, 1:, ...],
    "negative_index": lambda t: t[-1],
    "negative_range_and_new_axis": lambda t: t[:, -3:-1, tf.newaxis],
    "index_in_the_middle": lambda t: t[1:, 2, ::-1],
    "clamped_out_of_range": lambda t: t[2:100, -100:3],
    "empty_range": lambda t: t[3:1],
    "ellipsis_with_new_axes_after_it": lambda t: t[..., tf.newaxis, 1, tf.newaxis],
    "all_dims_indexed": lambda t: t[1, 2, 3],
    "whole_tensor": lambda t: t[:, :, :],
}


@pytest.mark.parametrize("name", sorted(SLICES))
def test_strided_slice_matches_cpu(name):
    x = random_array((6, 7, 8), np.float32)
    with tf.device("/CPU:0"):
        empty = tf.size(SLICES[name](tf.constant(x))).numpy() == 0
    matches_cpu(SLICES[name], x, expect_launch=name != "whole_tensor" and not empty)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_strided_slice_matches_cpu_in_every_dtype(dtype):
    x = random_array((6, 7, 8), dtype)
    matches_cpu(lambda t: t[1:5:3, ::-2, 4], x, expect_launch=dtype != np.int32)


@pytest.mark.parametrize("masks", [
    dict(begin_mask=0b101, end_mask=0b010),
    dict(begin_mask=0b111, end_mask=0b111),
    dict(ellipsis_mask=0b010),
    dict(new_axis_mask=0b001, shrink_axis_mask=0b100),
    dict(shrink_axis_mask=0b101),
    dict(ellipsis_mask=0b001, new_axis_mask=0b010),
])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])  # int32: the host kernel
def test_strided_slice_masks_match_cpu(masks, dtype):
    x = random_array((5, 6, 7), dtype)
    matches_cpu(lambda t: tf.raw_ops.StridedSlice(input=t, begin=[1, -2, 3], end=[4, 1, 6],
                                                  strides=[1, -1, 2], **masks), x,
                expect_launch=dtype != np.int32)


def test_strided_slice_with_int64_indices_matches_cpu():
    x = random_array((6, 7), np.float32)
    begin = tf.constant([1, -1], tf.int64)
    end = tf.constant([5, 0], tf.int64)
    strides = tf.constant([2, -2], tf.int64)
    matches_cpu(lambda t: tf.strided_slice(t, begin, end, strides), x)


@pytest.mark.parametrize("spec,match", [
    (dict(begin=[9], end=[10], strides=[1], shrink_axis_mask=1),
     "slice index 9 of dimension 0 out of bounds"),
    (dict(begin=[0], end=[2], strides=[0]), r"strides\[0\] must be non-zero"),
    (dict(begin=[0, 0], end=[1, 1], strides=[1, 1], ellipsis_mask=3),
     "Multiple ellipses in slice spec not allowed"),
    (dict(begin=[0, 0, 0], end=[1, 1, 1], strides=[1, 1, 1]), "Index out of range using input dim"),
    (dict(begin=[0], end=[1, 1], strides=[1]), "Expected begin, end, and strides to be 1D"),
    (dict(begin=[1], end=[0], strides=[-1], shrink_axis_mask=1),
     "only stride 1 allowed on non-range indexing"),
])
def test_strided_slice_bad_spec_is_invalid_argument(spec, match):
    raises_on_gpu(lambda t: tf.raw_ops.StridedSlice(input=t, **spec), match,
                  random_array((4, 5), np.float32))


@pytest.mark.parametrize("name", ["range_and_step", "reverse_with_step", "negative_index",
                                  "new_axis_and_ellipsis", "index_in_the_middle",
                                  "empty_range"])
def test_strided_slice_gradient_matches_cpu(name):
    x = random_array((6, 7, 8), np.float32)
    assert_gradients_match_cpu(SLICES[name], x)


@pytest.mark.parametrize("dtype", [np.float16, tf.bfloat16.as_numpy_dtype, np.float64, np.int32])
def test_strided_slice_grad_matches_cpu_in_other_dtypes(dtype):
    dy = random_array((2, 4), dtype)
    matches_cpu(lambda g: tf.raw_ops.StridedSliceGrad(shape=[5, 8], begin=[1, 7], end=[4, 0],
                                                      strides=[2, -2], dy=g), dy)


def test_strided_slice_grad_with_wrong_dy_shape_is_invalid_argument():
    raises_on_gpu(lambda g: tf.raw_ops.StridedSliceGrad(shape=[5, 8], begin=[1, 0], end=[4, 8],
                                                        strides=[1, 1], dy=g),
                  r"shape of dy was \[2,8\] instead of \[3,8\]", random_array((2, 8), np.float32))


# --- Pad, PadV2 ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_pad_with_constant_matches_cpu_in_every_dtype(dtype):
    x = random_array((3, 4), dtype)
    value = np.array(1, dtype)
    matches_cpu(lambda t, v: tf.pad(t, [[1, 2], [0, 3]], constant_values=v), x, value)
    matches_cpu(lambda t: tf.pad(t, [[2, 0], [1, 1]]), x)


@pytest.mark.parametrize("shape,paddings", [
    ((0, 3), [[1, 1], [0, 0]]),          # empty input, non-empty output
    ((2, 0), [[0, 0], [0, 0]]),          # nothing at all
    ((5,), [[0, 0]]),                    # no padding: forwarded
    ((2, 3, 1, 2), [[0, 1], [2, 0], [1, 1], [0, 0]]),
    ((), []),                            # scalar
])
def test_pad_matches_cpu_for_edge_cases(shape, paddings):
    x = random_array(shape, np.float32)
    padded = any(sum(p) for p in paddings)
    matches_cpu(lambda t: tf.pad(t, tf.constant(paddings, tf.int32, shape=(len(shape), 2))), x,
                expect_launch=padded)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.int64])
@pytest.mark.parametrize("shape,paddings", [
    ((8, 30, 30, 16), [[0, 0], [0, 1], [0, 1], [0, 0]]),   # ZeroPadding2D's (0, 1) of an image
    ((2, 3, 4, 5, 6), [[1, 2], [0, 1], [3, 0], [1, 1], [2, 3]]),  # every dimension, 5-D
    ((3, 0, 2), [[1, 1], [2, 0], [0, 3]]),                # an empty x inside a padded y
    ((4, 1000), [[0, 0], [5, 7]]),                         # long innermost runs of padding
])
def test_pad_writes_the_pad_value_exactly_outside_the_box(dtype, shape, paddings):
    # The executor fills only the padding (strided_copy_engine.cc, FillPadding) and copies x
    # into the rest: a pad value unlike any element shows a missed or misplaced run.
    x = random_array(shape, dtype)
    value = np.array(77, dtype)
    matches_cpu(lambda t, v: tf.pad(t, paddings, constant_values=v), x, value)


@pytest.mark.parametrize("paddings,match", [
    ([[1, -1], [0, 0]], "Paddings must be non-negative: 1 -1"),
    ([[1, 1]], "The first dimension of paddings must be the rank of inputs"),
    ([[1, 1, 1], [0, 0, 0]], "paddings must be a matrix with 2 columns"),
])
def test_pad_with_bad_paddings_is_invalid_argument(paddings, match):
    raises_on_gpu(lambda t: tf.raw_ops.Pad(input=t, paddings=paddings), match,
                  random_array((3, 4), np.float32))


def test_pad_gradient_matches_cpu():
    x = random_array((3, 4), np.float32)
    assert_gradients_match_cpu(lambda t: tf.pad(t, [[1, 2], [3, 0]]), x)


# --- Tile, BroadcastTo ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_tile_matches_cpu_in_every_dtype(dtype):
    x = random_array((2, 3), dtype)
    matches_cpu(lambda t: tf.tile(t, [3, 2]), x)


@pytest.mark.parametrize("shape,multiples", [
    ((2, 1, 3), (1, 4, 1)),
    ((1,), (1000,)),
    ((3, 2), (0, 2)),          # empty result
    ((4, 5), (1, 1)),          # forwarded
    ((1, 3, 1, 2), (2, 1, 3, 2)),
])
def test_tile_matches_cpu_for_odd_shapes(shape, multiples):
    x = random_array(shape, np.float32)
    launch = 0 not in multiples and any(m != 1 for m in multiples)
    matches_cpu(lambda t: tf.tile(t, multiples), x, expect_launch=launch)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shape,multiples", [
    ((1, 1, 1, 16), (64, 28, 28, 1)),  # a channel vector over N*H*W: 49 chunks, the last partial
    ((3, 1, 5), (1, 3000, 1)),         # short rows under an outer dimension, one or two chunks
    ((2, 1, 7), (2, 2, 1)),            # two repeats of a row, every outer position tiled too
])
def test_tile_of_short_rows_repeated_many_times_matches_cpu(dtype, shape, multiples):
    # The executor writes such a row once per chunk and doubles it in place
    # (strided_copy_engine.cc, RunRepeatedRows): every byte must still come out right.
    x = random_array(shape, dtype)
    matches_cpu(lambda t: tf.tile(t, multiples), x)


@pytest.mark.parametrize("shape,target", [
    ((32,), (8, 20, 20, 32)),
    ((1, 20, 1, 3), (4, 20, 50, 3)),
])
def test_broadcast_to_of_short_rows_matches_cpu(shape, target):
    x = random_array(shape, np.float16)
    matches_cpu(lambda t: tf.broadcast_to(t, target), x)


@pytest.mark.parametrize("multiples,match", [
    ([2, -1], r"Expected multiples\[1\] >= 0, but got -1"),
    ([2], "Expected multiples argument to be a vector of length 2 but got length 1"),
])
def test_tile_with_bad_multiples_is_invalid_argument(multiples, match):
    raises_on_gpu(lambda t: tf.raw_ops.Tile(input=t, multiples=multiples), match,
                  random_array((2, 3), np.float32))


def test_tile_gradient_matches_cpu():
    # The gradient is a reduction (not this family): compare values wherever it runs.
    x = random_array((2, 3), np.float32)

    def gradient(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = tf.tile(t, [3, 2])
        return tape.gradient(y, t, output_gradients=tf.reshape(tf.range(36.0), [6, 6]))

    with tf.device("/CPU:0"):
        expected = gradient(tf.constant(x))
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        actual = gradient(tf.constant(x))
    assert vgpu.stats()["launches"] >= 1
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)


@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_broadcast_to_matches_cpu_in_every_dtype(dtype):
    x = random_array((3, 1), dtype)
    matches_cpu(lambda t: tf.broadcast_to(t, [2, 3, 4]), x)


@pytest.mark.parametrize("shape,target", [
    ((), (2, 3)),
    ((1, 3), (0, 3)),
    ((3,), (1, 3)),            # only a new unit dimension: forwarded
    ((2, 1, 3), (2, 5, 3)),
    ((1,), (5000,)),
])
def test_broadcast_to_matches_cpu_for_edge_cases(shape, target):
    x = random_array(shape, np.float32)
    launch = np.prod(target) > x.size
    matches_cpu(lambda t: tf.broadcast_to(t, target), x, expect_launch=launch)


@pytest.mark.parametrize("target,match", [
    ([2, 4], "Incompatible shapes"),
    ([3], "Rank of input"),
])
def test_broadcast_to_incompatible_shape_is_invalid_argument(target, match):
    raises_on_gpu(lambda t: tf.raw_ops.BroadcastTo(input=t, shape=target), match,
                  random_array((2, 3), np.float32))


# --- placement of int32 --------------------------------------------------------------------

def test_int32_shape_arithmetic_in_a_function_runs_on_the_device():
    @tf.function
    def reshape_by_shape(x):
        shape = tf.shape(x)
        rows = tf.stack([shape[0] * 2, -1])
        return tf.transpose(tf.reshape(x, rows)), tf.concat([shape, shape[1:]], 0)

    x = random_array((4, 6), np.float32)
    actual = assert_matches_cpu(reshape_by_shape, x)
    assert actual[1].numpy().tolist() == [4, 6, 6]


# --- Split, SplitV -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL_DTYPES)
def test_split_matches_cpu_in_every_dtype(dtype):
    x = random_array((4, 6, 3), dtype)
    matches_cpu(lambda t: tf.split(t, 3, axis=1), x)


@pytest.mark.parametrize("sizes,axis", [([2, -1, 0], 0), ([1, 3, 2], -2), ([3], 2)])
def test_split_v_matches_cpu(sizes, axis):
    x = random_array((5, 6, 3), np.float32)
    matches_cpu(lambda t: tf.split(t, sizes, axis=axis), x, expect_launch=len(sizes) > 1)


@pytest.mark.parametrize("op,match", [
    (lambda t: tf.raw_ops.Split(axis=1, value=t, num_split=4), "evenly divide"),
    (lambda t: tf.raw_ops.SplitV(value=t, size_splits=[1, 1], axis=0, num_split=2),
     "Determined shape must either match"),
    (lambda t: tf.raw_ops.SplitV(value=t, size_splits=[-1, -1], axis=0, num_split=2),
     "There can only be one -1"),
    (lambda t: tf.raw_ops.Split(axis=3, value=t, num_split=1), "split_dim < input rank"),
])
def test_split_with_bad_sizes_is_invalid_argument(op, match):
    raises_on_gpu(op, match, random_array((5, 6), np.float32))


# --- int32 shapes stay in host memory ----------------------------------------------------------

def test_the_shape_ops_have_no_int32_kernel_in_device_memory():
    catalog = {entry["op"]: entry for entry in vgpu.ops()}
    for op in SHAPE_OPS:
        if op in HOST_INT32_KERNELS:
            assert "int32" in catalog[op]["dtypes"], op
            assert "output" in catalog[op]["host_memory"], op
        else:
            assert "int32" not in catalog[op]["dtypes"], op
        assert "int64" in catalog[op]["dtypes"], op  # other integers still run on the device


@pytest.mark.parametrize("name", ["concat", "stack", "unstack", "slice", "strided_slice"])
def test_int32_shape_ops_under_the_gpu_match_cpu_without_a_launch_or_copy(name):
    ops = {
        "concat": lambda a, b: tf.concat([a, b], 0),
        "stack": lambda a, b: tf.stack([a, b[:3]], 1),
        "unstack": lambda a, b: tf.unstack(a)[1],
        "slice": lambda a, b: tf.slice(b, [1], [2]),
        "strided_slice": lambda a, b: a[::-2],
    }
    a = np.array([7, -3, 2**31 - 1], np.int32)
    b = np.array([5, 0, -2**31, 9], np.int32)
    assert_computed_on_the_gpus_host_like_cpu(ops[name], a, b)


def stitch(*tensors):
    """DynamicStitch of its first half (the indices) and second half (the data)."""
    half = len(tensors) // 2
    return tf.dynamic_stitch(list(tensors[:half]), list(tensors[half:]))


@pytest.mark.parametrize("case", ["vectors", "rows", "overlapping", "scalar_index", "empty"])
def test_int32_dynamic_stitch_on_the_gpu_matches_cpu_without_a_launch_or_copy(case):
    indices, data = {
        "vectors": ([[0, 2], [1, 3, 4]], [[7, -1], [2**31 - 1, -2**31, 5]]),
        "rows": ([[1, 0]], [[[1, 2, 3], [4, 5, 6]]]),
        "overlapping": ([[0, 1, 2], [2, 0]], [[10, 11, 12], [20, 21]]),  # later inputs win
        "scalar_index": ([1, [0]], [[8, 9], [[6, 7]]]),
        "empty": ([np.zeros((0,), np.int32)], [np.zeros((0, 3), np.int32)]),
    }[case]
    arrays = [np.array(a, np.int32) for a in indices + data]
    assert assert_computed_on_the_gpus_host_like_cpu(stitch, *arrays).dtype == tf.int32


def test_int32_dynamic_stitch_leaves_zeros_where_no_index_names_a_row():
    with tf.device("/GPU:0"):
        merged = stitch(tf.constant([3, 0]), tf.constant([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(merged.numpy(), [[3, 4], [0, 0], [0, 0], [1, 2]])


@pytest.mark.parametrize("indices,data,match", [
    ([[0, -1]], [[1, 2]], r"indices\[1\] is out of range"),
    ([[0, 1]], [[1, 2, 3]], r"data\[0\].shape = \[3\] does not start with indices\[0\]"),
    ([[0], [1]], [[[1, 2]], [[1, 2, 3]]], r"Need data\[0\].shape\[1:\] = data\[1\].shape\[1:\]"),
])
def test_int32_dynamic_stitch_with_bad_input_is_the_cpus_invalid_argument(indices, data, match):
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError, match=match):
            tf.dynamic_stitch([tf.constant(i, tf.int32) for i in indices],
                              [tf.constant(d, tf.int32) for d in data])


@pytest.mark.parametrize("axes", [[1], [0, 2], [-1]])
def test_a_mean_over_dimensions_of_unknown_size_and_its_gradient_copy_nothing(axes):
    """The gradient of a mean over dimensions of unknown size (a GlobalAveragePooling1D, a
    layer norm's moments on a batch of unknown size) gathers the reduced sizes from a Shape and
    stitches the kept shape together: int32 on the host, nothing crosses to the device and back
    mid-step (the stitch ran on the CPU and took the whole input there for its shape)."""
    @tf.function(input_signature=[tf.TensorSpec([None, None, 4], tf.float32)])
    def mean_and_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = tf.reduce_mean(x * x, axis=axes)
        return y, tape.gradient(y, x)

    x = random_array((6, 5, 4), np.float32, seed=9)
    with tf.device("/CPU:0"):
        expected = [t.numpy() for t in mean_and_gradient(tf.constant(x))]
    with tf.device("/GPU:0"):
        on_device = tf.identity(tf.constant(x))
        mean_and_gradient(on_device)  # traced and optimised
        vgpu.reset_stats()
        got = mean_and_gradient(on_device)
        copies = dict(vgpu.stats()["commands"])
    # The one copy up is the mean's divisor, cast on the device's stream from the host
    # (_VgpuCastFromHost); TensorFlow's own copies would record events for their completion.
    assert copies["memcpy_dtoh"] == 0 and copies["memcpy_htod"] <= 1, copies
    assert copies["record_event"] == 0 and copies["wait_event"] == 0, copies
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value.numpy(), want, rtol=1e-6, atol=1e-7)


def test_a_reshape_by_a_dynamic_batch_size_copies_nothing_between_host_and_device():
    """A Flatten of a batch of unknown size: its shape (Shape, StridedSlice, Pack) is computed
    on the host and read there by Reshape; nothing crosses to the device and back mid-step."""
    @tf.function(input_signature=[tf.TensorSpec([None, 4, 5], tf.float32)])
    def flatten(x):
        batch = tf.shape(x)[0]
        flat = tf.reshape(x, tf.stack([batch, -1]))
        widths = tf.concat([tf.shape(x)[1:], tf.shape(flat)[1:]], 0)
        return flat * 2.0, widths

    x = random_array((6, 4, 5), np.float32)
    with tf.device("/GPU:0"):
        on_device = tf.identity(tf.constant(x))
        flatten(on_device)  # traced and optimised
        vgpu.reset_stats()
        flat, widths = flatten(on_device)
        copies = dict(vgpu.stats()["commands"])
    assert copies["memcpy_htod"] == 0 and copies["memcpy_dtoh"] == 0, copies
    np.testing.assert_array_equal(flat.numpy(), x.reshape(6, 20) * 2.0)
    np.testing.assert_array_equal(widths.numpy(), [4, 5, 20])


def test_int32_strided_slices_on_the_host_of_empty_ranges_and_single_elements_match_cpu():
    x = random_array((4, 5), np.int32)
    for fn in (lambda t: t[3:1], lambda t: t[:, 4:0:2], lambda t: t[2, 3], lambda t: t[-1],
               lambda t: t[..., ::-1][1:, None, :2]):
        matches_cpu(fn, x, expect_launch=False)
