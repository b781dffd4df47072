"""The plugin's bfloat16 bias-and-activation rewrite (docs/graph_fusions.md): in a graph on the
virtual GPU, Conv2D -> BiasAdd (-> Relu/Relu6) becomes one _VgpuFusedConv2D launch and
MatMul -> BiasAdd (-> Relu/Relu6) one _FusedMatMul launch, as Grappler's remapper fuses float32
and half on a GPU and TensorFlow-CPU fuses bfloat16. The fused kernel rounds to bfloat16 once:
results are checked against the float32 computation of the same chain (within bfloat16's
rounding) and against TensorFlow-CPU's. Chains the rewrite must leave alone (an intermediate read
elsewhere or fetched, a bias along another dimension, float32) keep their ops, and a Keras model
under mixed_bfloat16 trains with the fusions to TensorFlow-CPU's losses."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import BF16, random_array, run_on

# Within bfloat16's rounding of a float32 result (8 significant bits: 2^-8 relative, twice for
# the float32 sums' own order), plus a little for values that cancel to near 0.
BF16_ROUNDING = dict(rtol=2.0**-7, atol=2e-2)
ACTIVATIONS = {"relu": tf.nn.relu, "relu6": tf.nn.relu6, "none": lambda t: t}


def counts():
    fusions = vgpu.stats()["graph_fusions"]
    return fusions["conv_bias_activation"], fusions["matmul_bias_activation"]


def conv_chain(activation, data_format="NHWC", bias_format=None):
    def chain(x, w, b):
        y = tf.nn.conv2d(x, w, 1, "SAME", data_format=data_format)
        return ACTIVATIONS[activation](tf.nn.bias_add(y, b, data_format=bias_format or data_format))

    return chain


def matmul_chain(activation, transpose_b=False):
    def chain(a, w, b):
        return ACTIVATIONS[activation](tf.nn.bias_add(tf.matmul(a, w, transpose_b=transpose_b), b))

    return chain


def on_gpu_graph(fn, *args):
    """fn(*args) as a tf.function on the virtual GPU (where Grappler and the plugin's optimizer
    run), and how many conv / matmul chains the optimizer fused meanwhile."""
    before = counts()
    with tf.device("/GPU:0"):
        result = tf.function(fn)(*[tf.constant(a) for a in args]).numpy()
    after = counts()
    return result, (after[0] - before[0], after[1] - before[1])


def float32_reference(fn, *args):
    """The chain in float32 on TensorFlow's CPU kernels (NCHW convolutions through transposes,
    which the CPU's Conv2D lacks), rounded to bfloat16 at the end."""
    return run_on("/CPU:0", fn, *[a.astype(np.float32) for a in args]).numpy().astype(BF16)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_a_bfloat16_conv_bias_activation_chain_is_one_fused_launch(activation):
    x = random_array((2, 9, 7, 5), BF16, seed=1)
    w = random_array((3, 3, 5, 8), BF16, seed=2, low=-0.5, high=0.5)
    b = random_array((8,), BF16, seed=3)
    chain = conv_chain(activation)
    before = vgpu.stats()["launches"]
    fused, (conv, matmul) = on_gpu_graph(chain, x, w, b)
    assert (conv, matmul) == (1, 0)
    assert vgpu.stats()["launches"] - before == 1  # the chain's three ops in one launch
    np.testing.assert_allclose(fused.astype(np.float32),
                               float32_reference(chain, x, w, b).astype(np.float32),
                               **BF16_ROUNDING)
    cpu = run_on("/CPU:0", tf.function(chain), x, w, b).numpy()  # TensorFlow-CPU, fused too
    np.testing.assert_allclose(fused.astype(np.float32), cpu.astype(np.float32), **BF16_ROUNDING)
    if activation != "none":
        assert fused.astype(np.float32).min() >= 0
    if activation == "relu6":
        assert fused.astype(np.float32).max() <= 6


def test_a_channels_first_chain_is_fused_with_its_bias_along_the_channels():
    x = random_array((2, 4, 6, 6), BF16, seed=4)
    w = random_array((3, 3, 4, 3), BF16, seed=5, low=-0.5, high=0.5)
    b = random_array((3,), BF16, seed=6)
    fused, (conv, _) = on_gpu_graph(conv_chain("relu", "NCHW"), x, w, b)
    assert conv == 1
    to_nhwc = lambda t: np.transpose(t, (0, 2, 3, 1))
    expected = float32_reference(conv_chain("relu"), to_nhwc(x), w, b)
    np.testing.assert_allclose(to_nhwc(fused).astype(np.float32), expected.astype(np.float32),
                               **BF16_ROUNDING)


@pytest.mark.parametrize("activation,transpose_b", [("relu", False), ("relu6", True),
                                                    ("none", False)])
