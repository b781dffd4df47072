"""The plugin's graph rewrites (docs/graph_fusions.md). ReluGrad(MaxPoolGrad(x, y, dy), x) in a
graph on the virtual GPU becomes one _VgpuMaxPoolGradWithReluGrad kernel; a MaxPool whose output
a MaxPoolGrad (or that fusion) reads, over windows that tile the input, becomes
_VgpuMaxPoolWithWindowIndex and gives the gradient a byte per window instead of x. Results must
be bit for bit what the ops give run one after the other on the virtual GPU (eagerly, where
Grappler does not run), and match TensorFlow's CPU kernels; graphs where a rewrite does not
apply (the pooling gradient read elsewhere or fetched, other features, overlapping windows, NaN
propagation, the CPU) are left alone; VGPU_GRAPH_FUSIONS=0 turns the rewrites off; a Keras CNN
trains to the same losses with one launch fewer per step; the new ops refuse bad shapes."""
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2

import vgpu
from ops.op_testing import BF16, random_array, tolerance

PROBE = os.path.join(os.path.dirname(__file__), "training_probe.py")
FUSED_OP = "_VgpuMaxPoolGradWithReluGrad"
# vgpu.stats()["graph_fusions"] of a process that fused nothing.
NO_FUSIONS = {"max_pool_grad_relu_grad": 0, "max_pool_window_index": 0,
              "conv_bias_activation": 0, "matmul_bias_activation": 0, "cast_from_host": 0,
              "copy_from_host": 0, "sign_bit": 0, "cast_to_int32_on_host": 0}


def fusions():
    return vgpu.stats()["graph_fusions"]["max_pool_grad_relu_grad"]


def window_indexes():
    return vgpu.stats()["graph_fusions"]["max_pool_window_index"]


def relu_pool_gradient(ksize, strides, padding, data_format="NHWC"):
    """A function of (pre-activation x, dy): ReluGrad(MaxPoolGrad(relu(x), y, dy), relu(x)),
    the backward pass of relu followed by max pooling, written with the raw ops."""
    window = [1, ksize, ksize, 1] if data_format == "NHWC" else [1, 1, ksize, ksize]
    steps = [1, strides, strides, 1] if data_format == "NHWC" else [1, 1, strides, strides]

    def gradient(x, dy):
        r = tf.nn.relu(x)
        y = tf.nn.max_pool(r, window, steps, padding, data_format=data_format)
        g = tf.raw_ops.MaxPoolGrad(orig_input=r, orig_output=y, grad=dy, ksize=window,
                                   strides=steps, padding=padding, data_format=data_format)
        return tf.raw_ops.ReluGrad(gradients=g, features=r)

    return gradient


def inputs(x_shape, dy_shape, dtype, seed, nan_in_x=True):
    """x with zeros, negatives and (`nan_in_x`) a NaN; dy with negatives and a NaN."""
    x = random_array(x_shape, np.float32, seed=seed)
    x[x > 1.5] = 0  # whole windows of zeros after the relu
    if nan_in_x:
        x.flat[3] = np.nan
    dy = random_array(dy_shape, np.float32, seed=seed + 1)
    dy.flat[1] = np.nan
    return x.astype(dtype), dy.astype(dtype)


# (x shape, ksize, strides, padding, format): windows that tile the input (the common 2x2
# pooling) and overlapping windows with padding, channels last and first.
GEOMETRIES = [
    ((2, 8, 8, 3), 2, 2, "VALID", "NHWC"),
    ((2, 9, 7, 4), 3, 2, "SAME", "NHWC"),
    ((2, 3, 8, 6), 2, 2, "VALID", "NCHW"),
    ((1, 2, 9, 9), 3, 2, "SAME", "NCHW"),
]


def pooled_shape(x_shape, ksize, strides, padding, data_format):
    spatial = x_shape[1:3] if data_format == "NHWC" else x_shape[2:4]
    out = [(n - ksize) // strides + 1 if padding == "VALID" else -(-n // strides)
           for n in spatial]
    return ((x_shape[0], *out, x_shape[3]) if data_format == "NHWC"
            else (x_shape[0], x_shape[1], *out))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
