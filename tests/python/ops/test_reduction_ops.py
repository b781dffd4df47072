"""Reduction-family ops on the virtual GPU against TensorFlow's CPU kernels: Sum, Mean, Prod,
Max, Min, All, Any (negative, multiple and non-adjacent axes, keep_dims, empty reductions),
ArgMax / ArgMin (ties, output types), Softmax / LogSoftmax and the softmax cross-entropy losses
(broadcasting, int32/int64 labels, out-of-range labels), Cumsum / Cumprod, TopKV2 (ties, index
types), their gradients, 16-bit sums accumulated in float, int32 placement, and invalid
arguments."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (assert_gradients_match_cpu, assert_matches_cpu, gradients_of,
                            random_array, run_on, tolerance)

FLOATING = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype]
REDUCIBLE = FLOATING + [np.int64]
REDUCTIONS = {
    "sum": tf.reduce_sum,
    "mean": tf.reduce_mean,
    "prod": tf.reduce_prod,
    "max": tf.reduce_max,
    "min": tf.reduce_min,
}
# (shape, axes): full reduction, last / first / middle axes, negative and multiple axes,
# size-1 dimensions, and alternating runs that need a transpose (4 and 5 runs).
AXES_CASES = [
    ((17,), None),
    ((4, 33), [1]),
    ((4, 33), [0]),
    ((3, 4, 5), [-2]),
    ((3, 4, 5), [0, 2]),
    ((3, 1, 4, 5), [1, -1]),
    ((2, 3, 4, 5), [0, 2]),
    ((2, 3, 2, 3, 2), [1, 3]),
]


def reduction_input(name, shape, dtype, seed=0):
    if name == "prod":  # values near 1 keep the product finite in every dtype
        return random_array(shape, dtype, seed=seed, low=0.8 if dtype != np.int64 else -1,
                            high=1.25 if dtype != np.int64 else 2)
    return random_array(shape, dtype, seed=seed, low=-3, high=3)


def loose_tolerance(dtype):
    # 16-bit sums of many terms round differently depending on the summation order.
    tol = tolerance(dtype)
    if np.dtype(dtype).itemsize == 2:
        return dict(rtol=3e-2, atol=6e-2)
    return tol


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", REDUCIBLE)
@pytest.mark.parametrize("shape,axes", AXES_CASES)
def test_reduction_matches_cpu(name, dtype, shape, axes):
    x = reduction_input(name, shape, dtype, seed=len(shape))
    assert_matches_cpu(lambda t: REDUCTIONS[name](t, axis=axes), x, **loose_tolerance(dtype))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axes", [None, [1], [0, 2]])
def test_reduction_with_keep_dims_matches_cpu(name, axes):
    x = reduction_input(name, (3, 4, 5), np.float32, seed=1)
    assert_matches_cpu(lambda t: REDUCTIONS[name](t, axis=axes, keepdims=True), x)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
def test_reduction_of_an_empty_axis_gives_the_identity_like_cpu(name, dtype):
    # sum 0, mean NaN (0 for integers), prod 1, max -inf / lowest, min +inf / highest.
    x = np.zeros((0, 3), dtype)
    out = assert_matches_cpu(lambda t: REDUCTIONS[name](t, axis=0), x)
    assert out.shape == (3,)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_to_an_empty_output_is_empty(name):
    out = run_on("/GPU:0", lambda t: REDUCTIONS[name](t, axis=1), np.zeros((0, 3), np.float32))
    assert out.shape == (0,)


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_reduction_that_reduces_nothing_returns_the_input(name):
    # A scalar, an empty axis list and a size-1 axis: the input comes back reshaped.
    x = random_array((4, 1, 3), np.float32, seed=2)
    assert_matches_cpu(lambda t: REDUCTIONS[name](t, axis=1), x, expect_launch=False)
    assert_matches_cpu(lambda t: REDUCTIONS[name](t, axis=[]), x, expect_launch=False)
    assert_matches_cpu(lambda t: REDUCTIONS[name](t), np.float32(2.5), expect_launch=False)


def test_reductions_match_the_cpu_for_large_inputs():
    x = random_array((64, 1000), np.float32, seed=3)
    assert_matches_cpu(lambda t: tf.reduce_sum(t), x, rtol=1e-5, atol=1e-3)
    assert_matches_cpu(lambda t: tf.reduce_mean(t, axis=0), x)
    assert_matches_cpu(lambda t: tf.reduce_max(t, axis=1), x, rtol=0, atol=0)


def test_max_and_min_propagate_nan_like_cpu():
    x = np.array([[1.0, np.nan, 2.0], [3.0, 4.0, 5.0]], np.float32)
    assert_matches_cpu(lambda t: (tf.reduce_max(t, 1), tf.reduce_min(t, 1)), x)


def test_integer_mean_truncates_like_cpu():
    x = np.array([[1, 2, 2], [-1, -2, -2]], np.int64)
    assert_matches_cpu(lambda t: tf.reduce_mean(t, axis=1), x)


@pytest.mark.parametrize("name", ["all", "any"])
@pytest.mark.parametrize("shape,axes", [((13,), None), ((3, 4, 5), [0, 2]), ((0, 3), [0])])
def test_logical_reduction_matches_cpu(name, shape, axes):
    fn = tf.reduce_all if name == "all" else tf.reduce_any
    x = random_array(shape, np.bool_, seed=4)
    assert_matches_cpu(lambda t: fn(t, axis=axes), x, expect_launch=x.size > 0)


def test_int32_reductions_under_the_gpu_give_cpu_values():
    # TensorFlow keeps int32 tensors of a GPU in host memory: Sum/Mean/Prod run on the CPU and
    # Max/Min on TensorFlow's own host-memory kernels; either way the values are the CPU's.
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    for fn in REDUCTIONS.values():
        expected = run_on("/CPU:0", lambda t: fn(t, axis=1), x)
        actual = run_on("/GPU:0", lambda t: fn(t, axis=1), x)
        np.testing.assert_array_equal(actual.numpy(), expected.numpy())


@pytest.mark.parametrize("name,bad_axes,message", [
    ("sum", [2], "Invalid reduction dimension"),
    ("mean", [-3], "Invalid reduction dimension"),
    ("max", [1, -1], "duplicate dimension"),
])
def test_reduction_with_bad_axes_is_invalid_argument(name, bad_axes, message):
    op = {"sum": tf.raw_ops.Sum, "mean": tf.raw_ops.Mean, "max": tf.raw_ops.Max}[name]
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=message):
        op(input=tf.ones([2, 3]), axis=bad_axes).numpy()


ARG_REDUCTIONS = {"argmax": tf.math.argmax, "argmin": tf.math.argmin}


@pytest.mark.parametrize("name", sorted(ARG_REDUCTIONS))
@pytest.mark.parametrize("dtype", REDUCIBLE)
@pytest.mark.parametrize("output_type", [tf.int32, tf.int64])
@pytest.mark.parametrize("shape,axis", [((17,), 0), ((4, 9), 1), ((3, 4, 5), -2), ((3, 4, 5), 0)])
def test_arg_reduction_matches_cpu(name, dtype, output_type, shape, axis):
    # Small integers: many ties, which go to the lowest index.
    x = np.random.default_rng(5).integers(-2, 3, size=shape).astype(dtype)
    assert_matches_cpu(lambda t: ARG_REDUCTIONS[name](t, axis=axis, output_type=output_type), x)


def test_arg_reduction_over_an_empty_axis_is_invalid_argument():
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match="is empty"):
        tf.math.argmax(tf.ones([2, 0]), axis=1).numpy()


def test_arg_reduction_with_a_bad_dimension_is_invalid_argument():
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match="range"):
        tf.raw_ops.ArgMax(input=tf.ones([2, 3]), dimension=2).numpy()
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match="scalar"):
        tf.raw_ops.ArgMax(input=tf.ones([2, 3]), dimension=[1]).numpy()


SOFTMAXES = {"softmax": tf.nn.softmax, "log_softmax": tf.nn.log_softmax}


@pytest.mark.parametrize("name", sorted(SOFTMAXES))
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape", [(7,), (5, 1), (4, 10), (2, 3, 33), (0, 4), (3, 0)])
def test_softmax_matches_cpu(name, dtype, shape):
    x = random_array(shape, dtype, seed=6, low=-20, high=20)
    assert_matches_cpu(SOFTMAXES[name], x, expect_launch=x.size > 0)


def test_softmax_is_stable_for_large_logits():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1000.0, -1000.0, 0.0]], np.float32)
    out = assert_matches_cpu(lambda t: (tf.nn.softmax(t), tf.nn.log_softmax(t)), x)
    assert np.all(np.isfinite(out[0].numpy())) and np.all(np.isfinite(out[1].numpy()))


def test_softmax_of_a_scalar_is_invalid_argument():
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError):
        tf.raw_ops.Softmax(logits=tf.constant(1.0)).numpy()


def xent(logits, labels):
    return tf.raw_ops.SoftmaxCrossEntropyWithLogits(features=logits, labels=labels)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("logits_shape,labels_shape", [
    ((4, 7), (4, 7)), ((4, 7), (1, 7)), ((4, 7), (7,)), ((4, 7), (4, 1)), ((1, 7), (4, 7)),
    ((0, 7), (0, 7)),
])
def test_softmax_cross_entropy_matches_cpu(dtype, logits_shape, labels_shape):
    logits = random_array(logits_shape, dtype, seed=7, low=-5, high=5)
    labels = random_array(labels_shape, dtype, seed=8, low=0, high=1)
    assert_matches_cpu(xent, logits, labels, expect_launch=logits.size > 0)


@pytest.mark.parametrize("logits_shape,labels_shape,message", [
    ((4, 7), (5,), "broadcastable"),
    ((7,), (7,), "2-dimensional"),
    ((2, 3, 4), (2, 3, 4), "2-dimensional"),
])
def test_softmax_cross_entropy_with_bad_shapes_is_invalid_argument(
        logits_shape, labels_shape, message):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=message):
        xent(tf.ones(logits_shape), tf.ones(labels_shape))[0].numpy()


def sparse_xent(logits, labels):
    return tf.raw_ops.SparseSoftmaxCrossEntropyWithLogits(features=logits, labels=labels)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("batch,classes", [(6, 5), (1, 1), (0, 3)])
def test_sparse_softmax_cross_entropy_matches_cpu(dtype, label_dtype, batch, classes):
    logits = random_array((batch, classes), dtype, seed=9, low=-5, high=5)
    labels = np.random.default_rng(10).integers(0, classes, size=batch).astype(label_dtype)
    assert_matches_cpu(sparse_xent, logits, labels, expect_launch=batch > 0)


def test_sparse_softmax_cross_entropy_reads_labels_computed_on_the_device_where_they_are():
    """Labels computed on the device (Keras casts them) stay there: the launch reads them from
    device memory, as TensorFlow's GPU kernel does, so nothing is copied back to the host before
    the loss is read. (As a HostMemory input they were copied back in the middle of every
    training step, the op's thread waiting for the device to finish the forward pass.)"""
    logits = random_array((6, 5), np.float32, seed=13)
    labels = np.array([0, 4, 2, 2, 1, 3], np.int32)

    @tf.function
    def loss_and_gradient(features, label_ids):
        return sparse_xent(features, tf.cast(label_ids, tf.int64))

    with tf.device("/GPU:0"):
        features, label_ids = tf.constant(logits), tf.constant(labels)
        loss_and_gradient(features, label_ids)  # traced and warmed up
        before = vgpu.stats()["bytes_from_device"]
        loss, backprop = loss_and_gradient(features, label_ids)
        copied_back = vgpu.stats()["bytes_from_device"] - before
    assert copied_back == 0
    expected_loss, expected_backprop = run_on("/CPU:0", sparse_xent, logits,
                                              labels.astype(np.int64))
    np.testing.assert_allclose(loss.numpy(), expected_loss.numpy(), rtol=1e-6)
    np.testing.assert_allclose(backprop.numpy(), expected_backprop.numpy(), rtol=1e-6)


@pytest.mark.parametrize("labels", [[0, 5, 1], [-1, 7, 0]])
def test_sparse_softmax_cross_entropy_with_out_of_range_labels_gives_nan_like_cuda(labels):
    """TensorFlow's CUDA kernel gives a NaN loss and gradient row for a label outside
    [0, classes) (its CPU kernel raises); the virtual GPU does what the GPU does, and the other
    rows are the CPU's."""
    logits = random_array((3, 3), np.float32, seed=12)
    loss, backprop = run_on("/GPU:0", sparse_xent, logits, np.array(labels, np.int64))
    bad = [not 0 <= label < 3 for label in labels]
    good = [not b for b in bad]
    assert np.isnan(loss.numpy()[bad]).all() and np.isnan(backprop.numpy()[bad]).all()
    safe = np.where(good, labels, 0)
    expected_loss, expected_backprop = run_on("/CPU:0", sparse_xent, logits,
                                              np.array(safe, np.int64))
    np.testing.assert_allclose(loss.numpy()[good], expected_loss.numpy()[good], rtol=1e-6)
    np.testing.assert_allclose(backprop.numpy()[good], expected_backprop.numpy()[good],
                               rtol=1e-6)
    with tf.device("/CPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="Received a label value of"):
        sparse_xent(tf.constant(logits), tf.constant(labels, tf.int64))


@pytest.mark.parametrize("logits_shape,labels_shape,message", [
    ((3,), (3,), "logits must be 2-D"),
    ((3, 4), (3, 1), "labels must be 1-D"),
    ((3, 4), (2,), "same first dimension"),
    ((3, 0), (3,), "at least one class"),
])
def test_sparse_softmax_cross_entropy_with_bad_shapes_is_invalid_argument(
        logits_shape, labels_shape, message):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=message):
        sparse_xent(tf.ones(logits_shape), tf.zeros(labels_shape, tf.int32))[0].numpy()


def assert_gradient_values_match_cpu(fn, *args, **tol):
    # Gradients of these ops are composites (Mul, Sub, Tile, ...) of which some may belong to
    # other op families; the values must match wherever they ran.
    expected = run_on("/CPU:0", gradients_of(fn), *args)
    actual = run_on("/GPU:0", gradients_of(fn), *args)
    for e, a in zip(tf.nest.flatten(expected), tf.nest.flatten(actual)):
        np.testing.assert_allclose(a.numpy(), e.numpy(), **(tol or dict(rtol=1e-5, atol=1e-6)))


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("axes", [None, [1], [0, 2]])
def test_reduction_gradient_matches_cpu(name, axes):
    x = reduction_input(name, (3, 4, 5), np.float32, seed=11)
    assert_gradient_values_match_cpu(lambda t: REDUCTIONS[name](t, axis=axes), x)


@pytest.mark.parametrize("name", sorted(SOFTMAXES))
def test_softmax_gradient_matches_cpu(name):
    x = random_array((4, 9), np.float32, seed=12, low=-5, high=5)
    assert_gradient_values_match_cpu(SOFTMAXES[name], x)


def test_cross_entropy_gradients_match_cpu():
    logits = random_array((5, 6), np.float32, seed=13)
    labels = tf.nn.softmax(random_array((5, 6), np.float32, seed=14)).numpy()
    sparse_labels = np.array([0, 5, 2, 2, 1], np.int64)
    assert_gradient_values_match_cpu(
        lambda l: tf.nn.softmax_cross_entropy_with_logits(labels, l), logits)
    assert_gradient_values_match_cpu(
        lambda l: tf.nn.sparse_softmax_cross_entropy_with_logits(sparse_labels, l), logits)


def test_reduction_kernels_use_descriptors_created_and_destroyed_per_call():
    x = random_array((4, 5), np.float32)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        tf.reduce_sum(x, axis=1).numpy()
        tf.math.argmax(x, axis=1).numpy()
    calls = vgpu.stats()["descriptor_calls"]
    assert calls["reduce"]["create"] == calls["reduce"]["destroy"] == 2
    assert calls["tensor"]["create"] == calls["tensor"]["destroy"] == 4


# --- 16-bit sums accumulate in float (TensorFlow's GPU kernels), scans and top-k. ---

@pytest.mark.parametrize("dtype", [tf.float16, tf.bfloat16], ids=lambda d: d.name)
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_16_bit_sums_accumulate_in_float_like_tensorflow_gpu(dtype, name):
    # Each column: 250 times 60000, then 250 times -60000, plus noise. Partial sums overflow
    # float16 (and swallow the noise in bfloat16) although every result fits: the float32 sum,
    # rounded once, is what TensorFlow's GPU kernel returns.
    rng = np.random.default_rng(0)
    column = np.concatenate([np.full(250, 60000.0), np.full(250, -60000.0)])
    x = (column[:, None] + rng.uniform(0, 4, (500, 6))).astype(np.float32)
    fn = REDUCTIONS[name]
    for data, axes in ((x, None), (x, [0]), (x.T.copy(), [1])):
        rounded = tf.cast(tf.cast(tf.constant(data), dtype), tf.float32)
        expected = tf.cast(fn(rounded, axis=axes), dtype).numpy()
        actual = run_on("/GPU:0", lambda t: fn(tf.cast(t, dtype), axis=axes), data)
        assert actual.dtype == dtype
        values = np.asarray(actual.numpy(), np.float64)
        assert np.all(np.isfinite(values))
        np.testing.assert_allclose(values, np.asarray(expected, np.float64), rtol=1e-2, atol=1)


@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("name", ["sum", "mean"])
def test_sums_over_every_dimension_but_the_last_match_cpu(dtype, name):
    """BatchNormalization's statistics: the columns of [rows, channels] summed in blocks of ~64
    KiB of rows, each into its own partial, then added in order (8x24x24x40: 23 blocks)."""
    x = random_array((8, 24, 24, 40), dtype, seed=21)
    fn = lambda t: REDUCTIONS[name](t, axis=[0, 1, 2])
    first = run_on("/GPU:0", fn, x).numpy()
    np.testing.assert_array_equal(run_on("/GPU:0", fn, x).numpy(), first)  # the same order
    # Against the exact sum of the same values: the accumulation's rounding (float32 for the
    # 16-bit types, as TensorFlow's GPU kernels; TensorFlow-CPU sums float16 in float16) grows
    # with the sum of magnitudes, the result's with its own.
    values = np.asarray(x, np.float64).reshape(-1, 40)
    divisor = values.shape[0] if name == "mean" else 1
    exact = values.sum(axis=0) / divisor
    magnitude = np.abs(values).sum(axis=0) / divisor
    accumulate = 1e-15 if np.dtype(dtype) == np.dtype(np.float64) else 1e-6
    stored = {np.dtype(np.float64): 1e-15, np.dtype(np.float32): 1e-6,
              np.dtype(np.float16): 1e-3}.get(np.dtype(dtype), 8e-3)  # bfloat16: 8e-3
    error = np.abs(np.asarray(first, np.float64) - exact)
    assert np.all(error <= accumulate * magnitude + stored * np.abs(exact)), error


def test_float16_mean_of_many_ones_is_one():
    out = run_on("/GPU:0", lambda t: tf.reduce_mean(t), np.ones((100000,), np.float16))
    assert float(out.numpy()) == 1.0


SCANS = {"cumsum": tf.math.cumsum, "cumprod": tf.math.cumprod}


@pytest.mark.parametrize("name", sorted(SCANS))
@pytest.mark.parametrize("dtype", FLOATING + [np.int32, np.int64])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_matches_cpu(name, dtype, exclusive, reverse):
    for seed, (shape, axis) in enumerate([((17,), 0), ((4, 9), 1), ((4, 9), -2), ((3, 5, 6), 1),
                                          ((2, 0, 3), 2), ((300, 40), 0)]):
        x = random_array(shape, dtype, seed=seed, low=0.5 if name == "cumprod" else -3,
                         high=1.5 if name == "cumprod" else 3)
        if np.dtype(dtype).kind == "i":
            x = random_array(shape, dtype, seed=seed, low=-2, high=2)
        assert_matches_cpu(lambda t: SCANS[name](t, axis=axis, exclusive=exclusive,
                                                 reverse=reverse), x,
                           expect_launch=x.size > 0, **loose_tolerance(dtype))


@pytest.mark.parametrize("name", sorted(SCANS))
def test_scan_gradient_matches_cpu(name):
    x = random_array((5, 8), np.float32, seed=2, low=0.5, high=1.5)
    assert_gradients_match_cpu(lambda t: SCANS[name](t, axis=1), x)
    assert_gradients_match_cpu(lambda t: SCANS[name](t, axis=0, exclusive=True, reverse=True), x)


@pytest.mark.parametrize("axis,match", [
    (2, r"ScanOp: Expected scan axis in the range \[-2, 2\), but got 2"),
    (-3, r"ScanOp: Expected scan axis in the range \[-2, 2\), but got -1"),
    ([0], r"ScanOp: axis must be a scalar, not \[1\]"),
])
def test_scan_with_a_bad_axis_is_invalid_argument(axis, match):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.Cumsum(x=tf.ones([2, 3]), axis=axis)


@pytest.mark.parametrize("dtype", FLOATING + [np.int32, np.int64])
@pytest.mark.parametrize("index_type", [tf.int32, tf.int64], ids=lambda d: d.name)
def test_top_k_matches_cpu_with_ties(dtype, index_type):
    for seed, (shape, k) in enumerate([((9,), 3), ((4, 12), 12), ((2, 3, 50), 5), ((6, 7), 0),
                                       ((0, 5), 2), ((64, 1000), 10)]):
        # Few distinct values: many ties, which keep the lower index first.
        x = random_array(shape, np.int64, seed=seed, low=-4, high=4).astype(dtype)
        assert_matches_cpu(lambda t: tf.raw_ops.TopKV2(input=t, k=k, index_type=index_type), x,
                           expect_launch=x.size > 0 and k > 0, rtol=0, atol=0)


def test_unsorted_top_k_finds_the_cpu_values():
    x = random_array((8, 30), np.float32, seed=4)
    expected = run_on("/CPU:0", lambda t: tf.math.top_k(t, 7, sorted=False), x)
    actual = run_on("/GPU:0", lambda t: tf.math.top_k(t, 7, sorted=False), x)
    np.testing.assert_array_equal(np.sort(actual.values.numpy(), axis=1),
                                  np.sort(expected.values.numpy(), axis=1))


def test_sort_and_argsort_match_cpu():
    x = random_array((5, 40), np.float32, seed=5)
    assert_matches_cpu(lambda t: tf.sort(t, direction="DESCENDING"), x)
    assert_matches_cpu(lambda t: tf.argsort(t, direction="DESCENDING", stable=True), x)


def test_top_k_gradient_matches_cpu():
    x = random_array((4, 10), np.float32, seed=6)
    assert_gradients_match_cpu(lambda t: tf.math.top_k(t, 4).values, x)


@pytest.mark.parametrize("k,shape,match", [
    ([1, 2], (3,), r"k must be scalar, got shape \[2\]"),
    (-1, (3,), "Need k >= 0, got -1"),
    (5, (2, 4), "input must have at least k columns. Had 4, needed 5"),
    (1, (), r"input must be >= 1-D, got shape \[\]"),
])
def test_top_k_with_bad_arguments_is_invalid_argument(k, shape, match):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.TopKV2(input=tf.ones(shape), k=k)


@pytest.mark.parametrize("target_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("k", [0, 1, 2, 5])
def test_in_top_k_matches_cpu(target_dtype, k):
    predictions = random_array((40, 5), np.int64, seed=1, low=0, high=3).astype(np.float32)
    predictions[3, 2] = np.nan
    predictions[7, 0] = np.inf
    targets = random_array((40,), target_dtype, seed=2, low=-1, high=5)  # -1 and 5: out of range
    assert_matches_cpu(lambda p, t: tf.math.in_top_k(t, p, k), predictions, targets)


def test_keras_top_k_accuracy_matches_cpu():
    import keras

    y_true = random_array((30,), np.int32, seed=3, low=0, high=6)
    y_pred = random_array((30, 7), np.float32, seed=4)
    assert_matches_cpu(lambda a, b: keras.metrics.sparse_top_k_categorical_accuracy(a, b, k=3),
                       y_true, y_pred)


@pytest.mark.parametrize("predictions_shape,targets_shape,k,match", [
    ((3,), (3,), 1, "predictions must be 2-dimensional"),
    ((3, 2), (3, 1), 1, "targets must be 1-dimensional"),
    ((3, 2), (2,), 1, "First dimension of predictions 3 must match length of targets 2"),
    ((3, 2), (3,), [1], r"k must be 0-D, got shape \[1\]"),
])
def test_in_top_k_with_bad_arguments_is_invalid_argument(predictions_shape, targets_shape, k,
                                                         match):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.InTopKV2(predictions=tf.ones(predictions_shape),
                            targets=tf.zeros(targets_shape, tf.int32), k=k)
