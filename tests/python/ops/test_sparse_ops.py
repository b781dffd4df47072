"""The sparse family on the virtual GPU against TensorFlow's CPU kernels: gathers (GatherV2,
GatherNd, ResourceGather, ResourceGatherNd), scatters (ScatterNd, TensorScatter*,
ResourceScatter*, ResourceScatterNd*), segment reductions (UnsortedSegment*, SegmentSum/Mean)
and Where. Out-of-range indices follow TensorFlow's GPU kernels (a gather writes zeros, a scatter
or segment reduction drops the index), which the CPU kernels refuse; those cases are checked
against NumPy."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (assert_computed_on_the_gpus_host_like_cpu, assert_matches_cpu,
                            random_array, run_on, tolerance)

raw = tf.raw_ops
BF16 = tf.bfloat16.as_numpy_dtype
FLOATS = [np.float32, np.float16, BF16, np.float64]
INDEX_TYPES = [np.int32, np.int64]


def _on_gpu(fn, *args):
    vgpu.reset_stats()
    result = run_on("/GPU:0", fn, *args)
    for tensor in tf.nest.flatten(result):
        assert tensor.device.endswith("GPU:0"), f"computed on {tensor.device}"
    assert vgpu.stats()["launches"] >= 1, "nothing was launched on the virtual GPU"
    return result


def _assert_param_gradient_matches_cpu(fn, params, *rest):
    """d(sum(fn(params, *rest) * w))/d(params), densified, on CPU and GPU (w fixed)."""

    def gradient(p, *others):
        with tf.GradientTape() as tape:
            tape.watch(p)
            out = fn(p, *others)
        weights = tf.constant(random_array(out.shape, out.dtype.as_numpy_dtype, seed=7))
        return tf.convert_to_tensor(tape.gradient(out, p, output_gradients=weights))

    assert_matches_cpu(gradient, params, *rest)


# ---------------------------------------------------------------------------------------------
# GatherV2


@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64, np.bool_])
@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
def test_gather_matches_cpu_for_every_dtype(dtype, index_dtype):
    params = random_array((7, 5, 3), dtype, seed=1)
    indices = np.array([[6, 0, 3], [3, 3, 1]], index_dtype)
    # int32 params (shapes) are gathered on the host: test_int32_gathers_*.
    assert_matches_cpu(lambda p, i: tf.gather(p, i), params, indices,
                       expect_launch=dtype != np.int32)


@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
@pytest.mark.parametrize("name", ["axis_0", "axis_-1", "batch_dims", "legacy", "scalar_index"])
def test_int32_gathers_run_on_the_host_of_the_gpu_like_cpu_without_a_launch_or_copy(
        name, index_dtype):
    """int32 params are shapes (the gradient of a mean gathers the reduced sizes from a Shape):
    kept in host memory on the virtual GPU, as TensorFlow keeps int32 shapes for a GPU."""
    gathers = {
        "axis_0": lambda p, i: tf.gather(p, i),
        "axis_-1": lambda p, i: tf.gather(p, i, axis=-1),
        "batch_dims": lambda p, i: tf.gather(p, i, axis=2, batch_dims=1),
        "legacy": lambda p, i: raw.Gather(params=p, indices=i),
        "scalar_index": lambda p, i: tf.gather(p, i),
    }
    params = np.arange(-30, 30, dtype=np.int32).reshape(4, 5, 3)
    params[0, 0, 0] = np.iinfo(np.int32).min
    indices = {"axis_-1": [[2, 0, 1], [0, 2, 2]], "batch_dims": [[2, 0], [1, 1], [0, 2], [2, 2]],
               "scalar_index": 1}.get(name, [[3, 0, 1], [0, 2, 3], [1, 1, 2], [3, 3, 0]])
    indices = np.array(indices, index_dtype)
    got = assert_computed_on_the_gpus_host_like_cpu(gathers[name], params, indices)
    assert got.dtype == tf.int32


def test_an_int32_gather_gives_zero_rows_for_out_of_range_indices_as_the_device_kernel():
    params = np.array([[1, 2], [3, 4], [5, 6]], np.int32)
    with tf.device("/GPU:0"):
        out = tf.gather(tf.constant(params), tf.constant([2, 3, -1, 0], tf.int64))
        empty = tf.gather(tf.constant(params), tf.zeros((0, 2), tf.int32), axis=1)
    np.testing.assert_array_equal(out.numpy(), [[5, 6], [0, 0], [0, 0], [1, 2]])
    assert empty.shape == (3, 0, 2)


def test_an_int32_gather_keeps_the_checks_of_the_device_kernel():
    with tf.device("/GPU:0"):
        params = tf.ones((4, 3), tf.int32)
        with pytest.raises(tf.errors.InvalidArgumentError, match="at least rank 3"):
            raw.GatherV2(params=params, indices=[0], axis=2)
        with pytest.raises(tf.errors.InvalidArgumentError, match="should be equal to"):
            raw.GatherV2(params=params, indices=tf.zeros((3, 2), tf.int32), axis=1, batch_dims=1)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_gather_along_any_axis_matches_cpu(axis):
    params = random_array((4, 5, 6), np.float32, seed=2)
    indices = np.array([3, 0, 2, 2], np.int64)
    assert_matches_cpu(lambda p, i: tf.gather(p, i, axis=axis), params, indices)


@pytest.mark.parametrize("batch_dims,axis", [(1, 1), (1, 2), (2, 2), (-1, 2)])
def test_gather_with_batch_dims_matches_cpu(batch_dims, axis):
    params = random_array((3, 4, 5, 2), np.float32, seed=3)
    rng = np.random.default_rng(4)
    indices = rng.integers(0, params.shape[axis], size=(3, 4, 3)).astype(np.int32)
    if batch_dims == 1:
        indices = indices[:, 0, :]
    assert_matches_cpu(lambda p, i: tf.gather(p, i, axis=axis, batch_dims=batch_dims), params,
                       indices)


def test_gather_of_a_scalar_index_and_of_empty_tensors_matches_cpu():
    params = random_array((4, 3), np.float32)
    assert_matches_cpu(lambda p: tf.gather(p, 2), params)
    assert_matches_cpu(lambda p, i: tf.gather(p, i), params, np.zeros((0, 2), np.int32),
                       expect_launch=False)
    assert_matches_cpu(lambda p, i: tf.gather(p, i, axis=1), np.zeros((0, 3), np.float32),
                       np.array([2, 0], np.int32), expect_launch=False)


def test_gather_gives_zero_rows_for_out_of_range_indices():
    params = random_array((4, 3), np.float32, seed=5)
    out = _on_gpu(lambda p, i: tf.gather(p, i), params, np.array([3, 4, -1, 0], np.int64))
    np.testing.assert_array_equal(out.numpy(), [params[3], [0, 0, 0], [0, 0, 0], params[0]])


@pytest.mark.parametrize("dtype", FLOATS)
def test_gather_gradient_matches_cpu(dtype):
    params = random_array((6, 4), dtype, seed=6)
    indices = np.array([5, 1, 1, 3, 5], np.int32)  # duplicates accumulate
    _assert_param_gradient_matches_cpu(lambda p, i: tf.gather(p, i), params, indices)


def test_gather_with_a_bad_axis_or_batch_dims_is_invalid_argument():
    with tf.device("/GPU:0"):
        params = tf.ones((4, 3))
        with pytest.raises(tf.errors.InvalidArgumentError, match="at least rank 3"):
            raw.GatherV2(params=params, indices=[0], axis=2)
        with pytest.raises(tf.errors.InvalidArgumentError, match="should be equal to"):
            raw.GatherV2(params=params, indices=tf.zeros((3, 2), tf.int32), axis=1, batch_dims=1)
        with pytest.raises(tf.errors.InvalidArgumentError, match="at least 1 dimensional"):
            raw.GatherV2(params=1.0, indices=[0], axis=0)


@pytest.mark.parametrize("axis", [2**63 - 1, -2**63, 2**62, -3])
def test_gather_with_an_axis_at_the_ends_of_int64_is_invalid_argument(axis):
    # axis + 1 and -axis overflow at the ends of int64: it was a SIGSEGV of the process.
    with tf.device("/GPU:0"):
        params = tf.ones((4, 3))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Shape must be at least rank"):
            raw.GatherV2(params=params, indices=[0], axis=tf.constant(axis, tf.int64))


# ---------------------------------------------------------------------------------------------
# GatherNd


@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64])
@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
def test_gather_nd_matches_cpu_for_every_dtype(dtype, index_dtype):
    params = random_array((4, 5, 3), dtype, seed=8)
    indices = np.array([[[3, 4], [0, 0]], [[1, 2], [3, 4]]], index_dtype)
    assert_matches_cpu(lambda p, i: tf.gather_nd(p, i), params, indices)


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_gather_nd_of_every_index_depth_matches_cpu(depth):
    params = random_array((3, 4, 2), np.float32, seed=9)
    rng = np.random.default_rng(depth)
    indices = np.stack([rng.integers(0, params.shape[d], size=5) for d in range(depth)],
                       axis=-1).astype(np.int64) if depth else np.zeros((5, 0), np.int64)
    assert_matches_cpu(lambda p, i: tf.gather_nd(p, i), params, indices)


def test_gather_nd_gives_zeros_for_out_of_range_tuples():
    params = random_array((3, 4), np.float32, seed=10)
    out = _on_gpu(lambda p, i: tf.gather_nd(p, i), params,
                  np.array([[2, 3], [2, 4], [-1, 0], [0, 1]], np.int32))
    np.testing.assert_array_equal(out.numpy(), [params[2, 3], 0, 0, params[0, 1]])


def test_gather_nd_with_the_error_policy_raises_for_out_of_range_tuples():
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"indices\[1\] = \[2, 4\] does not index into param shape"):
            raw.GatherNd(params=tf.ones((3, 4)), indices=[[2, 3], [2, 4]],
                         bad_indices_policy="ERROR")
        ok = raw.GatherNd(params=tf.ones((3, 4)), indices=[[2, 3]], bad_indices_policy="ERROR")
        np.testing.assert_array_equal(ok.numpy(), [1.0])


@pytest.mark.parametrize("dtype", FLOATS)
def test_gather_nd_gradient_matches_cpu(dtype):
    params = random_array((4, 3, 2), dtype, seed=11)
    indices = np.array([[0, 1], [3, 2], [0, 1]], np.int32)
    _assert_param_gradient_matches_cpu(lambda p, i: tf.gather_nd(p, i), params, indices)


def test_gather_nd_with_bad_shapes_is_invalid_argument():
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be <= params rank"):
            raw.GatherNd(params=tf.ones((4, 3)), indices=[[0, 1, 2]])
        with pytest.raises(tf.errors.InvalidArgumentError, match="params is empty"):
            raw.GatherNd(params=tf.ones((0, 3)), indices=[[0]])


# ---------------------------------------------------------------------------------------------
# ScatterNd and TensorScatter*

SCATTER_TYPES = FLOATS + [np.int32, np.int64]


@pytest.mark.parametrize("dtype", SCATTER_TYPES)
@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
def test_scatter_nd_adds_duplicates_as_the_cpu(dtype, index_dtype):
    indices = np.array([[1, 0], [3, 2], [1, 0], [0, 1]], index_dtype)
    updates = random_array((4, 5), dtype, seed=12)
    shape = np.array([4, 3, 5], index_dtype)
    assert_matches_cpu(lambda i, u, s: tf.scatter_nd(i, u, s), indices, updates, shape)


def test_scatter_nd_of_bool_updates_is_an_or():
    indices = np.array([[1], [3], [1]], np.int64)
    assert_matches_cpu(lambda i, u: tf.scatter_nd(i, u, [5]), indices,
                       np.array([True, True, False]))


def test_scatter_nd_ignores_out_of_range_tuples():
    out = _on_gpu(lambda i, u: tf.scatter_nd(i, u, [3, 2]),
                  np.array([[0], [3], [-1], [2]], np.int32), np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(out.numpy(), [[1, 1], [0, 0], [1, 1]])


@pytest.mark.parametrize("dtype", FLOATS)
def test_scatter_nd_gradient_matches_cpu(dtype):
    indices = np.array([[1], [3], [1]], np.int32)

    def fn(updates, i):
        return tf.scatter_nd(i, updates, [5, 2])

    _assert_param_gradient_matches_cpu(fn, random_array((3, 2), dtype, seed=13), indices)


def test_scatter_nd_with_bad_shapes_is_invalid_argument():
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Dimensions \[1,2\) of input"):
            raw.ScatterNd(indices=[[0], [1]], updates=tf.ones((2, 3)), shape=[4, 4])
        with pytest.raises(tf.errors.InvalidArgumentError, match="empty output shape"):
            raw.ScatterNd(indices=[[0]], updates=tf.ones((1, 0)), shape=[4, 0])
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be >= 0"):
            raw.ScatterNd(indices=[[0]], updates=tf.ones((1, 4)), shape=[-1, 4])


TENSOR_SCATTERS = {
    "update": tf.tensor_scatter_nd_update,
    "add": tf.tensor_scatter_nd_add,
    "sub": tf.tensor_scatter_nd_sub,
    "min": tf.tensor_scatter_nd_min,
    "max": tf.tensor_scatter_nd_max,
}


@pytest.mark.parametrize("name", sorted(TENSOR_SCATTERS))
@pytest.mark.parametrize("dtype", SCATTER_TYPES)
def test_tensor_scatter_matches_cpu_with_duplicates(name, dtype):
    tensor = random_array((5, 3), dtype, seed=14)
    indices = np.array([[4], [0], [4], [2]], np.int64)
    updates = random_array((4, 3), dtype, seed=15)
    assert_matches_cpu(TENSOR_SCATTERS[name], tensor, indices, updates)


def test_tensor_scatter_update_of_bool_matches_cpu():
    tensor = np.ones((2, 3), np.bool_)
    assert_matches_cpu(tf.tensor_scatter_nd_update, tensor, np.array([[1, 2], [0, 0]], np.int32),
                       np.array([False, False]))


def test_tensor_scatter_leaves_its_input_unchanged_and_ignores_out_of_range_tuples():
    with tf.device("/GPU:0"):
        tensor = tf.constant([[1.0, 2.0], [3.0, 4.0]])
        out = tf.tensor_scatter_nd_add(tensor, [[1], [5]], [[10.0, 10.0], [7.0, 7.0]])
        np.testing.assert_array_equal(out.numpy(), [[1, 2], [13, 14]])
        np.testing.assert_array_equal(tensor.numpy(), [[1, 2], [3, 4]])


@pytest.mark.parametrize("name", sorted(TENSOR_SCATTERS))
def test_tensor_scatter_gradients_match_cpu(name):
    indices = np.array([[2], [0]], np.int32)

    def fn(tensor, updates, i):
        return TENSOR_SCATTERS[name](tensor, i, updates)

    tensor = random_array((4, 3), np.float32, seed=16)
    updates = random_array((2, 3), np.float32, seed=17)

    def gradients(t, u, i):
        with tf.GradientTape() as tape:
            tape.watch([t, u])
            out = fn(t, u, i)
        weights = tf.constant(random_array(out.shape, np.float32, seed=18))
        return tape.gradient(out, [t, u], output_gradients=weights)

    assert_matches_cpu(gradients, tensor, updates, indices)


def test_scatters_of_no_updates_match_cpu():
    no_indices = np.zeros((0, 1), np.int32)
    assert_matches_cpu(lambda i, u: tf.scatter_nd(i, u, [3, 2]), no_indices,
                       np.zeros((0, 2), np.float32))
    assert_matches_cpu(tf.tensor_scatter_nd_add, random_array((3, 2), np.float32), no_indices,
                       np.zeros((0, 2), np.float32), expect_launch=False)
    assert_matches_cpu(lambda i, u: tf.scatter_nd(i, u, [0, 2]), no_indices,
                       np.zeros((0, 2), np.float32), expect_launch=False)
    assert_matches_cpu(lambda p, i: tf.gather_nd(p, i), random_array((3, 2), np.float32),
                       no_indices, expect_launch=False)


def test_tensor_scatter_with_bad_shapes_is_invalid_argument():
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="The inner 1 dimensions"):
            raw.TensorScatterUpdate(tensor=tf.zeros((4, 4)), indices=[[0], [1]],
                                    updates=tf.ones((2, 3)))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Outer dimensions of indices"):
            raw.TensorScatterAdd(tensor=tf.zeros((4, 4)), indices=[[[0]], [[1]]],
                                 updates=tf.ones((3, 1, 4)))


# ---------------------------------------------------------------------------------------------
# Segment reductions

SEGMENT_OPS = {
    "sum": tf.math.unsorted_segment_sum,
    "prod": tf.math.unsorted_segment_prod,
    "max": tf.math.unsorted_segment_max,
    "min": tf.math.unsorted_segment_min,
}


@pytest.mark.parametrize("name", sorted(SEGMENT_OPS))
@pytest.mark.parametrize("dtype", FLOATS + [np.int32, np.int64])
@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
def test_unsorted_segment_reductions_match_cpu(name, dtype, index_dtype):
    data = random_array((7, 3), dtype, seed=19, low=-2, high=2)
    ids = np.array([3, 0, 3, 1, 0, 3, 1], index_dtype)  # segment 2 and 4 stay empty
    assert_matches_cpu(lambda d, i: SEGMENT_OPS[name](d, i, num_segments=5), data, ids)


def test_unsorted_segment_sum_of_multi_dimensional_ids_matches_cpu():
    data = random_array((2, 3, 4), np.float32, seed=20)
    ids = np.array([[0, 2, 0], [1, 1, 2]], np.int32)
    assert_matches_cpu(lambda d, i: tf.math.unsorted_segment_sum(d, i, 3), data, ids)


@pytest.mark.parametrize("name", sorted(SEGMENT_OPS))
def test_unsorted_segment_reductions_drop_negative_and_out_of_range_ids(name):
    data = np.array([[1.0], [2.0], [3.0], [4.0]], np.float32)
    out = _on_gpu(lambda d, i: SEGMENT_OPS[name](d, i, num_segments=2), data,
                  np.array([0, -1, 5, 0], np.int64))
    kept = {"sum": 5.0, "prod": 4.0, "max": 4.0, "min": 1.0}[name]
    empty = {"sum": 0.0, "prod": 1.0, "max": np.finfo(np.float32).min,
             "min": np.finfo(np.float32).max}[name]
    np.testing.assert_array_equal(out.numpy(), [[kept], [empty]])


def test_unsorted_segment_sum_of_empty_data_fills_the_output():
    assert_matches_cpu(lambda d, i: tf.math.unsorted_segment_sum(d, i, 3),
                       np.zeros((0, 2), np.float32), np.zeros((0,), np.int32))


@pytest.mark.parametrize("dtype", FLOATS)
def test_unsorted_segment_sum_gradient_matches_cpu(dtype):
    # int64 ids: the gradient takes zeros_like(ids), and TensorFlow's own host-memory int32
    # ZerosLike kernel cannot take a device tensor (an element-wise family matter).
    ids = np.array([2, 0, 2, 1], np.int64)
    _assert_param_gradient_matches_cpu(lambda d, i: tf.math.unsorted_segment_sum(d, i, 3),
                                       random_array((4, 3), dtype, seed=21), ids)


@pytest.mark.parametrize("name", ["max", "min", "prod"])
def test_unsorted_segment_reduction_gradients_match_cpu(name):
    ids = np.array([2, 0, 2, 1, 0], np.int64)  # int64: see the sum gradient test
    data = random_array((5, 3), np.float32, seed=32)
    _assert_param_gradient_matches_cpu(lambda d, i: SEGMENT_OPS[name](d, i, 3), data, ids)


def test_unsorted_segment_sum_with_bad_inputs_is_invalid_argument():
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="does not start with"):
            raw.UnsortedSegmentSum(data=tf.ones((4, 3)), segment_ids=[0, 1, 2], num_segments=3)
        with pytest.raises(tf.errors.InvalidArgumentError, match="must not be negative"):
            raw.UnsortedSegmentSum(data=tf.ones((4, 3)), segment_ids=[0, 1, 2, 0],
                                   num_segments=-1)
        with pytest.raises(tf.errors.InvalidArgumentError, match="should be a scalar"):
            raw.UnsortedSegmentSum(data=tf.ones((4, 3)), segment_ids=[0, 1, 2, 0],
                                   num_segments=[3])


@pytest.mark.parametrize("op", [tf.math.segment_sum, tf.math.segment_mean])
@pytest.mark.parametrize("dtype", FLOATS)
def test_sorted_segment_reductions_match_cpu(op, dtype):
    data = random_array((6, 3), dtype, seed=22)
    ids = np.array([0, 0, 2, 2, 2, 4], np.int32)  # segments 1 and 3 are empty
    assert_matches_cpu(op, data, ids)
    _assert_param_gradient_matches_cpu(op, data, ids)


@pytest.mark.parametrize("op", [tf.math.segment_sum, tf.math.segment_mean])
@pytest.mark.parametrize("last_id", [2**62, 2**63 - 1])
def test_a_segment_id_whose_output_size_overflows_is_invalid_argument_as_on_the_cpu(op, last_id):
    # The output's element count overflows int64: TensorFlow's shape check aborted the process.
    data = np.ones((2, 3), np.float32)
    ids = np.array([0, last_id], np.int64)
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device):
            with pytest.raises(tf.errors.InvalidArgumentError, match="overflow|non-negative"):
                op(tf.constant(data), tf.constant(ids))


# ---------------------------------------------------------------------------------------------
# Where


@pytest.mark.parametrize("dtype", [np.bool_, np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("shape", [(7,), (3, 4), (2, 3, 4)])
def test_where_matches_cpu(dtype, shape):
    x = random_array(shape, dtype, seed=23, low=-1, high=1)
    assert_matches_cpu(tf.where, x)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.uint8])
def test_where_of_dtypes_the_cpu_lacks_gives_the_coordinates_of_non_zero_elements(dtype):
    x = np.array([[0, 1], [2, 0], [3, 0]]).astype(dtype)
    out = _on_gpu(tf.where, x)
    np.testing.assert_array_equal(out.numpy(), [[0, 1], [1, 0], [2, 0]])


def test_where_counts_nan_as_true_and_handles_empty_inputs():
    assert_matches_cpu(tf.where, np.array([0.0, np.nan, -0.0, 2.0], np.float32))
    assert_matches_cpu(tf.where, np.zeros((0, 3), np.bool_), expect_launch=False)
    assert_matches_cpu(tf.where, np.zeros((2, 3), np.bool_))


def test_where_of_a_scalar_is_invalid_argument_as_on_the_cpu():
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="Unhandled input dimensions"):
            raw.Where(condition=True)


# ---------------------------------------------------------------------------------------------
# Resource variables


def _variable_on(device, value):
    with tf.device(device):
        return tf.Variable(value)


def _on_cpu_and_gpu(value, use):
    """use(variable) on a new variable holding `value`, run on the CPU and then on GPU:0 (each
    with its own variable there): the two results, CPU first."""
    results = []
    for device in ("/CPU:0", "/GPU:0"):
        var = _variable_on(device, value)
        with tf.device(device):
            results.append(use(var))
    return results


@pytest.mark.parametrize("dtype", FLOATS + [np.int64, np.bool_])
def test_resource_gather_matches_cpu(dtype):
    value = random_array((6, 4), dtype, seed=24)
    indices = np.array([[5, 0], [2, 2]], np.int32)
    results = _on_cpu_and_gpu(value, lambda var: raw.ResourceGather(
        resource=var.handle, indices=indices, dtype=var.dtype))
    assert results[1].device.endswith("GPU:0")
    np.testing.assert_array_equal(results[1].numpy(), results[0].numpy())


def test_resource_gather_with_batch_dims_matches_cpu():
    value = random_array((3, 5, 2), np.float32, seed=25)
    indices = np.array([[4, 0], [1, 1], [3, 2]], np.int64)
    results = _on_cpu_and_gpu(value, lambda var: raw.ResourceGather(
        resource=var.handle, indices=indices, dtype=tf.float32, batch_dims=1))
    np.testing.assert_array_equal(results[1].numpy(), results[0].numpy())


def test_resource_gather_gives_zero_rows_for_out_of_range_indices():
    var = _variable_on("/GPU:0", np.ones((3, 2), np.float32))
    with tf.device("/GPU:0"):
        out = raw.ResourceGather(resource=var.handle, indices=[2, 3, -1], dtype=tf.float32)
    np.testing.assert_array_equal(out.numpy(), [[1, 1], [0, 0], [0, 0]])


@pytest.mark.parametrize("dtype", FLOATS + [np.int64])
def test_resource_gather_nd_matches_cpu(dtype):
    value = random_array((4, 3, 2), dtype, seed=26)
    indices = np.array([[3, 2], [0, 1], [3, 2]], np.int32)
    results = _on_cpu_and_gpu(value, lambda var: raw.ResourceGatherNd(
        resource=var.handle, indices=indices, dtype=var.dtype))
    np.testing.assert_array_equal(results[1].numpy(), results[0].numpy())


RESOURCE_SCATTERS = ["Update", "Add", "Sub", "Mul", "Div", "Min", "Max"]


def _scatter_on(device, name, value, indices, updates):
    var = _variable_on(device, value)
    with tf.device(device):
        getattr(raw, f"ResourceScatter{name}")(resource=var.handle, indices=indices,
                                               updates=updates)
        return var.read_value()


@pytest.mark.parametrize("name", RESOURCE_SCATTERS)
@pytest.mark.parametrize("dtype", FLOATS + [np.int64])
@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
def test_resource_scatter_matches_cpu_with_duplicate_indices(name, dtype, index_dtype):
    value = random_array((5, 3), dtype, seed=27, low=1, high=3)
    indices = np.array([4, 1, 4, 0], index_dtype)
    updates = random_array((4, 3), dtype, seed=28, low=1, high=3)
    expected = _scatter_on("/CPU:0", name, value, indices, updates)
    vgpu.reset_stats()
    actual = _scatter_on("/GPU:0", name, value, indices, updates)
    assert actual.device.endswith("GPU:0") and vgpu.stats()["launches"] >= 1
    np.testing.assert_allclose(actual.numpy().astype(np.float64),
                               expected.numpy().astype(np.float64), **tolerance(dtype))


@pytest.mark.parametrize("name", ["Add", "Update", "Max"])
def test_resource_scatter_of_a_scalar_update_matches_cpu(name):
    value = random_array((4, 2), np.float32, seed=29)
    expected = _scatter_on("/CPU:0", name, value, np.array([3, 3, 0]), np.float32(2.5))
    actual = _scatter_on("/GPU:0", name, value, np.array([3, 3, 0]), np.float32(2.5))
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_resource_scatter_of_no_indices_leaves_the_variable_unchanged():
    value = random_array((4, 2), np.float32, seed=33)
    out = _scatter_on("/GPU:0", "Add", value, np.zeros((0,), np.int32),
                      np.zeros((0, 2), np.float32))
    np.testing.assert_array_equal(out.numpy(), value)


def test_resource_scatter_update_of_bool_matches_cpu():
    value = np.array([True, False, True])
    expected = _scatter_on("/CPU:0", "Update", value, np.array([0, 1], np.int32), [False, True])
    actual = _scatter_on("/GPU:0", "Update", value, np.array([0, 1], np.int32), [False, True])
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_resource_scatter_ignores_out_of_range_indices_of_floating_variables():
    out = _scatter_on("/GPU:0", "Add", np.zeros((3, 2), np.float32), np.array([2, 3, -1, 2]),
                      np.ones((4, 2), np.float32))
    np.testing.assert_array_equal(out.numpy(), [[0, 0], [0, 0], [2, 2]])


def test_resource_scatter_of_int64_variables_refuses_out_of_range_indices_as_tensorflow():
    var = _variable_on("/GPU:0", np.zeros((3, 2), np.int64))
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[1\] = 3 is not in"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[2, 3],
                                   updates=np.ones((2, 2), np.int64))
        with pytest.raises(tf.errors.InvalidArgumentError, match="must not contain 0"):
            raw.ResourceScatterDiv(resource=var.handle, indices=[2, 1],
                                   updates=np.array([[1, 1], [0, 1]], np.int64))
    np.testing.assert_array_equal(var.numpy(), np.zeros((3, 2)))


def test_resource_scatter_keeps_earlier_reads_of_the_variable_intact():
    var = _variable_on("/GPU:0", np.zeros((3, 2), np.float32))
    with tf.device("/GPU:0"):
        before = var.read_value()
        var.scatter_add(tf.IndexedSlices(tf.ones((1, 2)), tf.constant([1])))
        after = var.read_value()
        var.scatter_sub(tf.IndexedSlices(tf.ones((1, 2)), tf.constant([0])))
    np.testing.assert_array_equal(before.numpy(), np.zeros((3, 2)))
    np.testing.assert_array_equal(after.numpy(), [[0, 0], [1, 1], [0, 0]])
    np.testing.assert_array_equal(var.numpy(), [[-1, -1], [1, 1], [0, 0]])


def test_a_scattered_variable_can_still_be_assigned_and_read():
    # Sparse updates must not leave the variable in a mode TensorFlow's own (host-side)
    # AssignVariableOp kernel cannot handle on the device (TensorFlow's copy-on-read mode).
    var = _variable_on("/GPU:0", np.zeros((3, 2), np.float32))
    with tf.device("/GPU:0"):
        raw.ResourceScatterAdd(resource=var.handle, indices=[1], updates=tf.ones((1, 2)))
        raw.ResourceGather(resource=var.handle, indices=[1], dtype=tf.float32)
        var.assign(var * 2.0)
        raw.ResourceScatterNdAdd(ref=var.handle, indices=[[0, 0]], updates=[5.0])
        var.assign_add(tf.ones((3, 2)))
    np.testing.assert_array_equal(var.numpy(), [[6, 1], [3, 3], [1, 1]])


def test_resource_scatter_with_bad_inputs_is_invalid_argument():
    var = _variable_on("/GPU:0", np.zeros((4, 3), np.float32))
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="Must have updates.shape"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[0, 1], updates=tf.ones((2,)))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Must have updates.shape"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[0, 1], updates=tf.ones((2, 2)))
        with pytest.raises(tf.errors.InvalidArgumentError, match="must be a prefix"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[0, 1], updates=tf.ones((3, 3)))
        with pytest.raises(tf.errors.InvalidArgumentError, match="does not match"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[0],
                                   updates=tf.ones((1, 3), tf.float64))


def _scatter_nd_on(device, name, value, indices, updates):
    """ResourceScatterNd{name} of `updates` at `indices` into a new variable holding `value` on
    `device`; returns the variable and its value read after the scatter."""
    var = _variable_on(device, value)
    with tf.device(device):
        getattr(raw, f"ResourceScatterNd{name}")(ref=var.handle, indices=indices, updates=updates)
        return var, var.read_value()


@pytest.mark.parametrize("name", ["Update", "Add", "Sub", "Min", "Max"])
@pytest.mark.parametrize("dtype", FLOATS + [np.int64])
def test_resource_scatter_nd_matches_cpu(name, dtype):
    value = random_array((4, 3), dtype, seed=30)
    indices = np.array([[3, 2], [0, 1], [3, 2]], np.int32)
    updates = random_array((3,), dtype, seed=31)
    _, expected = _scatter_nd_on("/CPU:0", name, value, indices, updates)
    _, actual = _scatter_nd_on("/GPU:0", name, value, indices, updates)
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


@pytest.mark.parametrize("name", ["Update", "Add", "Sub"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_resource_scatter_nd_of_complex_variables_matches_cpu(name, dtype):
    value = (random_array((4, 3, 2), np.float64, seed=32) +
             1j * random_array((4, 3, 2), np.float64, seed=33)).astype(dtype)
    indices = np.array([[3, 2], [0, 1], [3, 2]], np.int64)
    updates = (random_array((3, 2), np.float64, seed=34) +
               1j * random_array((3, 2), np.float64, seed=35)).astype(dtype)
    vgpu.reset_stats()
    _, expected = _scatter_nd_on("/CPU:0", name, value, indices, updates)
    var, actual = _scatter_nd_on("/GPU:0", name, value, indices, updates)
    assert vgpu.stats()["launches"] >= 1
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match=r"updates.shape"):
        getattr(raw, f"ResourceScatterNd{name}")(ref=var.handle, indices=indices,
                                                 updates=updates[:2])


@pytest.mark.parametrize("index_dtype", INDEX_TYPES)
def test_resource_scatter_nd_update_of_bool_matches_cpu(index_dtype):
    value = np.array([[True, False, True], [False, False, True]])
    indices = np.array([[1, 2], [0, 1], [1, 2]], index_dtype)
    updates = np.array([False, True, True])
    _, expected = _scatter_nd_on("/CPU:0", "Update", value, indices, updates)
    vgpu.reset_stats()
    _, actual = _scatter_nd_on("/GPU:0", "Update", value, indices, updates)
    assert actual.device.endswith("GPU:0") and vgpu.stats()["launches"] >= 1
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def _complex_array(shape, dtype, seed):
    return (random_array(shape, np.float64, seed=seed) +
            1j * random_array(shape, np.float64, seed=seed + 1)).astype(dtype)


@pytest.mark.parametrize("name", ["Update", "Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_resource_scatter_of_complex_variables_matches_cpu(name, dtype):
    """Complex rows are combined in host memory: duplicates in index order, scalar updates."""
    value = _complex_array((5, 3), dtype, seed=50)
    indices = np.array([4, 1, 4, 0], np.int64)
    updates = _complex_array((4, 3), dtype, seed=52)
    expected = _scatter_on("/CPU:0", name, value, indices, updates)
    actual = _scatter_on("/GPU:0", name, value, indices, updates)
    assert actual.device.endswith("GPU:0")
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)
    scalar = dtype(1.5 - 2j)
    expected = _scatter_on("/CPU:0", name, value, indices, scalar)
    actual = _scatter_on("/GPU:0", name, value, indices, scalar)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6)


def test_resource_scatter_of_complex_variables_refuses_bad_indices_and_zero_divisors_as_cpu():
    """The error is the CPU kernel's; the virtual GPU checks every index before it updates any
    row, where the CPU has already applied those before the bad one."""
    value = _complex_array((3, 2), np.complex64, seed=54)
    for device in ("/CPU:0", "/GPU:0"):
        var = _variable_on(device, value)
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError,
                                              match=r"indices\[1\] = 3 is not in"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[0, 3],
                                   updates=np.ones((2, 2), np.complex64))
    np.testing.assert_array_equal(var.numpy(), value)
    for device in ("/CPU:0", "/GPU:0"):
        var = _variable_on(device, value)
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError,
                                              match="updates must not contain 0"):
            raw.ResourceScatterDiv(resource=var.handle, indices=[1],
                                   updates=np.array([[1, 0]], np.complex64))
        np.testing.assert_array_equal(var.numpy(), value)


def test_resource_scatter_nd_ignores_out_of_range_tuples_and_checks_shapes():
    var = _variable_on("/GPU:0", np.zeros((2, 2), np.float32))
    with tf.device("/GPU:0"):
        raw.ResourceScatterNdAdd(ref=var.handle, indices=[[1, 1], [1, 2]], updates=[3.0, 4.0])
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Dimensions \[0,1\)"):
            raw.ResourceScatterNdUpdate(ref=var.handle, indices=[[0, 1], [1, 0]],
                                        updates=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal(var.numpy(), [[0, 0], [0, 3]])


# Integer variables of the dtypes the executors have no arithmetic for: TensorFlow's GPU build
# registers their gathers and scatters (no kernel would fail a variable placed on GPU:0 with
# "Could not satisfy explicit device specification"); here the scatters run through host memory.
HOST_INTEGERS = [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64]


def _wrapping_integers(shape, dtype, seed):
    """Values over the whole range of `dtype`, so that sums and products wrap."""
    info = np.iinfo(dtype)
    rng = np.random.default_rng(seed)
    return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)


@pytest.mark.parametrize("name", RESOURCE_SCATTERS)
@pytest.mark.parametrize("dtype", HOST_INTEGERS)
def test_resource_scatter_of_small_integer_variables_matches_cpu(name, dtype):
    value = _wrapping_integers((5, 3), dtype, seed=40)
    indices = np.array([4, 1, 4, 0], np.int64)
    updates = _wrapping_integers((4, 3), dtype, seed=41)
    if name == "Div":
        updates[updates == 0] = 3
    expected = _scatter_on("/CPU:0", name, value, indices, updates)
    actual = _scatter_on("/GPU:0", name, value, indices, updates)
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


@pytest.mark.parametrize("dtype", [np.int8, np.uint64])
def test_resource_scatter_of_a_scalar_update_to_a_small_integer_variable_matches_cpu(dtype):
    value = _wrapping_integers((4, 2), dtype, seed=42)
    scalar = np.array(7, dtype)
    expected = _scatter_on("/CPU:0", "Mul", value, np.array([3, 3, 0], np.int32), scalar)
    actual = _scatter_on("/GPU:0", "Mul", value, np.array([3, 3, 0], np.int32), scalar)
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


@pytest.mark.parametrize("dtype", [np.uint8, np.int16])
def test_resource_scatter_of_a_small_integer_variable_refuses_bad_indices_and_zero_divisors(dtype):
    var = _variable_on("/GPU:0", np.full((3, 2), 6, dtype))
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"indices\[1\] = 3 is not in"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[2, 3],
                                   updates=np.ones((2, 2), dtype))
        with pytest.raises(tf.errors.InvalidArgumentError, match="must not contain 0"):
            raw.ResourceScatterDiv(resource=var.handle, indices=[2, 1],
                                   updates=np.array([[1, 1], [0, 1]], dtype))
        with pytest.raises(tf.errors.InvalidArgumentError, match="Must have updates.shape"):
            raw.ResourceScatterAdd(resource=var.handle, indices=[0, 1],
                                   updates=np.ones((2, 3), dtype))
    np.testing.assert_array_equal(var.numpy(), np.full((3, 2), 6))


@pytest.mark.parametrize("name", ["Update", "Add", "Sub", "Min", "Max"])
@pytest.mark.parametrize("dtype", HOST_INTEGERS)
def test_resource_scatter_nd_of_small_integer_variables_matches_cpu(name, dtype):
    value = _wrapping_integers((4, 3, 2), dtype, seed=43)
    indices = np.array([[3, 2], [0, 1], [3, 2]], np.int32)
    updates = _wrapping_integers((3, 2), dtype, seed=44)
    _, expected = _scatter_nd_on("/CPU:0", name, value, indices, updates)
    _, actual = _scatter_nd_on("/GPU:0", name, value, indices, updates)
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_resource_scatter_nd_of_a_small_integer_variable_ignores_out_of_range_tuples():
    var = _variable_on("/GPU:0", np.zeros((2, 2), np.uint16))
    with tf.device("/GPU:0"):
        raw.ResourceScatterNdAdd(ref=var.handle, indices=[[1, 1], [1, 2], [-1, 0]],
                                 updates=np.array([3, 4, 5], np.uint16))
        with pytest.raises(tf.errors.InvalidArgumentError, match=r"Dimensions \[0,1\)"):
            raw.ResourceScatterNdUpdate(ref=var.handle, indices=[[0, 1], [1, 0]],
                                        updates=np.array([1, 2, 3], np.uint16))
    np.testing.assert_array_equal(var.numpy(), [[0, 0], [0, 3]])


@pytest.mark.parametrize("dtype", HOST_INTEGERS + [np.complex64, np.complex128])
def test_resource_gathers_of_variables_of_every_device_dtype_match_cpu(dtype):
    value = (_wrapping_integers((6, 4), dtype, seed=45) if np.issubdtype(dtype, np.integer) else
             (random_array((6, 4), np.float64, seed=45) +
              1j * random_array((6, 4), np.float64, seed=46)).astype(dtype))
    indices = np.array([[5, 0], [2, 2]], np.int64)
    gathers = [lambda var: raw.ResourceGather(resource=var.handle, indices=indices,
                                              dtype=var.dtype)]
    if np.issubdtype(dtype, np.integer):  # TensorFlow's GPU build has no complex GatherNd
        gathers.append(lambda var: raw.ResourceGatherNd(resource=var.handle, indices=indices,
                                                        dtype=var.dtype))
    for gather in gathers:
        vgpu.reset_stats()
        results = _on_cpu_and_gpu(value, gather)
        assert results[1].device.endswith("GPU:0") and vgpu.stats()["launches"] >= 1
        np.testing.assert_array_equal(results[1].numpy(), results[0].numpy())


@pytest.mark.parametrize("dtype", [tf.int8, tf.uint8, tf.int16, tf.uint16, tf.uint32, tf.int64,
                                   tf.uint64])
def test_every_integer_variable_on_the_gpu_takes_every_update(dtype):
    """What a user does with an integer variable placed on GPU:0 (TensorFlow's own
    resource_variable_ops_test checks this sequence on a GPU)."""
    with tf.device("/GPU:0"):
        v = tf.Variable(1, dtype=dtype)
        assert v.device.endswith("GPU:0")
        v.assign_add(1)
        v.assign_sub(1)
        assert v.numpy() == 1
        v = tf.Variable([1, 2], dtype=dtype)
        v.scatter_add(tf.IndexedSlices(tf.constant([2], dtype), tf.constant([1])))
        np.testing.assert_array_equal(v.numpy(), [1, 4])
        v.scatter_update(tf.IndexedSlices(tf.constant([5], dtype), tf.constant([1])))
        v.scatter_max(tf.IndexedSlices(tf.constant([2, 2], dtype), tf.constant([0, 1])))
        np.testing.assert_array_equal(v.numpy(), [2, 5])
        v.scatter_nd_add(indices=[[1]], updates=tf.constant([2], dtype))
        np.testing.assert_array_equal(v.numpy(), [2, 7])
        v.scatter_nd_update(indices=[[1]], updates=tf.constant([2], dtype))
        v.scatter_nd_max(indices=[[1]], updates=tf.constant([3], dtype))
        np.testing.assert_array_equal(v.numpy(), [2, 3])
        assert v.gather_nd([1]).numpy() == 3
        assert v.sparse_read([0]).numpy()[0] == 2