@pytest.mark.parametrize("x_shape,ksize,strides,padding,data_format", GEOMETRIES)
def test_the_fused_kernel_gives_the_two_ops_results_bit_for_bit(dtype, x_shape, ksize, strides,
                                                               padding, data_format):
    gradient = relu_pool_gradient(ksize, strides, padding, data_format)
    x, dy = inputs(x_shape, pooled_shape(x_shape, ksize, strides, padding, data_format), dtype,
                   seed=x_shape[1] + ksize)
    with tf.device("/GPU:0"):
        before = fusions()
        fused = tf.function(gradient)(tf.constant(x), tf.constant(dy))
        assert fusions() == before + 1
        one_after_the_other = gradient(tf.constant(x), tf.constant(dy))  # eager: not fused
    assert fused.device.endswith("GPU:0")
    np.testing.assert_array_equal(fused.numpy(), one_after_the_other.numpy())
    assert np.isnan(fused.numpy().astype(np.float32)).any()  # the NaN gradient went through
    if data_format == "NHWC":
        # Against TensorFlow's CPU kernels (channels-last only), with no NaN in x: the virtual
        # GPU's max pooling skips NaNs as cuDNN does, where TensorFlow's CPU kernels differ
        # (docs/ops.md).
        x, dy = inputs(x_shape, pooled_shape(x_shape, ksize, strides, padding, data_format),
                       dtype, seed=x_shape[1] + ksize, nan_in_x=False)
        with tf.device("/GPU:0"):
            fused = tf.function(gradient)(tf.constant(x), tf.constant(dy))
        with tf.device("/CPU:0"):
            expected = gradient(tf.constant(x), tf.constant(dy))
        np.testing.assert_allclose(fused.numpy().astype(np.float64),
                                   expected.numpy().astype(np.float64), **tolerance(dtype))


def test_the_gradient_of_conv_relu_max_pool_is_fused_and_matches_cpu():
    x = random_array((4, 10, 10, 3), np.float32, seed=1)
    w = random_array((3, 3, 3, 6), np.float32, seed=2)

    def loss_gradients(x, w):
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            r = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME"))
            p = tf.nn.max_pool2d(r, 2, 2, "VALID")
            loss = tf.reduce_sum(p * p)
        return tape.gradient(loss, [x, w])

    with tf.device("/CPU:0"):
        expected = loss_gradients(tf.constant(x), tf.constant(w))
    with tf.device("/GPU:0"):
        before = fusions()
        actual = tf.function(loss_gradients)(tf.constant(x), tf.constant(w))
        assert fusions() == before + 1
    for a, e in zip(actual, expected):
        np.testing.assert_allclose(a.numpy(), e.numpy(), rtol=1e-4, atol=1e-3)


def pool_and_gradient(ksize, data_format):
    """A function of (x, dy): MaxPool(x) over VALID ksize x ksize windows with strides ksize, and
    MaxPoolGrad(x, that output, dy), written with the raw ops."""
    window = [1, ksize, ksize, 1] if data_format == "NHWC" else [1, 1, ksize, ksize]

    def both(x, dy):
        y = tf.nn.max_pool(x, window, window, "VALID", data_format=data_format)
        g = tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy, ksize=window,
                                   strides=window, padding="VALID", data_format=data_format)
        return y, g

    return both


# (x shape, ksize, format): windows that cover the input, windows that leave its last rows and
# columns out, 3x3 windows, more channels than the CPU kernels' block of 64, channels first.
TILING_GEOMETRIES = [
    ((2, 8, 8, 3), 2, "NHWC"),
    ((2, 9, 7, 4), 2, "NHWC"),
    ((1, 7, 8, 70), 3, "NHWC"),
    ((2, 3, 9, 6), 2, "NCHW"),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16])
