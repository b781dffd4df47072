"""Fused batch normalization (FusedBatchNormV3 and FusedBatchNormGradV3, V2 and V1) on the
virtual GPU against TensorFlow's CPU kernels: NHWC/NCHW and 5-D layouts, training and
inference, exponential averaging with Bessel's correction, float32 and mixed-precision
float16/bfloat16 data, empty batches, gradients through GradientTape, descriptors per call and
TensorFlow's InvalidArgumentError for bad shapes."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import assert_gradients_match_cpu, assert_matches_cpu, random_array

BF16 = tf.bfloat16.as_numpy_dtype
# Data tolerance by dtype; the float32 statistics of 16-bit data are close but not bit-equal.
DATA_TOLERANCE = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float16: dict(rtol=1e-2, atol=1e-2),
                  BF16: dict(rtol=4e-2, atol=4e-2)}
LAYOUTS = {  # data_format: (shape, channel axis)
    "NHWC": ((4, 5, 6, 3), 3),
    "NCHW": ((4, 3, 5, 6), 1),
    "NDHWC": ((2, 3, 4, 5, 3), 4),
    "NCDHW": ((2, 3, 3, 4, 5), 1),
}


def batch_norm_inputs(data_format, dtype, seed=0):
    shape, axis = LAYOUTS[data_format]
    channels = shape[axis]
    return dict(
        x=random_array(shape, dtype, seed=seed),
        scale=random_array((channels,), np.float32, seed=seed + 1, low=0.5, high=2),
        offset=random_array((channels,), np.float32, seed=seed + 2),
        mean=random_array((channels,), np.float32, seed=seed + 3),
        variance=random_array((channels,), np.float32, seed=seed + 4, low=0.5, high=2),
    )


def forward(inputs, **attrs):
    def run(x, scale, offset, mean, variance):
        outputs = tf.raw_ops.FusedBatchNormV3(x=x, scale=scale, offset=offset, mean=mean,
                                              variance=variance, **attrs)
        # reserve_space_3 is an implementation detail of each kernel; in inference TensorFlow
        # leaves reserve_space_1/2 undefined.
        return outputs[:5] if attrs["is_training"] else outputs[:3]

    return run, [inputs[k] for k in ("x", "scale", "offset", "mean", "variance")]


@pytest.mark.parametrize("data_format", sorted(LAYOUTS))
@pytest.mark.parametrize("is_training", [True, False])
@pytest.mark.parametrize("factor", [1.0, 0.3])
def test_fused_batch_norm_matches_cpu(data_format, is_training, factor):
    inputs = batch_norm_inputs(data_format, np.float32)
    run, args = forward(inputs, epsilon=0.01, exponential_avg_factor=factor,
                        data_format=data_format, is_training=is_training)
    assert_matches_cpu(run, *args, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("is_training", [True, False])
def test_fused_batch_norm_of_16_bit_data_matches_cpu(dtype, is_training):
    inputs = batch_norm_inputs("NHWC", dtype)
    run, args = forward(inputs, epsilon=0.001, data_format="NHWC", is_training=is_training)
    assert_matches_cpu(run, *args, **DATA_TOLERANCE[dtype])


def test_fused_batch_norm_training_without_running_statistics_matches_cpu():
    # What tf.compat.v1.nn.fused_batch_norm passes in training: empty mean and variance.
    inputs = batch_norm_inputs("NCHW", np.float32)
    inputs["mean"] = inputs["variance"] = np.zeros((0,), np.float32)
    run, args = forward(inputs, epsilon=0.001, data_format="NCHW", is_training=True)
    assert_matches_cpu(run, *args, rtol=1e-5, atol=1e-5)


def test_fused_batch_norm_running_variance_uses_bessels_correction():
    x = np.array([1, 2, 3, 6], np.float32).reshape(4, 1, 1, 1)
    with tf.device("/GPU:0"):
        y, running_mean, running_variance, saved_mean, saved_variance, _ = (
            tf.raw_ops.FusedBatchNormV3(x=x, scale=[1.0], offset=[0.0], mean=[0.0],
                                        variance=[1.0], epsilon=0.0, is_training=True))
    assert running_mean.numpy()[0] == pytest.approx(3.0)
    assert saved_variance.numpy()[0] == pytest.approx(3.5)     # biased: 14 / 4
    assert running_variance.numpy()[0] == pytest.approx(14 / 3)  # unbiased: 14 / 3
    np.testing.assert_allclose(y.numpy().ravel(), (x.ravel() - 3) / np.sqrt(3.5), rtol=1e-6)


@pytest.mark.parametrize("is_training", [True, False])
def test_fused_batch_norm_of_an_empty_batch_matches_cpu(is_training):
    inputs = batch_norm_inputs("NHWC", np.float32)
    inputs["x"] = np.zeros((0, 2, 2, 3), np.float32)
    run, args = forward(inputs, epsilon=0.001, data_format="NHWC", is_training=is_training)
    expected = tf.nest.map_structure(lambda t: t.numpy(), run(*args))
    with tf.device("/GPU:0"):
        actual = tf.nest.map_structure(lambda t: t.numpy(), run(*args))
    assert actual[0].shape == (0, 2, 2, 3)
    for a, e in zip(actual[1:3], expected[1:3]):
        np.testing.assert_array_equal(a, e)  # NaN: no statistics from an empty batch


@pytest.mark.parametrize("op", ["FusedBatchNorm", "FusedBatchNormV2"])
def test_older_fused_batch_norm_versions_match_cpu(op):
    inputs = batch_norm_inputs("NHWC", np.float32)

    def run(x, scale, offset, mean, variance):
        return getattr(tf.raw_ops, op)(x=x, scale=scale, offset=offset, mean=mean,
                                       variance=variance, epsilon=0.001, is_training=True)

    assert_matches_cpu(run, *[inputs[k] for k in ("x", "scale", "offset", "mean", "variance")],
                       rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("data_format", ["NHWC", "NCHW", "NCDHW"])
@pytest.mark.parametrize("is_training", [True, False])
def test_fused_batch_norm_gradients_match_cpu(data_format, is_training):
    inputs = batch_norm_inputs(data_format, np.float32, seed=5)

    def y_of(x, scale, offset):
        return tf.compat.v1.nn.fused_batch_norm(
            x, scale, offset, mean=None if is_training else inputs["mean"],
            variance=None if is_training else inputs["variance"], epsilon=0.01,
            data_format=data_format, is_training=is_training)[0]

    assert_gradients_match_cpu(y_of, inputs["x"], inputs["scale"], inputs["offset"],
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16],
                         ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("is_training", [True, False])
def test_fused_batch_norm_grad_matches_cpu(dtype, is_training):
    inputs = batch_norm_inputs("NHWC", dtype, seed=7)
    dy = random_array(inputs["x"].shape, dtype, seed=8)

    def grad(dy, x, scale, mean, variance):
        return tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=dy, x=x, scale=scale, reserve_space_1=mean, reserve_space_2=variance,
            reserve_space_3=tf.zeros([0]), epsilon=0.01, is_training=is_training)[:3]

    tolerance = dict(rtol=1e-4, atol=1e-4) if dtype == np.float32 else DATA_TOLERANCE[dtype]
    if dtype != np.float32:
        tolerance = dict(rtol=tolerance["rtol"] * 5, atol=tolerance["atol"] * 5)  # sums of 16-bit
    assert_matches_cpu(grad, dy, inputs["x"], inputs["scale"], inputs["mean"], inputs["variance"],
                       **tolerance)


def test_fused_batch_norm_grad_of_an_empty_batch_is_zero():
    empty = np.zeros((0, 3, 3, 2), np.float32)
    with tf.device("/GPU:0"):
        dx, dscale, doffset, _, _ = tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=empty, x=empty, scale=[1.0, 2.0], reserve_space_1=[0.0, 0.0],
            reserve_space_2=[1.0, 1.0], reserve_space_3=tf.zeros([0]), is_training=True)
    assert dx.shape == (0, 3, 3, 2)
    np.testing.assert_array_equal(dscale.numpy(), [0, 0])
    np.testing.assert_array_equal(doffset.numpy(), [0, 0])


def test_fused_batch_norm_uses_two_tensor_descriptors_per_call():
    inputs = batch_norm_inputs("NHWC", np.float32)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        tf.raw_ops.FusedBatchNormV3(**inputs, epsilon=0.001, is_training=True)[0].numpy()
    calls = vgpu.stats()["descriptor_calls"]["tensor"]
    assert calls["create"] == calls["set"] == calls["destroy"] == 2


@pytest.mark.parametrize("change,match", [
    (dict(x=np.zeros((2, 3, 4), np.float32)), r"input must be 4(?: or 5)?-dimensional\[2,3,4\]"),
    (dict(scale=np.ones((4,), np.float32)),
     "scale must have the same number of elements as the channels of x, got 4 and 3"),
    (dict(offset=np.ones((1, 3), np.float32)), r"offset must be 1-dimensional\[1,3\]"),
    (dict(mean=np.ones((2,), np.float32)),
     "When is_training=false, mean must have the same number of elements"),
])
def test_fused_batch_norm_bad_shapes_are_invalid_argument(change, match):
    inputs = batch_norm_inputs("NHWC", np.float32)
    inputs.update(change)
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device), pytest.raises(tf.errors.InvalidArgumentError, match=match):
            tf.raw_ops.FusedBatchNormV3(**inputs, epsilon=0.001, is_training=False)


def test_fused_batch_norm_grad_with_mismatched_shapes_is_invalid_argument():
    x = np.zeros((2, 3, 4, 5), np.float32)
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="x and y_backprop must have same shape"):
        tf.raw_ops.FusedBatchNormGradV3(
            y_backprop=x[:1], x=x, scale=np.ones(5, np.float32),
            reserve_space_1=np.zeros(5, np.float32), reserve_space_2=np.ones(5, np.float32),
            reserve_space_3=tf.zeros([0]), is_training=True)