def test_a_bfloat16_matmul_bias_activation_chain_becomes_fused_matmul(activation, transpose_b):
    a = random_array((7, 33), BF16, seed=7)
    w = random_array((20, 33) if transpose_b else (33, 20), BF16, seed=8, low=-0.5, high=0.5)
    b = random_array((20,), BF16, seed=9)
    chain = matmul_chain(activation, transpose_b)
    fused, (conv, matmul) = on_gpu_graph(chain, a, w, b)
    assert (conv, matmul) == (0, 1)
    np.testing.assert_allclose(fused.astype(np.float32),
                               float32_reference(chain, a, w, b).astype(np.float32),
                               **BF16_ROUNDING)


def test_an_intermediate_read_elsewhere_or_fetched_keeps_its_op():
    x = random_array((1, 6, 6, 3), BF16, seed=10)
    w = random_array((3, 3, 3, 4), BF16, seed=11, low=-0.5, high=0.5)
    b = random_array((4,), BF16, seed=12)

    def conv_also_fetched(x, w, b):
        y = tf.nn.conv2d(x, w, 1, "SAME")
        return tf.nn.relu(tf.nn.bias_add(y, b)), y

    def sum_also_read(x, w, b):
        s = tf.nn.bias_add(tf.nn.conv2d(x, w, 1, "SAME"), b)
        return tf.nn.relu(s) + s * 2

    for fn, fused_chains in ((conv_also_fetched, 0), (sum_also_read, 1)):
        before = counts()[0]
        with tf.device("/GPU:0"):
            outputs = tf.nest.flatten(tf.function(fn)(*map(tf.constant, (x, w, b))))
        # The sum read twice still takes the convolution in (Conv2D + BiasAdd), not the ReLU.
        assert counts()[0] - before == fused_chains, fn.__name__
        expected = tf.nest.flatten(run_on("/CPU:0", fn, *(t.astype(np.float32) for t in (x, w, b))))
        for got, want in zip(outputs, expected):
            np.testing.assert_allclose(got.numpy().astype(np.float32), want.numpy(),
                                       **BF16_ROUNDING)


def test_a_bias_along_another_dimension_and_float32_chains_are_left_alone():
    # Conv2D NHWC with a channels-first BiasAdd adds the bias along dimension 1, not the
    # convolution's channels: not the fused op's computation.
    x = random_array((2, 3, 5, 3), BF16, seed=13)
    w = random_array((1, 1, 3, 3), BF16, seed=14)
    b = random_array((3,), BF16, seed=15)
    crossed, (conv, _) = on_gpu_graph(conv_chain("relu", "NHWC", bias_format="NCHW"), x, w, b)
    assert conv == 0
    np.testing.assert_allclose(
        crossed.astype(np.float32),
        float32_reference(conv_chain("relu", "NHWC", bias_format="NCHW"), x, w, b)
        .astype(np.float32), **BF16_ROUNDING)
    # float32 is Grappler's remapper's to fuse (into _FusedConv2D), not this rewrite's.
    _, (conv, matmul) = on_gpu_graph(conv_chain("relu"), *(t.astype(np.float32) for t in (x, w, b)))
    assert (conv, matmul) == (0, 0)


def test_a_keras_model_under_mixed_bfloat16_trains_fused_to_tensorflow_cpus_losses():
    from conftest import run_probe  # noqa: PLC0415

    script = """
import json, sys
import numpy as np, tensorflow as tf, keras
if sys.argv[1] == "cpu":
    tf.config.set_visible_devices([], "GPU")
keras.mixed_precision.set_global_policy("mixed_bfloat16")
keras.utils.set_random_seed(0)
L = keras.layers
model = keras.Sequential([keras.Input((12, 12, 2)), L.Conv2D(8, 3, activation="relu"),
                          L.MaxPooling2D(), L.Conv2D(8, 3, padding="same", activation="relu6"),
                          L.Flatten(), L.Dense(16, activation="relu"), L.Dense(4),
                          L.Activation("linear", dtype="float32")])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              jit_compile=False)
rng = np.random.default_rng(0)
x = rng.normal(size=(64, 12, 12, 2)).astype("float32")
y = rng.integers(0, 4, 64)
losses = model.fit(x, y, batch_size=16, epochs=3, verbose=0, shuffle=False).history["loss"]
fusions = {}
if sys.argv[1] == "gpu":
    import vgpu
    fusions = vgpu.stats()["graph_fusions"]
print("PROBE " + json.dumps({"losses": losses, "fusions": fusions}))
"""
    gpu = run_probe(f"import sys; sys.argv = ['probe', 'gpu']\n{script}")
    cpu = run_probe(f"import sys; sys.argv = ['probe', 'cpu']\n{script}")
    assert gpu["fusions"]["conv_bias_activation"] >= 2  # both convolutions of the train step
    assert gpu["fusions"]["matmul_bias_activation"] >= 2  # both dense layers
    np.testing.assert_allclose(gpu["losses"], cpu["losses"], rtol=2e-2)
    assert gpu["losses"][-1] < gpu["losses"][0]
