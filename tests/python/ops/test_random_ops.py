"""The stateless random ops (uniform, normal, truncated normal, uniform integers, full-range
integers) and StatelessRandomGetKeyCounter on the virtual GPU produce exactly TensorFlow's CPU
numbers (Philox with TensorFlow's key/counter layout, conversions and block assignment) in every
dtype, for odd sizes and counters that carry across words, through tf.random.stateless_*,
Keras' initializers, Dropout and GaussianNoise; bad inputs are TensorFlow's
InvalidArgumentError."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import assert_matches_cpu

FLOATING = [tf.float32, tf.float64, tf.float16, tf.bfloat16]
EXACT = dict(rtol=0, atol=0)


def key_and_counter(seed):
    with tf.device("/CPU:0"):
        return tf.raw_ops.StatelessRandomGetKeyCounter(seed=tf.constant(seed, tf.int64))


def uniform(shape, key, counter, dtype, alg=1):
    return tf.raw_ops.StatelessRandomUniformV2(shape=shape, key=key, counter=counter, alg=alg,
                                               dtype=dtype)


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(0,), (1,), (3,), (5, 7), (1000, 37)])
def test_stateless_uniform_is_bit_exact_with_cpu(dtype, shape):
    key, counter = key_and_counter([17, 42])
    assert_matches_cpu(lambda: uniform(shape, key, counter, dtype), expect_launch=0 not in shape,
                       **EXACT)


@pytest.mark.parametrize("counter", [
    [2**64 - 3, 5],                 # the low word carries into the high one
    [2**64 - 1, 2**64 - 1],         # the whole 128-bit counter wraps
    [2**32 - 2, 0],                 # a carry between 32-bit words
])
def test_stateless_uniform_counters_that_carry_match_cpu(counter):
    key = tf.constant([0x0123456789ABCDEF], tf.uint64)
    counter = tf.constant(counter, tf.uint64)
    for dtype in (tf.float32, tf.float64):
        assert_matches_cpu(lambda: uniform([101], key, counter, dtype), **EXACT)


def test_stateless_uniform_auto_select_and_int64_shape_match_cpu():
    key, counter = key_and_counter([1, 2])
    shape = tf.constant([4, 9], tf.int64)
    assert_matches_cpu(lambda: uniform(shape, key, counter, tf.float32, alg=3), **EXACT)


@pytest.mark.parametrize("dtype", [tf.float32, tf.float16], ids=lambda d: d.name)
def test_tf_random_stateless_uniform_matches_cpu(dtype):
    def draw():
        return tf.random.stateless_uniform([33, 5], seed=[7, 8], minval=-2, maxval=3,
                                           dtype=dtype)

    with tf.device("/CPU:0"):
        expected = draw()
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        actual = draw()
    assert vgpu.stats()["launches"] >= 1
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_keras_dropout_drops_the_same_units_as_on_cpu():
    import keras

    x = np.ones((16, 64), np.float32)

    def dropped(device):
        with tf.device(device):
            layer = keras.layers.Dropout(0.5, seed=1234)
            return layer(tf.constant(x), training=True).numpy()

    expected = dropped("/CPU:0")
    vgpu.reset_stats()
    actual = dropped("/GPU:0")
    assert vgpu.stats()["launches"] >= 1
    np.testing.assert_array_equal(actual, expected)
    assert 0.3 < np.mean(actual == 0) < 0.7


@pytest.mark.parametrize("kwargs,match", [
    (dict(alg=2), "Unsupported algorithm id: 2"),
    (dict(key=tf.constant([1, 2], tf.uint64)), r"key must have shape \[1\]"),
    (dict(counter=tf.constant([1], tf.uint64)), "counter must be a vector with length at least"),
    (dict(shape=[3, -1]), "Dimension -1 must be >= 0"),
])
def test_stateless_uniform_bad_input_is_invalid_argument(kwargs, match):
    key, counter = key_and_counter([3, 4])
    args = dict(shape=[3, 2], key=key, counter=counter, alg=1)
    args.update(kwargs)
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.StatelessRandomUniformV2(dtype=tf.float32, **args)


# --- Normal, truncated normal and integer distributions, and the key/counter derivation. ---

def normal(shape, key, counter, dtype, alg=1):
    return tf.raw_ops.StatelessRandomNormalV2(shape=shape, key=key, counter=counter, alg=alg,
                                              dtype=dtype)


def truncated_normal(shape, key, counter, dtype, alg=1):
    return tf.raw_ops.StatelessTruncatedNormalV2(shape=shape, key=key, counter=counter, alg=alg,
                                                 dtype=dtype)


# Sizes around TensorFlow's groups (4 elements, 2 for float64), and large enough that the CPU
# kernel shards the work over its threads.
SIZES = [(0,), (1,), (3,), (5, 7), (1000, 37)]


@pytest.mark.parametrize("dtype", FLOATING, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", SIZES)
@pytest.mark.parametrize("op", [normal, truncated_normal], ids=["normal", "truncated"])
def test_stateless_normals_are_bit_exact_with_cpu(op, dtype, shape):
    key, counter = key_and_counter([17, 42])
    out = assert_matches_cpu(lambda: op(shape, key, counter, dtype),
                             expect_launch=0 not in shape, **EXACT)
    if op is truncated_normal and out.shape.num_elements():
        assert np.all(np.abs(out.numpy().astype(np.float64)) <= 2.0)


@pytest.mark.parametrize("counter", [[2**64 - 3, 5], [2**64 - 1, 2**64 - 1], [2**32 - 2, 0]])
@pytest.mark.parametrize("op", [normal, truncated_normal], ids=["normal", "truncated"])
def test_stateless_normals_with_carrying_counters_match_cpu(op, counter):
    key = tf.constant([0x0123456789ABCDEF], tf.uint64)
    counter = tf.constant(counter, tf.uint64)
    for dtype in (tf.float32, tf.float64):
        assert_matches_cpu(lambda: op([257], key, counter, dtype), **EXACT)


def test_stateless_normals_of_many_seeds_match_cpu():
    # Many keys: Box-Muller's clamp of tiny uniforms and the truncation's rejections occur.
    for seed in range(40):
        key, counter = key_and_counter([seed, 1000 - seed])
        for dtype in (tf.float32, tf.float64, tf.float16):
            assert_matches_cpu(lambda: normal([61], key, counter, dtype), **EXACT)
            assert_matches_cpu(lambda: truncated_normal([61], key, counter, dtype), **EXACT)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64], ids=lambda d: d.name)
@pytest.mark.parametrize("bounds", [(0, 10), (-5, 3), (-(2**31), 2**31 - 1), (7, 8)])
def test_stateless_uniform_int_is_bit_exact_with_cpu(dtype, bounds):
    if dtype == tf.int64:
        bounds = (bounds[0] * 2**30, bounds[1] * 2**31 + 1) if abs(bounds[0]) > 100 else bounds
    key, counter = key_and_counter([5, 6])
    minval, maxval = (tf.constant(v, dtype) for v in bounds)
    assert_matches_cpu(lambda: tf.raw_ops.StatelessRandomUniformIntV2(
        shape=[333], key=key, counter=counter, alg=1, minval=minval, maxval=maxval), **EXACT)


@pytest.mark.parametrize("dtype", [tf.int32, tf.int64, tf.uint32, tf.uint64],
                         ids=lambda d: d.name)
def test_stateless_uniform_full_int_is_bit_exact_with_cpu(dtype):
    key, counter = key_and_counter([8, 9])
    assert_matches_cpu(lambda: tf.raw_ops.StatelessRandomUniformFullIntV2(
        shape=[3, 101], key=key, counter=counter, alg=1, dtype=dtype), **EXACT)


def test_tf_random_stateless_normal_and_integers_match_cpu():
    def draw():
        return (tf.random.stateless_normal([40, 3], seed=[1, 2], mean=1.5, stddev=0.5),
                tf.random.stateless_truncated_normal([40, 3], seed=[3, 4], stddev=2.0),
                tf.random.stateless_uniform([40], seed=[5, 6], minval=-3, maxval=9,
                                            dtype=tf.int32),
                tf.random.stateless_uniform([40], seed=[5, 6], minval=None, maxval=None,
                                            dtype=tf.int64))

    assert_matches_cpu(draw, **EXACT)


@pytest.mark.parametrize("initializer", ["glorot_normal", "he_normal", "lecun_normal",
                                         "truncated_normal", "random_normal", "orthogonal"])
def test_keras_initializers_give_the_cpu_weights(initializer):
    import keras

    def build(device):
        with tf.device(device):
            init = keras.initializers.get({"class_name": initializer,
                                           "config": {"seed": 1234}})
            return init((33, 17)).numpy()

    expected = build("/CPU:0")
    vgpu.reset_stats()
    actual = build("/GPU:0")
    np.testing.assert_array_equal(actual, expected)


def test_keras_gaussian_noise_and_dropout_match_cpu():
    import keras

    x = np.ones((16, 64), np.float32)

    def noisy(device):
        with tf.device(device):
            noise = keras.layers.GaussianNoise(0.3, seed=11)
            dropout = keras.layers.GaussianDropout(0.2, seed=12)
            t = tf.constant(x)
            return noise(t, training=True).numpy(), dropout(t, training=True).numpy()

    expected = noisy("/CPU:0")
    vgpu.reset_stats()
    actual = noisy("/GPU:0")
    assert vgpu.stats()["launches"] >= 2
    for a, e in zip(actual, expected):
        np.testing.assert_array_equal(a, e)


@pytest.mark.parametrize("seed_dtype", [tf.int32, tf.int64])
def test_key_counter_from_a_seed_is_computed_on_the_device_like_cpu(seed_dtype):
    seed = tf.constant([123456789, -987654321], seed_dtype)
    with tf.device("/CPU:0"):
        expected = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
    with tf.device("/GPU:0"):
        actual = tf.raw_ops.StatelessRandomGetKeyCounter(seed=seed)
    for a, e in zip(actual, expected):
        assert a.device.endswith("GPU:0")
        np.testing.assert_array_equal(a.numpy(), e.numpy())


def test_a_seed_held_on_the_device_is_never_copied_back_to_draw_numbers():
    # Keras' SeedGenerator keeps its seed in a device variable. TensorFlow's GPU kernel of
    # StatelessRandomGetKeyCounter takes the seed in host memory, which copies it back, and
    # waits for the device to get there, in every training step with a Dropout layer. Here
    # nothing comes back until the result is read.
    with tf.device("/GPU:0"):
        seed = tf.Variable([7, 11], dtype=tf.int64)

    @tf.function
    def draw():
        seed.assign_add([1, 0])
        return tf.random.stateless_uniform([256], seed=seed.read_value())

    draw()
    vgpu.reset_stats()
    values = draw()
    stats = vgpu.stats()
    assert values.device.endswith("GPU:0")
    assert stats["commands"].get("memcpy_dtoh", 0) == 0, stats["commands"]
    assert stats["bytes_from_device"] == 0
    with tf.device("/CPU:0"):
        expected = tf.random.stateless_uniform([256], seed=tf.constant([9, 11], tf.int64))
    np.testing.assert_array_equal(values.numpy(), expected.numpy())


def test_key_counter_of_a_bad_seed_is_invalid_argument():
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match=r"seed must have shape \[2\], not \[3\]"):
        tf.raw_ops.StatelessRandomGetKeyCounter(seed=tf.constant([1, 2, 3]))


@pytest.mark.parametrize("minval,maxval,match", [
    (5, 3, "Need minval < maxval, got 5 >= 3"),
    (3, 3, "Need minval < maxval, got 3 >= 3"),
    ([1], 3, r"minval must be 0-D, got shape \[1\]"),
])
def test_stateless_uniform_int_bad_bounds_are_invalid_argument(minval, maxval, match):
    key, counter = key_and_counter([1, 1])
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.StatelessRandomUniformIntV2(shape=[4], key=key, counter=counter, alg=1,
                                               minval=minval, maxval=maxval)


def test_stateless_uniform_int_of_nothing_skips_the_bounds_check_like_cpu():
    key, counter = key_and_counter([1, 1])
    with tf.device("/GPU:0"):
        out = tf.raw_ops.StatelessRandomUniformIntV2(shape=[0], key=key, counter=counter, alg=1,
                                                     minval=5, maxval=3)
    assert out.shape == (0,)


@pytest.mark.parametrize("op", [normal, truncated_normal], ids=["normal", "truncated"])
def test_stateless_normals_bad_input_is_invalid_argument(op):
    key, counter = key_and_counter([3, 4])
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="Unsupported algorithm id: 2"):
        op([3], key, counter, tf.float32, alg=2)
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match="Dimension -1 must be >= 0"):
        op([3, -1], key, counter, tf.float32)


# ---- tf.random.Generator: its state variable lives on the device it was made on ----


def _generator_draws(device):
    """What a generator seeded alike draws on `device`: eager, in a tf.function, after a skip,
    and its final state."""
    with tf.device(device):
        generator = tf.random.Generator.from_seed(1234)
        normal = generator.normal([4, 3])
        integers = generator.uniform([5], maxval=10, dtype=tf.int32)

        @tf.function
        def draw():
            return generator.normal([2]) + generator.uniform([2])

        first, second = draw(), draw()
        generator.skip(7)
        truncated = generator.truncated_normal([3])
        assert device[1:] in generator.state.device
        return [t.numpy() for t in (normal, integers, first, second, truncated,
                                    generator.state)]


def test_a_generator_on_the_device_draws_exactly_the_cpu_numbers():
    for on_device, on_cpu in zip(_generator_draws("/GPU:0"), _generator_draws("/CPU:0")):
        np.testing.assert_array_equal(on_device, on_cpu)


@pytest.mark.parametrize("state,delta", [
    ([5, 0, 0], 1),
    ([-1, -1, 9], 3),            # the counter's low word carries into its high word
    ([5, 0, 0], 2**64 - 1),      # 256 * delta is taken modulo 2^64, as TensorFlow's kernel
    ([5, 0, 0], 2**60),          # ... which makes this skip nothing
    ([-256, 7, 11], 1),          # the low word wraps to 0 and carries
])
def test_rng_read_and_skip_reads_the_old_state_and_advances_the_counter_like_cpu(state, delta):
    def read_and_skip(device):
        with tf.device(device):
            variable = tf.Variable(tf.constant(state, tf.int64))
            old = tf.raw_ops.RngReadAndSkip(resource=variable.handle, alg=1,
                                            delta=tf.constant(delta, tf.uint64))
            return old.numpy(), variable.numpy()

    on_device, on_cpu = read_and_skip("/GPU:0"), read_and_skip("/CPU:0")
    np.testing.assert_array_equal(on_device[0], on_cpu[0])
    np.testing.assert_array_equal(on_device[1], on_cpu[1])


def test_rng_skip_advances_the_counter_like_cpu():
    def skip(device):
        with tf.device(device):
            variable = tf.Variable(tf.constant([-3, 4, 5], tf.int64))
            tf.raw_ops.RngSkip(resource=variable.handle, algorithm=tf.constant(3, tf.int64),
                               delta=tf.constant(9, tf.int64))
            return variable.numpy()

    np.testing.assert_array_equal(skip("/GPU:0"), skip("/CPU:0"))


@pytest.mark.parametrize("state,alg,error,match", [
    (tf.constant([5, 0, 0], tf.int64), 2, tf.errors.UnimplementedError, "ThreeFry"),
    (tf.constant([5, 0, 0], tf.int64), 9, tf.errors.InvalidArgumentError,
     "Unsupported algorithm id: 9"),
    (tf.constant([5, 0, 0], tf.int32), 1, tf.errors.InvalidArgumentError, "must be int64"),
    (tf.constant([[5, 0, 0]], tf.int64), 1, tf.errors.InvalidArgumentError,
     "one and only one dimension"),
    # TensorFlow's CPU kernel writes past its buffers here (the process aborts): the plugin
    # refuses it.
    (tf.constant([5, 0], tf.int64), 1, tf.errors.InvalidArgumentError, "at least 3; got 2"),
])
def test_rng_read_and_skip_of_a_bad_state_or_algorithm_is_an_error(state, alg, error, match):
    with tf.device("/GPU:0"):
        variable = tf.Variable(state)
        with pytest.raises(error, match=match):
            tf.raw_ops.RngReadAndSkip(resource=variable.handle, alg=alg,
                                      delta=tf.constant(1, tf.uint64))
        # The state is untouched.
        np.testing.assert_array_equal(variable.numpy(), state.numpy())