@pytest.mark.parametrize("x_shape,ksize,data_format", TILING_GEOMETRIES)
def test_a_max_pool_gives_its_gradient_a_window_index_with_the_same_bits(dtype, x_shape, ksize,
                                                                        data_format):
    both = pool_and_gradient(ksize, data_format)
    x, dy = inputs(x_shape, pooled_shape(x_shape, ksize, ksize, "VALID", data_format), dtype,
                   seed=x_shape[2] + ksize)
    x.flat[5] = -np.inf
    with tf.device("/GPU:0"):
        before = window_indexes()
        y, g = tf.function(both)(tf.constant(x), tf.constant(dy))
        assert window_indexes() == before + 1
        eager_y, eager_g = both(tf.constant(x), tf.constant(dy))  # eager: reads x again
    np.testing.assert_array_equal(y.numpy(), eager_y.numpy())
    np.testing.assert_array_equal(g.numpy(), eager_g.numpy())
    assert np.isnan(g.numpy().astype(np.float32)).any()  # the NaN gradient went through


@pytest.mark.parametrize("dtype", [np.float16, BF16])
def test_a_16_bit_window_of_minus_infinity_pools_to_the_types_lowest_value(dtype):
    # 16-bit window-index kernels run the float32 kernel on float32 copies, which raises such a
    # window to float32's lowest value; the result must be the 16-bit type's, as the device's
    # MaxPool gives (TensorFlow's rule in its Eigen pooling, max(lowest, window)).
    both = pool_and_gradient(2, "NHWC")
    x, dy = inputs((1, 4, 4, 9), pooled_shape((1, 4, 4, 9), 2, 2, "VALID", "NHWC"), dtype,
                   seed=3, nan_in_x=False)
    x[0, :2, :2, :] = -np.inf  # the first window of every channel
    with tf.device("/GPU:0"):
        before = window_indexes()
        y, g = tf.function(both)(tf.constant(x), tf.constant(dy))
        assert window_indexes() == before + 1
        eager_y, eager_g = both(tf.constant(x), tf.constant(dy))  # eager: reads x again
    lowest = tf.as_dtype(dtype).min
    np.testing.assert_array_equal(y.numpy()[0, 0, 0].astype(np.float32),
                                  np.full(9, lowest, np.float32))
    np.testing.assert_array_equal(y.numpy(), eager_y.numpy())
    np.testing.assert_array_equal(g.numpy(), eager_g.numpy())


def test_two_gradients_of_one_pool_share_its_index_and_one_of_another_input_reads_x():
    window = [1, 2, 2, 1]

    def gradients(x, other, dy1, dy2):
        y = tf.nn.max_pool(x, window, window, "VALID")
        return [tf.raw_ops.MaxPoolGrad(orig_input=orig, orig_output=y, grad=dy, ksize=window,
                                       strides=window, padding="VALID")
                for orig, dy in ((x, dy1), (x, dy2), (other, dy1))]

    x, dy1 = inputs((2, 6, 6, 3), (2, 3, 3, 3), np.float32, seed=15)
    other, dy2 = inputs((2, 6, 6, 3), (2, 3, 3, 3), np.float32, seed=16)
    args = [tf.constant(a) for a in (x, other, dy1, dy2)]
    with tf.device("/GPU:0"):
        before = window_indexes()
        actual = tf.function(gradients)(*args)
        assert window_indexes() == before + 2  # not the one whose orig_input is `other`
        expected = gradients(*args)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a.numpy(), e.numpy())


