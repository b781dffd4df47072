"""MirrorPad and MirrorPadGrad (REFLECT, SYMMETRIC) on the virtual GPU against TensorFlow's CPU
kernels: every floating dtype, ranks 0 to 5, int32 and int64 paddings, pads up to the modes'
limits, empty tensors, gradients through tf.pad, and TensorFlow's errors for bad paddings."""
import numpy as np
import pytest
import tensorflow as tf

from ops.op_testing import assert_gradients_match_cpu, assert_matches_cpu, random_array, run_on

FLOATING = [np.float32, np.float64, np.float16, tf.bfloat16.as_numpy_dtype]
EXACT = dict(rtol=0, atol=0)

# (shape, paddings): every rank up to TensorFlow's 5, pads at the modes' limits, unpadded
# dimensions between padded ones.
CASES = [
    ((5,), [[2, 3]]),
    ((4, 6), [[1, 2], [3, 0]]),
    ((3, 4, 5), [[0, 0], [2, 2], [1, 3]]),
    ((2, 3, 4, 3), [[1, 1], [0, 2], [3, 0], [1, 2]]),
    ((2, 2, 3, 2, 4), [[1, 0], [1, 1], [2, 0], [0, 1], [3, 3]]),
    ((1, 7), [[0, 0], [6, 6]]),
]


def limit_pads(paddings, shape, mode):
    """The pads clamped to what the mode allows (REFLECT: < size, SYMMETRIC: <= size)."""
    limit = [(n - 1 if mode == "REFLECT" else n) for n in shape]
    return [[min(b, l), min(a, l)] for (b, a), l in zip(paddings, limit)]


def mirror_pad(mode, paddings, index_dtype=tf.int32):
    return lambda x: tf.raw_ops.MirrorPad(input=x, paddings=tf.constant(paddings, index_dtype),
                                          mode=mode)


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape,paddings", CASES)
def test_mirror_pad_matches_cpu_exactly(mode, dtype, shape, paddings):
    paddings = limit_pads(paddings, shape, mode)
    x = random_array(shape, dtype, seed=len(shape))
    assert_matches_cpu(mirror_pad(mode, paddings), x, **EXACT)


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("index_dtype", [tf.int32, tf.int64])
def test_mirror_pad_with_int64_paddings_and_large_rows_matches_cpu(mode, index_dtype):
    x = random_array((37, 300), np.float32, seed=1)
    assert_matches_cpu(mirror_pad(mode, [[5, 7], [20, 1]], index_dtype), x, **EXACT)


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("dtype", FLOATING)
@pytest.mark.parametrize("shape,paddings", CASES)
def test_mirror_pad_grad_matches_cpu(mode, dtype, shape, paddings):
    paddings = limit_pads(paddings, shape, mode)
    padded = [b + n + a for n, (b, a) in zip(shape, paddings)]
    dy = random_array(padded, dtype, seed=7)
    assert_matches_cpu(lambda g: tf.raw_ops.MirrorPadGrad(input=g, paddings=paddings, mode=mode),
                       dy)


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_tf_pad_gradient_matches_cpu(mode, dtype):
    x = random_array((3, 5, 4), dtype, seed=2)
    assert_gradients_match_cpu(lambda t: tf.pad(t, [[1, 2], [2, 2], [0, 3]], mode=mode), x)


def test_mirror_pad_of_a_scalar_and_of_nothing_forwards_the_input():
    scalar = run_on("/GPU:0", mirror_pad("REFLECT", np.zeros((0, 2), np.int32)), np.float32(3))
    assert scalar.numpy() == 3
    empty = run_on("/GPU:0", mirror_pad("SYMMETRIC", [[0, 0], [1, 1]]), np.zeros((0, 2), np.float32))
    assert empty.shape == (0, 4)
    unpadded = assert_matches_cpu(mirror_pad("REFLECT", [[0, 0], [0, 0]]),
                                  random_array((2, 3), np.float32), expect_launch=False)
    assert unpadded.shape == (2, 3)


@pytest.mark.parametrize("mode,paddings,match", [
    ("REFLECT", [[3, 0]], "paddings must be less than the dimension size: 3, 0 not less than 3"),
    ("SYMMETRIC", [[0, 4]], "paddings must be no greater than the dimension size: 0, 4 greater"),
    ("REFLECT", [[-1, 0]], "paddings must be non-negative: -1 0"),
    ("REFLECT", [[1, 1], [1, 1]], "The first dimension of paddings must be the rank of inputs"),
    ("REFLECT", [1, 1], "paddings must be a matrix with 2 columns"),
])
def test_bad_mirror_paddings_are_invalid_argument(mode, paddings, match):
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.MirrorPad(input=tf.ones([3]), paddings=paddings, mode=mode)


def test_mirror_pad_grad_with_paddings_too_large_is_invalid_argument():
    with tf.device("/GPU:0"), pytest.raises(
            tf.errors.InvalidArgumentError,
            match="paddings must be less than the output dimension size: 2, 2 not less than 1"):
        tf.raw_ops.MirrorPadGrad(input=tf.ones([5]), paddings=[[2, 2]], mode="REFLECT")


def test_mirror_pad_of_rank_six_is_unimplemented_like_tensorflow():
    with tf.device("/GPU:0"), pytest.raises(tf.errors.UnimplementedError,
                                            match=r"inputs rank not in \[0,5\]: 6"):
        tf.raw_ops.MirrorPad(input=tf.ones([1] * 6), paddings=[[0, 0]] * 6, mode="SYMMETRIC")