def test_overlapping_or_padded_windows_get_no_window_index():
    def same_and_overlapping(x, dy_same, dy_overlapping):
        grads = []
        for ksize, strides, padding, dy in ((2, 2, "SAME", dy_same),
                                            (3, 2, "VALID", dy_overlapping)):
            window, steps = [1, ksize, ksize, 1], [1, strides, strides, 1]
            y = tf.nn.max_pool(x, window, steps, padding)
            grads.append(tf.raw_ops.MaxPoolGrad(orig_input=x, orig_output=y, grad=dy,
                                                ksize=window, strides=steps, padding=padding))
        return grads

    x, dy_same = inputs((1, 7, 7, 2), (1, 4, 4, 2), np.float32, seed=11)
    dy_overlapping = random_array((1, 3, 3, 2), np.float32, seed=12)
    args = [tf.constant(a) for a in (x, dy_same, dy_overlapping)]
    with tf.device("/GPU:0"):
        before = window_indexes()
        actual = tf.function(same_and_overlapping)(*args)
        assert window_indexes() == before
        expected = same_and_overlapping(*args)
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a.numpy(), e.numpy())


def test_a_pooling_gradient_read_elsewhere_is_not_fused():
    gradient = relu_pool_gradient(2, 2, "VALID")

    def both(x, dy):
        r = tf.nn.relu(x)
        y = tf.nn.max_pool2d(r, 2, 2, "VALID")
        g = tf.raw_ops.MaxPoolGrad(orig_input=r, orig_output=y, grad=dy, ksize=[1, 2, 2, 1],
                                   strides=[1, 2, 2, 1], padding="VALID")
        return g, tf.raw_ops.ReluGrad(gradients=g, features=r)

    x, dy = inputs((1, 4, 4, 2), (1, 2, 2, 2), np.float32, seed=3)
    with tf.device("/GPU:0"):
        before = fusions()
        g, through_relu = tf.function(both)(tf.constant(x), tf.constant(dy))
        assert fusions() == before
        np.testing.assert_array_equal(through_relu.numpy(),
                                      gradient(tf.constant(x), tf.constant(dy)).numpy())
    assert g.numpy().shape == x.shape


def test_a_fetched_pooling_gradient_is_not_fused():
    graph = tf.Graph()
    with graph.as_default():
        x = tf.compat.v1.placeholder(tf.float32, (1, 4, 4, 2))
        dy = tf.compat.v1.placeholder(tf.float32, (1, 2, 2, 2))
        with tf.device("/GPU:0"):
            r = tf.nn.relu(x)
            y = tf.nn.max_pool2d(r, 2, 2, "VALID")
            g = tf.raw_ops.MaxPoolGrad(orig_input=r, orig_output=y, grad=dy, ksize=[1, 2, 2, 1],
                                       strides=[1, 2, 2, 1], padding="VALID")
            through_relu = tf.raw_ops.ReluGrad(gradients=g, features=r)
    x_value, dy_value = inputs((1, 4, 4, 2), (1, 2, 2, 2), np.float32, seed=9)
    feed = {x: x_value, dy: dy_value}
    with tf.compat.v1.Session(graph=graph) as session:
        before = fusions()
        alone = session.run(through_relu, feed)
        assert fusions() == before + 1  # only the ReLU gradient fetched: fused
        g_value, beside_g = session.run([g, through_relu], feed)
        assert fusions() == before + 1  # the pooling gradient fetched too: kept
    np.testing.assert_array_equal(alone, beside_g)
    assert g_value.shape == x_value.shape


def test_relu_features_other_than_the_pooled_input_are_not_fused():
    def other_features(x, dy, features):
        r = tf.nn.relu(x)
        y = tf.nn.max_pool2d(r, 2, 2, "VALID")
        g = tf.raw_ops.MaxPoolGrad(orig_input=r, orig_output=y, grad=dy, ksize=[1, 2, 2, 1],
                                   strides=[1, 2, 2, 1], padding="VALID")
        return tf.raw_ops.ReluGrad(gradients=g, features=features)

    x, dy = inputs((1, 4, 4, 2), (1, 2, 2, 2), np.float32, seed=4)
    features = random_array(x.shape, np.float32, seed=5)
    args = [tf.constant(a) for a in (x, dy, features)]
    with tf.device("/GPU:0"):
        before = fusions()
        actual = tf.function(other_features)(*args)
        assert fusions() == before
    with tf.device("/CPU:0"):
        expected = other_features(*args)
    np.testing.assert_allclose(actual.numpy(), expected.numpy(), rtol=1e-6, atol=1e-6)


def test_graphs_on_the_cpu_are_not_fused():
    gradient = relu_pool_gradient(2, 2, "VALID")
    x, dy = inputs((1, 4, 4, 2), (1, 2, 2, 2), np.float32, seed=6)
    with tf.device("/CPU:0"):
        before = fusions()
        tf.function(gradient)(tf.constant(x), tf.constant(dy)).numpy()
        assert fusions() == before


def _attr_list(values):
    return attr_value_pb2.AttrValue(list=attr_value_pb2.AttrValue.ListValue(i=values))


def _run_fused_op(x, y, dy):
    """Runs the fused op itself (as a graph that names it directly) on the virtual GPU."""
    graph = tf.Graph()
    with graph.as_default(), tf.device("/GPU:0"):
        tensors = [tf.constant(a) for a in (x, y, dy)]
        op = graph.create_op(FUSED_OP, tensors, [tf.float32], name="fused", attrs={
            "T": attr_value_pb2.AttrValue(type=tf.float32.as_datatype_enum),
            "ksize": _attr_list([1, 2, 2, 1]), "strides": _attr_list([1, 2, 2, 1]),
            "padding": attr_value_pb2.AttrValue(s=b"VALID")})
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run(op.outputs[0])


def test_the_fused_op_refuses_a_gradient_of_the_wrong_shape():
    x = np.maximum(random_array((1, 4, 4, 2), np.float32, seed=7), 0)
    y = np.zeros((1, 2, 2, 2), np.float32)
    assert _run_fused_op(x, y, np.ones((1, 2, 2, 2), np.float32)).shape == x.shape
    with pytest.raises(tf.errors.InvalidArgumentError):
        _run_fused_op(x, y, np.ones((1, 3, 2, 2), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError):
        _run_fused_op(x[0], y, np.ones((1, 2, 2, 2), np.float32))


def _run_window_index_ops(x, dy, padding="VALID", index_shape=None):
    """Runs _VgpuMaxPoolWithWindowIndex then _VgpuMaxPoolGradFromWindowIndex, named directly in
    a graph, on the virtual GPU; `index_shape` reshapes the index between them."""
    graph = tf.Graph()
    window = {"T": attr_value_pb2.AttrValue(type=tf.float32.as_datatype_enum),
              "ksize": _attr_list([1, 2, 2, 1]), "strides": _attr_list([1, 2, 2, 1]),
              "padding": attr_value_pb2.AttrValue(s=padding.encode())}
    with graph.as_default(), tf.device("/GPU:0"):
        x_tensor, dy_tensor = tf.constant(x), tf.constant(dy)
        pool = graph.create_op("_VgpuMaxPoolWithWindowIndex", [x_tensor],
                               [tf.float32, tf.uint8], name="pool", attrs=window)
        index = pool.outputs[1]
        if index_shape is not None:
            index = tf.reshape(index, index_shape)
        grad = graph.create_op("_VgpuMaxPoolGradFromWindowIndex", [x_tensor, index, dy_tensor],
                               [tf.float32], name="grad", attrs=window)
    with tf.compat.v1.Session(graph=graph) as session:
        return session.run([pool.outputs[0], pool.outputs[1], grad.outputs[0]])


def test_the_window_index_ops_refuse_what_they_cannot_take():
    x = random_array((1, 4, 4, 2), np.float32, seed=13)
    dy = np.ones((1, 2, 2, 2), np.float32)
    y, index, dx = _run_window_index_ops(x, dy)
    assert y.shape == dy.shape and index.dtype == np.uint8 and dx.shape == x.shape
    with pytest.raises(tf.errors.InvalidArgumentError, match="window_index"):
        _run_window_index_ops(x, dy, index_shape=(1, 4, 2))
    with pytest.raises(tf.errors.InvalidArgumentError, match="tile the input"):
        _run_window_index_ops(random_array((1, 5, 5, 2), np.float32, seed=14),
                              np.ones((1, 3, 3, 2), np.float32), padding="SAME")


FUSABLE_GRAPH = """
import hashlib, json
import numpy as np, tensorflow as tf, vgpu
rng = np.random.default_rng(8)
x = tf.constant(rng.uniform(-1, 1, (2, 8, 8, 4)).astype(np.float32))
dy = tf.constant(rng.uniform(-1, 1, (2, 4, 4, 4)).astype(np.float32))
@tf.function
def gradient(x, dy):
    r = tf.nn.relu(x)
    y = tf.nn.max_pool2d(r, 2, 2, "VALID")
    g = tf.raw_ops.MaxPoolGrad(orig_input=r, orig_output=y, grad=dy, ksize=[1, 2, 2, 1],
                               strides=[1, 2, 2, 1], padding="VALID")
    return tf.raw_ops.ReluGrad(gradients=g, features=r)
with tf.device("/GPU:0"):
    result = gradient(x, dy).numpy()
print("PROBE " + json.dumps({"fusions": vgpu.stats()["graph_fusions"],
                             "sha": hashlib.sha256(result.tobytes()).hexdigest()}))
"""


def test_vgpu_graph_fusions_0_turns_the_fusions_off_without_changing_results():
    from conftest import run_probe  # noqa: PLC0415

    fused = run_probe(FUSABLE_GRAPH)
    plain = run_probe(FUSABLE_GRAPH, env={"VGPU_GRAPH_FUSIONS": "0"})
    assert fused["fusions"] == dict(NO_FUSIONS, max_pool_grad_relu_grad=1,
                                    max_pool_window_index=1)
    assert plain["fusions"] == NO_FUSIONS
    assert fused["sha"] == plain["sha"]


def test_nan_propagation_leaves_max_pooling_without_a_window_index():
    from conftest import run_probe  # noqa: PLC0415

    propagating = run_probe(FUSABLE_GRAPH, env={"TF_ENABLE_MAXPOOL_NANPROP": "1"})
    plain = run_probe(FUSABLE_GRAPH, env={"TF_ENABLE_MAXPOOL_NANPROP": "1",
                                          "VGPU_GRAPH_FUSIONS": "0"})
    assert propagating["fusions"] == dict(NO_FUSIONS, max_pool_grad_relu_grad=1)
    assert propagating["sha"] == plain["sha"]


def test_a_bad_graph_fusions_value_is_refused_naming_the_variable():
    from conftest import declined_info  # noqa: PLC0415

    info = declined_info({"VGPU_GRAPH_FUSIONS": "yes"})
    assert "VGPU_GRAPH_FUSIONS" in info["declined"]


def _train(env):
    from conftest import run_probe  # noqa: PLC0415

    return run_probe(f"import runpy, sys; sys.argv = [{PROBE!r}, 'gpu']; "
                     f"runpy.run_path({PROBE!r}, run_name='__main__')", env=env)


def test_a_keras_cnn_trains_to_the_same_losses_with_one_launch_fewer_per_step():
    fused = _train({})
    plain = _train({"VGPU_GRAPH_FUSIONS": "0"})
    assert fused["losses"] == plain["losses"]
    # The probe's model has one Conv2D(relu) + MaxPooling2D pair: its training function's
    # backward pass loses one launch a step (the ReluGrad).
    assert fused["graph_fusions"]["max_pool_grad_relu_grad"] >= 1
    assert fused["graph_fusions"]["max_pool_window_index"] >= 1  # 2x2 VALID pooling
    assert plain["graph_fusions"] == NO_FUSIONS
    fused_launches = [step["launches"] for step in fused["steps"]]
    plain_launches = [step["launches"] for step in plain["steps"]]
    assert [p - f for f, p in zip(fused_launches, plain_launches)] == [1] * len(plain_launches)
