"""Element-wise ops on the virtual GPU against TensorFlow's CPU kernels: binary arithmetic
(Atan2, Xlogy, Xdivy, Xlog1py included), comparisons and logical ops with numpy broadcasting,
the gradient helpers of unary ops, unary math (erf, erfc, expm1, log1p, trigonometric and
hyperbolic functions), IsFinite/IsNan/IsInf, SelectV2, ClipByValue, Cast, AddN, Fill, Range,
ZerosLike (TensorLists and Optionals too)/OnesLike, in every registered dtype, with empty, scalar and odd
shapes; gradients of the differentiable ops; TensorFlow's errors for bad input."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (assert_computed_on_the_gpus_host_like_cpu, assert_gradients_match_cpu,
                            assert_matches_cpu, random_array, run_on)

BF16 = tf.bfloat16.as_numpy_dtype
FLOATING = [np.float32, np.float64, np.float16, BF16]
FLOATING_AND_INT64 = FLOATING + [np.int64]

# (x shape, y shape) pairs: same shape, broadcasting both ways, scalars, empty, and a broadcast
# that stays three-dimensional after merging.
SHAPE_PAIRS = [
    ((4, 33), (4, 33)),
    ((2, 3, 4), (3, 1)),
    ((), (5,)),
    ((7,), ()),
    ((1,), (0,)),
    ((2, 1, 3), (1, 4, 1)),
    ((3, 1, 5, 1), (2, 1, 6)),
]

BINARY = {
    # name: (function, dtypes, operand domain)
    "add": (tf.math.add, FLOATING_AND_INT64, "any"),
    "add_v1": (lambda x, y: tf.raw_ops.Add(x=x, y=y), FLOATING_AND_INT64, "any"),
    "sub": (tf.math.subtract, FLOATING_AND_INT64, "any"),
    "mul": (tf.math.multiply, FLOATING_AND_INT64, "any"),
    "real_div": (tf.math.truediv, FLOATING, "nonzero_divisor"),
    "div": (lambda x, y: tf.raw_ops.Div(x=x, y=y), FLOATING_AND_INT64, "nonzero_divisor"),
    "div_no_nan": (tf.math.divide_no_nan, FLOATING, "some_zero_divisors"),
    "maximum": (tf.math.maximum, FLOATING_AND_INT64, "any"),
    "minimum": (tf.math.minimum, FLOATING_AND_INT64, "any"),
    "pow": (tf.math.pow, FLOATING_AND_INT64, "power"),
    "squared_difference": (tf.math.squared_difference, FLOATING_AND_INT64, "any"),
    "floor_div": (tf.math.floordiv, FLOATING_AND_INT64, "nonzero_divisor"),
    "floor_mod": (tf.math.floormod, FLOATING_AND_INT64, "nonzero_divisor"),
    "rsqrt_grad": (lambda y, dy: tf.raw_ops.RsqrtGrad(y=y, dy=dy), FLOATING, "any"),
    "sqrt_grad": (lambda y, dy: tf.raw_ops.SqrtGrad(y=y, dy=dy), FLOATING, "positive_y"),
    "reciprocal_grad": (lambda y, dy: tf.raw_ops.ReciprocalGrad(y=y, dy=dy), FLOATING, "any"),
    "inv_grad": (lambda y, dy: tf.raw_ops.InvGrad(y=y, dy=dy), FLOATING, "any"),
    "atan2": (tf.math.atan2, FLOATING, "any"),
    "xlogy": (tf.math.xlogy, FLOATING, "zero_x_positive_y"),
    "xdivy": (tf.math.xdivy, FLOATING, "zero_x_nonzero_y"),
    "xlog1py": (tf.math.xlog1py, FLOATING, "zero_x_positive_y"),
    "equal": (tf.math.equal, FLOATING_AND_INT64 + [np.uint8, np.bool_], "coarse"),
    "not_equal": (tf.math.not_equal, FLOATING_AND_INT64 + [np.uint8, np.bool_], "coarse"),
    "greater": (tf.math.greater, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "greater_equal": (tf.math.greater_equal, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "less": (tf.math.less, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "less_equal": (tf.math.less_equal, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "logical_and": (tf.math.logical_and, [np.bool_], "any"),
    "logical_or": (tf.math.logical_or, [np.bool_], "any"),
}
# TensorFlow's kernels take equal element counts only (SimpleBinaryOp).
SAME_SHAPE_ONLY = {"rsqrt_grad", "sqrt_grad", "reciprocal_grad", "inv_grad"}


def operands(domain, x_shape, y_shape, dtype, seed):
    """Inputs for a binary op that keep the comparison meaningful (no integer division by zero,
    no integer negative powers, equal elements for the comparisons to find)."""
    dtype = np.dtype(dtype)
    integer = np.issubdtype(dtype, np.integer)
    x = random_array(x_shape, dtype, seed=seed, low=-6, high=6)
    y = random_array(y_shape, dtype, seed=seed + 1, low=-6, high=6)
    if dtype == np.uint8:
        x = random_array(x_shape, dtype, seed=seed, low=0, high=5)
        y = random_array(y_shape, dtype, seed=seed + 1, low=0, high=5)
    if domain == "nonzero_divisor":
        y = np.where(y == 0, np.ones_like(y), y)
        if not integer:
            y = np.where(np.abs(y.astype(np.float64)) < 0.25, np.full_like(y, 0.5), y)
    elif domain == "some_zero_divisors":
        y = np.where(np.abs(y.astype(np.float64)) < 1.5, np.zeros_like(y), y)
    elif domain == "power":
        if integer:
            y = random_array(y_shape, dtype, seed=seed + 1, low=0, high=5)
        else:
            x = random_array(x_shape, dtype, seed=seed, low=0.1, high=3)
            y = random_array(y_shape, dtype, seed=seed + 1, low=-3, high=3)
    elif domain == "positive_y":
        x = random_array(x_shape, dtype, seed=seed, low=0.5, high=4)
    elif domain in ("zero_x_positive_y", "zero_x_nonzero_y"):
        # x == 0 must give 0 even where log(y) or 1 / y is not finite.
        x = np.where(np.abs(x.astype(np.float64)) < 2, np.zeros_like(x), x)
        if domain == "zero_x_positive_y":
            y = random_array(y_shape, dtype, seed=seed + 1, low=0.1, high=5)
        else:
            y = np.where(np.abs(y.astype(np.float64)) < 0.25, np.full_like(y, 0.5), y)
    elif domain == "coarse" and dtype != np.bool_:
        x = random_array(x_shape, np.int64, seed=seed, low=0, high=3).astype(dtype)
        y = random_array(y_shape, np.int64, seed=seed + 1, low=0, high=3).astype(dtype)
    return x, y


@pytest.mark.parametrize(
    "name,dtype", [(name, dtype) for name, (_, dtypes, _) in sorted(BINARY.items()) for dtype in dtypes]
)
def test_binary_op_matches_cpu_with_broadcasting(name, dtype):
    fn, _, domain = BINARY[name]
    pairs = [p for p in SHAPE_PAIRS if p[0] == p[1]] if name in SAME_SHAPE_ONLY else SHAPE_PAIRS
    for seed, (x_shape, y_shape) in enumerate(pairs):
        x, y = operands(domain, x_shape, y_shape, dtype, seed)
        out_size = np.broadcast(np.empty(x_shape), np.empty(y_shape)).size
        assert_matches_cpu(fn, x, y, expect_launch=out_size > 0)


def test_binary_ops_on_large_broadcasts_match_cpu():
    # Large enough to be split over the thread pool, with segments crossing rows.
    x = random_array((300, 1, 257), np.float32, seed=1)
    y = random_array((1, 70, 257), np.float32, seed=2)
    z = random_array((300, 70, 1), np.float32, seed=3)
    assert_matches_cpu(tf.math.add, x, y)
    assert_matches_cpu(tf.math.multiply, x, z)
    assert_matches_cpu(tf.math.squared_difference, random_array((1000, 513), np.float32),
                       random_array((1000, 1), np.float32, seed=4))
    assert_matches_cpu(tf.math.greater, x, np.float32(0.5))


@pytest.mark.parametrize("op", [tf.math.greater_equal, tf.math.less, tf.math.equal,
                                tf.math.not_equal])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_comparisons_in_every_operand_shape_match_cpu_past_vector_lengths(op, dtype):
    # Comparisons run as plain vectorised loops: long runs with a tail (1031 elements), the
    # scalar on either side, both scalars, and NaNs (unordered, never equal).
    x = random_array((1031,), dtype, seed=5)
    y = random_array((1031,), dtype, seed=6)
    if np.issubdtype(dtype, np.floating):
        x[::7] = np.nan
        y[3::11] = np.nan
    x[::5] = y[::5]  # ties
    for a, b in ((x, y), (x, dtype(x[2])), (dtype(y[4]), y), (dtype(x[0]), dtype(y[0]))):
        assert_matches_cpu(op, a, b)


UNARY = {
    # name: (function, dtypes, (low, high))
    "neg": (tf.math.negative, FLOATING_AND_INT64, (-8, 8)),
    "abs": (tf.math.abs, FLOATING_AND_INT64, (-8, 8)),
    "square": (tf.math.square, FLOATING_AND_INT64, (-8, 8)),
    "sign": (tf.math.sign, FLOATING_AND_INT64, (-2, 2)),
    "round": (tf.math.round, FLOATING, (-8, 8)),
    "sqrt": (tf.math.sqrt, FLOATING, (0, 9)),
    "rsqrt": (tf.math.rsqrt, FLOATING, (0.05, 9)),
    "exp": (tf.math.exp, FLOATING, (-8, 8)),
    "log": (tf.math.log, FLOATING, (0.01, 9)),
    "reciprocal": (tf.math.reciprocal, FLOATING, (0.1, 8)),
    "inv": (lambda x: tf.raw_ops.Inv(x=x), FLOATING, (0.1, 8)),
    "floor": (tf.math.floor, FLOATING, (-8, 8)),
    "ceil": (tf.math.ceil, FLOATING, (-8, 8)),
    "logical_not": (tf.math.logical_not, [np.bool_], (0, 1)),
    "erf": (tf.math.erf, FLOATING, (-4, 4)),
    "erfc": (tf.math.erfc, FLOATING, (-4, 4)),
    "expm1": (tf.math.expm1, FLOATING, (-8, 8)),
    "log1p": (tf.math.log1p, FLOATING, (-0.9, 9)),
    "sin": (tf.math.sin, FLOATING, (-8, 8)),
    "cos": (tf.math.cos, FLOATING, (-8, 8)),
    "tan": (tf.math.tan, FLOATING, (-1.4, 1.4)),
    "asin": (tf.math.asin, FLOATING, (-1, 1)),
    "acos": (tf.math.acos, FLOATING, (-1, 1)),
    "atan": (tf.math.atan, FLOATING, (-8, 8)),
    "sinh": (tf.math.sinh, FLOATING, (-5, 5)),
    "cosh": (tf.math.cosh, FLOATING, (-5, 5)),
    "asinh": (tf.math.asinh, FLOATING, (-8, 8)),
    "acosh": (tf.math.acosh, FLOATING, (1, 9)),
    "atanh": (tf.math.atanh, FLOATING, (-0.95, 0.95)),
    "is_finite": (tf.math.is_finite, FLOATING, (-8, 8)),
    "is_nan": (tf.math.is_nan, FLOATING, (-8, 8)),
    "is_inf": (tf.math.is_inf, FLOATING, (-8, 8)),
}
UNARY_SHAPES = [(0,), (1,), (7,), (3, 0, 2), (4, 33), (2, 3, 5, 7), ()]


@pytest.mark.parametrize(
    "name,dtype", [(name, dtype) for name, (_, dtypes, _) in sorted(UNARY.items()) for dtype in dtypes]
)
def test_unary_op_matches_cpu(name, dtype):
    fn, _, (low, high) = UNARY[name]
    for seed, shape in enumerate(UNARY_SHAPES):
        x = random_array(shape, dtype, seed=seed, low=low, high=high)
        assert_matches_cpu(fn, x, expect_launch=x.size > 0)


def test_round_is_half_to_even_and_unary_ops_keep_ieee_special_values():
    halves = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 1e20], np.float32)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0], np.float32)
    for dtype in FLOATING:
        with np.errstate(over="ignore"):
            assert_matches_cpu(tf.math.round, halves.astype(dtype))
        for fn in (tf.math.sign, tf.math.abs, tf.math.sqrt, tf.math.exp, tf.math.log,
                   tf.math.floor, tf.math.reciprocal):
            assert_matches_cpu(fn, specials.astype(dtype))


def test_binary_ops_handle_ieee_special_values_like_cpu():
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.5, -2.5, 7.0, -7.0, 5.0], np.float32)
    y = np.array([1.0, 2.0, -2.0, np.nan, 0.0, 0.0, 3.0, -2.0, 2.0, np.inf], np.float32)
    for fn in (tf.math.maximum, tf.math.minimum, tf.math.divide_no_nan, tf.math.floordiv,
               tf.math.floormod, tf.math.pow, tf.math.truediv, tf.math.equal, tf.math.less):
        assert_matches_cpu(fn, x, y)


def test_integer_floor_division_and_modulo_round_toward_negative_infinity():
    x = np.array([7, -7, 7, -7, 0, 6, -6, 1, -1, -(2**63), -(2**63), 2**63 - 1], np.int64)
    y = np.array([2, 2, -2, -2, 3, -3, 3, 5, -5, -1, 7, -1], np.int64)
    floor_div = assert_matches_cpu(tf.math.floordiv, x, y).numpy()
    floor_mod = assert_matches_cpu(tf.math.floormod, x, y).numpy()
    assert floor_div[:4].tolist() == [3, -4, -4, 3]
    assert floor_mod[:4].tolist() == [1, 1, -1, -1]
    assert_matches_cpu(lambda a, b: tf.raw_ops.Div(x=a, y=b), x, y)


def test_integer_power_and_negation_wrap_like_cpu():
    base = np.array([2, -3, 3, 7, -1, -(2**63), 0], np.int64)
    exponent = np.array([62, 5, 41, 30, 7, 1, 0], np.int64)
    assert_matches_cpu(tf.math.pow, base, exponent)
    for fn in (tf.math.negative, tf.math.abs, tf.math.square, tf.math.sign):
        assert_matches_cpu(fn, base)


def test_int64_pow_with_negative_exponent_gives_cuda_kernels_result():
    """TensorFlow's CPU kernel refuses an integer to a negative power; its CUDA kernel cannot
    raise, and gives 0, or +-1 for a base of +-1. The virtual GPU does what the CUDA kernel
    does, in the op call, and its stream stays usable."""
    base = np.array([2, 3, 1, -1, -1, 0, -5], np.int64)
    exponent = np.array([-1, 0, -2, -2, -3, -4, -1], np.int64)
    result = run_on("/GPU:0", tf.math.pow, base, exponent)
    assert result.numpy().tolist() == [0, 1, 1, 1, -1, 0, 0]
    with pytest.raises(tf.errors.InvalidArgumentError, match="negative integer powers"):
        run_on("/CPU:0", tf.math.pow, base, exponent)
    assert run_on("/GPU:0", tf.math.pow, base[:2], -exponent[:2]).numpy().tolist() == [2, 1]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64, np.int32,
                                   np.int64, np.uint8, np.bool_])
def test_select_v2_matches_cpu_with_broadcasting(dtype):
    shape_triples = [
        ((2, 3), (2, 3), (2, 3)),
        ((2, 1), (1, 3), ()),
        ((), (4,), (4,)),
        ((3, 1, 1), (1, 2, 1), (1, 1, 4)),
        ((4, 1), (4, 5), (1, 5)),
        ((1,), (0,), (1,)),
    ]
    for seed, (c_shape, t_shape, e_shape) in enumerate(shape_triples):
        condition = random_array(c_shape, np.bool_, seed=seed)
        then = random_array(t_shape, dtype, seed=seed + 1, low=0, high=9)
        other = random_array(e_shape, dtype, seed=seed + 2, low=0, high=9)
        size = np.broadcast(np.empty(c_shape), np.empty(t_shape), np.empty(e_shape)).size
        # int32 selects compute on the host: test_int32_select_v2_*.
        assert_matches_cpu(lambda c, t, e: tf.where(c, t, e), condition, then, other,
                           expect_launch=size > 0 and dtype != np.int32)


@pytest.mark.parametrize("c_shape,t_shape,e_shape", [
    ((2, 3), (2, 3), (2, 3)), ((2, 1), (1, 3), ()), ((), (4,), (4,)),
    ((3, 1, 1), (1, 2, 1), (1, 1, 4)), ((4, 1), (4, 5), (1, 5)), ((1,), (0,), (1,)),
    ((2, 1, 3, 1, 2), (1, 4, 3, 1, 1), (2, 4, 1, 5, 2))])
def test_int32_select_v2_runs_on_the_host_of_the_gpu_like_cpu_without_a_launch_or_copy(
        c_shape, t_shape, e_shape):
    """Keras' take (every Embedding) wraps negative int32 indices with where(i < 0, i + n, i),
    whose comparison and sum TensorFlow computes on the host: the select stays there too."""
    rng = np.random.default_rng(sum(c_shape) + 7 * len(t_shape))
    condition = rng.random(c_shape) > 0.5
    then = rng.integers(-2**31, 2**31, t_shape, dtype=np.int64).astype(np.int32)
    other = rng.integers(-9, 9, e_shape).astype(np.int32)
    got = assert_computed_on_the_gpus_host_like_cpu(tf.where, condition, then, other)
    assert got.dtype == tf.int32


def test_an_int32_select_v2_of_unbroadcastable_shapes_is_the_invalid_argument_of_other_types():
    with tf.device("/GPU:0"), pytest.raises(
            tf.errors.InvalidArgumentError,
            match=r"condition \[2,3\], then \[4\], and else \[1\] must be broadcastable"):
        tf.where(tf.ones((2, 3), tf.bool), tf.ones((4,), tf.int32), tf.ones((1,), tf.int32))


def test_select_v2_with_scalar_condition_and_large_operands():
    then = random_array((513, 70), np.float32, seed=1)
    other = random_array((70,), np.float32, seed=2)
    for condition in (np.bool_(True), np.bool_(False)):
        assert_matches_cpu(lambda c, t, e: tf.where(c, t, e), condition, then, other)
    condition = random_array((513, 1), np.bool_, seed=3)
    assert_matches_cpu(lambda c, t, e: tf.where(c, t, e), condition, then, other)


CAST_TYPES = [np.float32, np.float16, BF16, np.float64, np.int32, np.int64, np.uint8, np.bool_]


@pytest.mark.parametrize("source", CAST_TYPES, ids=lambda t: np.dtype(t).name)
def test_cast_matches_cpu_between_all_types(source):
    if source == np.uint8:
        x = random_array((5, 7), np.int64, seed=1, low=0, high=255).astype(np.uint8)
    elif source == np.bool_:
        x = random_array((5, 7), np.bool_, seed=1)
    elif np.issubdtype(np.dtype(source), np.integer):
        x = random_array((5, 7), source, seed=1, low=-300, high=300)
    else:
        x = random_array((5, 7), source, seed=1, low=-120, high=120)
    for destination in CAST_TYPES:
        value = x
        if destination == np.uint8 and source not in (np.bool_, np.uint8):
            value = np.abs(x.astype(np.float64)).clip(0, 255).astype(source)  # in range
        assert_matches_cpu(lambda v: tf.cast(v, tf.as_dtype(destination)), value,
                           expect_launch=source != destination)


def test_cast_of_special_floating_values_to_integers_matches_cpu():
    x = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 3e19, -3e19, -2.7, 2.7, -0.0, 0.5],
                 np.float64)
    for source in (np.float32, np.float64, np.float16, BF16):
        with np.errstate(over="ignore", invalid="ignore"):
            value = x.astype(source)
        for destination in (tf.int32, tf.int64, tf.bool):
            assert_matches_cpu(lambda v: tf.cast(v, destination), value)


def test_cast_with_truncate_drops_mantissa_bits_like_cpu():
    x = np.array([1.00390625, 1.01171875, 1.0004882, 1.0014648, -1.0014648, np.nan, 3.3e38],
                 np.float32)
    for source, destination in [(np.float32, tf.bfloat16), (np.float32, tf.float16),
                                (np.float64, tf.float32), (np.float64, tf.float16)]:
        value = x.astype(source) + (1e-12 if source == np.float64 else 0)
        for truncate in (False, True):
            assert_matches_cpu(
                lambda v: tf.raw_ops.Cast(x=v, DstT=destination, Truncate=truncate), value)


@pytest.mark.parametrize("count", [1, 2, 3, 8, 9, 10, 17])
def test_add_n_matches_cpu_bit_for_bit(count):
    inputs = [random_array((3, 37), np.float32, seed=i) for i in range(count)]
    assert_matches_cpu(lambda *xs: tf.math.add_n(list(xs)), *inputs, expect_launch=count > 1,
                       rtol=0, atol=0)


@pytest.mark.parametrize("dtype", FLOATING_AND_INT64)
def test_add_n_matches_cpu_in_every_dtype(dtype):
    for shape in [(0, 3), (), (1000,)]:
        inputs = [random_array(shape, dtype, seed=i) for i in range(11)]
        assert_matches_cpu(lambda *xs: tf.math.add_n(list(xs)), *inputs,
                           expect_launch=int(np.prod(shape)) > 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64, np.int64,
                                   np.uint8, np.bool_])
@pytest.mark.parametrize("index_type", [np.int32, np.int64])
def test_fill_matches_cpu(dtype, index_type):
    value = random_array((), dtype, seed=4, low=1, high=9)
    for dims in ([2, 3], [0, 4], [], [5]):
        dims_array = np.array(dims, index_type)
        assert_matches_cpu(lambda d, v: tf.fill(d, v), dims_array, value,
                           expect_launch=int(np.prod(dims)) > 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64, np.int32,
                                   np.int64, np.uint8, np.bool_])
def test_zeros_like_and_ones_like_match_cpu(dtype):
    for shape in [(0,), (), (3, 5)]:
        x = random_array(shape, dtype, seed=1)
        assert_matches_cpu(tf.zeros_like, x, expect_launch=x.size > 0)
        assert_matches_cpu(tf.ones_like, x, expect_launch=x.size > 0)


def test_int32_zeros_like_of_device_memory_runs_on_the_device():
    # TensorFlow's DEVICE_DEFAULT int32 ZerosLike keeps only its output in host memory and would
    # forward the device-memory input as that output, then write it on the host (a crash).
    with tf.device("/GPU:0"):
        x = tf.constant([3, 4, 5], tf.int32) * 2
        variable = tf.Variable([[1, 2], [3, 4]])
        zeros, ones = tf.zeros_like(x), tf.ones_like(variable)
    assert zeros.device.endswith("GPU:0") and ones.device.endswith("GPU:0")
    np.testing.assert_array_equal(zeros.numpy(), [0, 0, 0])
    np.testing.assert_array_equal(ones.numpy(), [[1, 1], [1, 1]])


def test_int32_casts_and_selects_work_with_host_int32_ops_in_a_function():
    @tf.function
    def step(counter, x):
        doubled = counter * 2  # TensorFlow's host-memory int32 kernel
        as_float = tf.cast(doubled, tf.float32)
        chosen = tf.where(x > 0.5, doubled, -doubled)
        return as_float * x, chosen, tf.cast(x * 10, tf.int32) + counter

    counter = np.arange(6, dtype=np.int32)
    x = random_array((6,), np.float32, seed=2, low=0, high=1)
    assert_matches_cpu(step, counter, x)


def test_adam_like_update_with_int64_step_matches_cpu():
    def adam(step, variable, gradient, m, v):
        t = tf.cast(step + 1, tf.float32)
        m = 0.9 * m + (1 - 0.9) * gradient
        v = 0.999 * v + (1 - 0.999) * tf.square(gradient)
        alpha = 1e-3 * tf.sqrt(1 - tf.pow(0.999, t)) / (1 - tf.pow(0.9, t))
        update = alpha * m / (tf.sqrt(v) + 1e-7)
        steps_mod = tf.math.floormod(step, tf.constant(3, tf.int64))
        return variable - update, tf.math.divide_no_nan(m, v), steps_mod, tf.add_n([m, v, gradient])

    shape = (17, 5)
    assert_matches_cpu(tf.function(adam), np.int64(41), random_array(shape, np.float32, seed=1),
                       random_array(shape, np.float32, seed=2),
                       random_array(shape, np.float32, seed=3),
                       random_array(shape, np.float32, seed=4, low=0.01, high=1))


DIFFERENTIABLE_BINARY = {
    "add": tf.math.add,
    "sub": tf.math.subtract,
    "mul": tf.math.multiply,
    "div": tf.math.truediv,
    "div_no_nan": tf.math.divide_no_nan,
    "maximum": tf.math.maximum,
    "minimum": tf.math.minimum,
    "pow": tf.math.pow,
    "squared_difference": tf.math.squared_difference,
    "atan2": tf.math.atan2,
    "xlogy": tf.math.xlogy,
    "xdivy": tf.math.xdivy,
    "xlog1py": tf.math.xlog1py,
    "v1_where": lambda x, y: tf.compat.v1.where(x > 1.5, x * y, x - y),
    "clip": lambda x, y: tf.raw_ops.ClipByValue(t=x, clip_value_min=y - 1, clip_value_max=y),
}
DIFFERENTIABLE_UNARY = {
    "neg": tf.math.negative,
    "abs": tf.math.abs,
    "sqrt": tf.math.sqrt,
    "rsqrt": tf.math.rsqrt,
    "square": tf.math.square,
    "exp": tf.math.exp,
    "log": tf.math.log,
    "erf": tf.math.erf,
    "erfc": tf.math.erfc,
    "expm1": tf.math.expm1,
    "log1p": tf.math.log1p,
    "sin": tf.math.sin,
    "cos": tf.math.cos,
    "atan": tf.math.atan,
    "reciprocal": tf.math.reciprocal,
    "tan": tf.math.tan,
    "asin": lambda x: tf.math.asin(x / 4),
    "acos": lambda x: tf.math.acos(x / 4),
    "sinh": tf.math.sinh,
    "cosh": tf.math.cosh,
    "asinh": tf.math.asinh,
    "acosh": lambda x: tf.math.acosh(x + 1),
    "atanh": lambda x: tf.math.atanh(x / 4),
    "gelu_exact": lambda x: tf.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: tf.nn.gelu(x, approximate=True),
}


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE_BINARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_binary_op_gradients_match_cpu(name, dtype):
    x = random_array((4, 9), dtype, seed=1, low=0.5, high=3)
    y = random_array((4, 9), dtype, seed=2, low=0.5, high=3)
    assert_gradients_match_cpu(DIFFERENTIABLE_BINARY[name], x, y)


@pytest.mark.parametrize("name", sorted(DIFFERENTIABLE_UNARY))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unary_op_gradients_match_cpu(name, dtype):
    x = random_array((4, 9), dtype, seed=1, low=0.5, high=3)
    assert_gradients_match_cpu(DIFFERENTIABLE_UNARY[name], x)


def test_select_and_cast_gradients_match_cpu():
    condition = random_array((4, 9), np.bool_, seed=1)
    x = random_array((4, 9), np.float32, seed=2)
    y = random_array((4, 9), np.float32, seed=3)
    assert_gradients_match_cpu(lambda a, b: tf.where(condition, a, b), x, y)
    assert_gradients_match_cpu(lambda a: tf.cast(tf.cast(a, tf.float16), tf.float32) * a, x)


def on_gpu(fn, *args):
    with tf.device("/GPU:0"):
        return fn(*[tf.constant(a) for a in args])


def test_incompatible_shapes_are_invalid_argument_with_tensorflow_message():
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"Incompatible shapes: \[2,3\] vs. \[4\]"):
        on_gpu(tf.math.add, np.ones((2, 3), np.float32), np.ones((4,), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="Incompatible shapes"):
        on_gpu(tf.math.less, np.ones((2, 3), np.int64), np.ones((2,), np.int64))
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match=r"condition \[2,3\], then \[4\], and else \[1\] must be broadcastable"):
        on_gpu(lambda c, t, e: tf.where(c, t, e), np.ones((2, 3), np.bool_),
               np.ones((4,), np.float32), np.ones((1,), np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have the same size and shape"):
        on_gpu(lambda a, b: tf.raw_ops.AddN(inputs=[a, b]), np.ones((2, 3), np.float32),
               np.ones((3,), np.float32))


def test_mismatched_dtypes_are_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError):
        on_gpu(lambda a, b: tf.raw_ops.AddV2(x=a, y=b), np.ones((2,), np.float32),
               np.ones((2,), np.float64))


def test_bad_fill_arguments_are_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Dimension -1 must be >= 0"):
        on_gpu(lambda v: tf.raw_ops.Fill(dims=[2, -1], value=v), np.float32(1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="dims must represent a vector"):
        on_gpu(lambda v: tf.raw_ops.Fill(dims=[[2]], value=v), np.float32(1))
    with pytest.raises(tf.errors.InvalidArgumentError, match="value must represent a scalar"):
        on_gpu(lambda v: tf.raw_ops.Fill(dims=[2], value=v), np.ones((2,), np.float32))


@pytest.mark.parametrize("op,expected", [(tf.raw_ops.Equal, False), (tf.raw_ops.NotEqual, True)])
def test_equality_of_incompatible_shapes_without_shape_error_is_a_scalar(op, expected):
    fn = lambda a, b: op(x=a, y=b, incompatible_shape_error=False)  # noqa: E731
    result = assert_matches_cpu(fn, np.ones((2,), np.float32), np.ones((3,), np.float32))
    assert result.shape == () and bool(result.numpy()) is expected


def test_elementwise_kernels_use_descriptors_created_and_destroyed_per_call():
    x = random_array((10, 3), np.float32)
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        (tf.math.multiply(x, x[0]) + tf.math.sqrt(tf.abs(x))).numpy()
    calls = vgpu.stats()["descriptor_calls"]
    for kind in ("op_tensor", "tensor"):
        assert calls[kind]["create"] == calls[kind]["destroy"] == calls[kind]["set"] >= 1
    assert calls["op_tensor"]["create"] >= 4  # multiply, abs, sqrt, add


def test_integer_division_by_zero_fails_the_op_without_crashing(run_python):
    result = run_python(
        """
        import tensorflow as tf
        with tf.device("/GPU:0"):
            x = tf.constant([1, 2, 3], tf.int64)
            y = tf.constant([1, 0, 2], tf.int64)
            try:
                print(tf.math.floordiv(x, y).numpy())
                print("NO ERROR")
            except tf.errors.OpError as error:
                print("ERROR", type(error).__name__)
        print("ALIVE")
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ERROR" in result.stdout and "ALIVE" in result.stdout, result.stdout
    assert "Integer division by zero" in result.stderr


SPECIALS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-30, 3e38, -3e38],
                    np.float32)


@pytest.mark.parametrize("dtype", FLOATING)
def test_predicates_and_math_functions_keep_ieee_special_values_like_cpu(dtype):
    with np.errstate(over="ignore"):
        specials = SPECIALS.astype(dtype)
    for fn in (tf.math.is_finite, tf.math.is_nan, tf.math.is_inf):
        out = assert_matches_cpu(fn, specials)
        assert out.dtype == tf.bool
    for fn in (tf.math.erf, tf.math.erfc, tf.math.expm1, tf.math.log1p, tf.math.atan,
               tf.math.sinh, tf.math.asinh):
        assert_matches_cpu(fn, specials)
    y = np.array([0.0, 1.0, -1.0, np.inf, np.nan, 0.0, 2.0, -0.0, np.nan, 5.0], dtype)
    for fn in (tf.math.atan2, tf.math.xlogy, tf.math.xdivy):
        assert_matches_cpu(fn, specials, y)


@pytest.mark.parametrize("dtype", FLOATING)
def test_predicates_match_cpu_past_vector_lengths(dtype):
    # The predicates run as plain vectorised loops: 1031 elements (a tail after full vectors)
    # with the special values spread through them.
    with np.errstate(over="ignore"):
        x = np.resize(SPECIALS.astype(dtype), 1031)
    x[::7] = random_array((148,), dtype, seed=3)
    for fn in (tf.math.is_finite, tf.math.is_nan, tf.math.is_inf):
        assert_matches_cpu(fn, x)


def test_logical_not_and_integer_neg_abs_match_cpu_in_place_and_past_vector_lengths():
    flags = np.arange(1031) % 3 == 0
    assert_matches_cpu(tf.math.logical_not, flags)
    ints = random_array((1031,), np.int64, seed=4, low=-1000, high=1000)
    ints[::97] = np.iinfo(np.int64).min  # wraps, as on TensorFlow's CPU
    for fn in (tf.math.negative, tf.math.abs):
        assert_matches_cpu(fn, ints)
        # On a temporary, which TensorFlow hands to the kernel as its output (in place).
        assert_matches_cpu(lambda a: fn(a * np.int64(3)), ints)


@pytest.mark.parametrize("dtype", FLOATING_AND_INT64)
@pytest.mark.parametrize("bounds", ["scalars", "tensors", "mixed"])
def test_clip_by_value_matches_cpu(dtype, bounds):
    t = random_array((5, 13), dtype, seed=1, low=-8, high=8)
    lo = np.array(-2, dtype) if bounds != "tensors" else random_array((5, 13), dtype, 2, -4, -1)
    hi = np.array(3, dtype) if bounds == "scalars" else random_array((5, 13), dtype, 3, 1, 4)
    assert_matches_cpu(lambda a, b, c: tf.raw_ops.ClipByValue(t=a, clip_value_min=b,
                                                              clip_value_max=c), t, lo, hi)


def test_clip_by_value_of_an_empty_tensor_is_empty():
    out = on_gpu(lambda a: tf.raw_ops.ClipByValue(t=a, clip_value_min=0.0, clip_value_max=1.0),
                 np.zeros((0, 3), np.float32))
    assert out.shape == (0, 3)


def test_clip_by_value_with_bad_bounds_is_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="must be either of the same shape as input, or a scalar"):
        on_gpu(lambda a, b: tf.raw_ops.ClipByValue(t=a, clip_value_min=b, clip_value_max=b),
               np.ones((3,), np.float32), np.ones((1,), np.float32))


@pytest.mark.parametrize("name", ["rsqrt_grad", "reciprocal_grad", "inv_grad", "sqrt_grad"])
def test_unary_gradient_helpers_need_equal_element_counts_like_tensorflow(name):
    fn = BINARY[name][0]
    with pytest.raises(tf.errors.InvalidArgumentError,
                       match="same number of elements, got 3 and 1"):
        on_gpu(fn, np.ones((3,), np.float32), np.ones((1,), np.float32))
    # Equal counts in different shapes: the output takes the first input's shape.
    out = assert_matches_cpu(fn, random_array((2, 3), np.float32, 1, 0.5, 2),
                             random_array((6,), np.float32, 2))
    assert out.shape == (2, 3)


RANGE_CASES = [
    (0, 10, 1), (0, 10, 3), (10, 0, -3), (0.1, 100.0, 0.1), (-1.5, 2.5, 0.25), (5, 5, 1),
    (3.0, -2.0, -0.7), (0, 1, 0.3333),
]


@pytest.mark.parametrize("dtype", [tf.float32, tf.float64, tf.float16, tf.bfloat16, tf.int64])
@pytest.mark.parametrize("start,limit,delta", RANGE_CASES)
def test_range_matches_cpu(dtype, start, limit, delta):
    if dtype == tf.int64 and any(isinstance(v, float) for v in (start, limit, delta)):
        pytest.skip("integer range of float bounds")
    if dtype in (tf.float16, tf.bfloat16) and limit == 100.0:
        limit = 30.0

    def make():
        return tf.raw_ops.Range(start=tf.constant(start, dtype), limit=tf.constant(limit, dtype),
                                delta=tf.constant(delta, dtype))

    expected = run_on("/CPU:0", make)
    vgpu.reset_stats()
    actual = run_on("/GPU:0", make)
    assert actual.device.endswith("GPU:0") and actual.shape == expected.shape
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())
    if expected.shape[0] > 0:
        assert vgpu.stats()["launches"] >= 1


@pytest.mark.parametrize("start,limit,delta,match", [
    (0.0, 1.0, 0.0, "Requires delta != 0"),
    (5.0, 1.0, 1.0, "Requires start <= limit when delta > 0"),
    (1.0, 5.0, -1.0, "Requires start >= limit when delta < 0"),
])
def test_bad_range_is_invalid_argument(start, limit, delta, match):
    f32 = lambda v: tf.constant(v, tf.float32)  # noqa: E731
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError, match=match):
        tf.raw_ops.Range(start=f32(start), limit=f32(limit), delta=f32(delta))
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match=r"start must be a scalar, not shape \[2\]"):
        tf.raw_ops.Range(start=f32([0.0, 1.0]), limit=f32(limit), delta=f32(1.0))


def test_int64_range_of_extreme_bounds_matches_cpu():
    big = 2**62
    for start, limit, delta in [(-big, big, big // 3), (big, -big, -(big // 5))]:
        assert_matches_cpu(lambda: tf.raw_ops.Range(start=tf.constant(start, tf.int64),
                                                    limit=tf.constant(limit, tf.int64),
                                                    delta=tf.constant(delta, tf.int64)))


def test_zeros_like_of_a_tensor_list_stays_on_the_device():
    # TensorFlow differentiates a while loop through TensorLists and asks for zeros like them
    # (DT_VARIANT); its GPU build has a kernel for that, and so does the virtual GPU.
    x = random_array((5, 3), np.float32)

    @tf.function
    def zeros(values):
        handle = tf.raw_ops.TensorListFromTensor(tensor=values, element_shape=[3])
        handle = tf.raw_ops.TensorListSetItem(input_handle=handle, index=2,
                                              item=values[0] * 2.0)
        zero_list = tf.zeros_like(handle)
        return tf.raw_ops.TensorListStack(input_handle=zero_list, element_dtype=tf.float32,
                                          element_shape=[3])

    expected = run_on("/CPU:0", zeros, x)
    vgpu.reset_stats()
    actual = run_on("/GPU:0", zeros, x)
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())
    assert vgpu.stats()["launches"] >= 1


def test_zeros_like_of_an_optional_stays_on_the_device():
    # The gradient of a tf.cond over an optional value (dynamic_rnn with sequence lengths in
    # TensorFlow's own kernel tests) asks for zeros like an Optional variant.
    x = random_array((4, 3), np.float32)

    @tf.function
    def zeros(values):
        full = tf.raw_ops.OptionalFromValue(components=[values, values[0]])
        empty = tf.raw_ops.OptionalNone()
        zero_full, zero_empty = tf.zeros_like(full), tf.zeros_like(empty)
        first, second = tf.raw_ops.OptionalGetValue(
            optional=zero_full, output_types=[tf.float32, tf.float32],
            output_shapes=[[4, 3], [3]])
        return first, second, tf.raw_ops.OptionalHasValue(optional=zero_empty)

    vgpu.reset_stats()
    first, second, has_value = run_on("/GPU:0", zeros, x)
    np.testing.assert_array_equal(first.numpy(), np.zeros((4, 3), np.float32))
    np.testing.assert_array_equal(second.numpy(), np.zeros((3,), np.float32))
    assert not bool(has_value.numpy())
    assert vgpu.stats()["launches"] >= 1


def test_gradient_of_a_while_loop_with_tensor_lists_matches_cpu():
    x = random_array((6, 4), np.float32, seed=3)
    w = random_array((4, 4), np.float32, seed=4, low=-0.5, high=0.5)

    def loop(inputs, weights):
        ta = tf.TensorArray(tf.float32, size=6)
        state = tf.zeros([4])
        for i in tf.range(6):
            state = tf.tanh(tf.linalg.matvec(weights, state) + inputs[i])
            ta = ta.write(i, state)
        return ta.stack()

    assert_gradients_match_cpu(tf.function(loop), x, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16, np.int32, np.int64,
                                   np.uint8, np.bool_])
@pytest.mark.parametrize("condition_shape,shape", [((), (4, 5)), ((4,), (4, 5, 2)), ((3, 7), (3, 7)),
                                                    ((6,), (6,)), ((0,), (0, 3))])
def test_v1_select_matches_cpu(dtype, condition_shape, shape):
    condition = random_array(condition_shape, np.bool_, seed=1)
    t = random_array(shape, dtype, seed=2)
    e = random_array(shape, dtype, seed=3)
    assert_matches_cpu(lambda c, a, b: tf.raw_ops.Select(condition=c, x=a, y=b), condition, t, e,
                       expect_launch=t.size > 0)


@pytest.mark.parametrize("condition_shape,shape,else_shape,match", [
    ((), (2, 3), (3,), r"'then' and 'else' must have the same size.  but received: \[2,3\] vs"),
    ((3,), (4, 2), (4, 2), "Number of batches of 'then' must match size of 'cond', but saw: 4 vs. 3"),
    ((2, 2), (2, 3), (2, 3), "must have the same size and shape"),
])
def test_bad_v1_select_is_invalid_argument(condition_shape, shape, else_shape, match):
    with pytest.raises(tf.errors.InvalidArgumentError, match=match):
        on_gpu(lambda c, a, b: tf.raw_ops.Select(condition=c, x=a, y=b),
               np.ones(condition_shape, np.bool_), np.ones(shape, np.float32),
               np.ones(else_shape, np.float32))


@pytest.mark.parametrize("source,destination,shape", [
    (tf.float32, tf.int32, (3, 4)), (tf.float32, tf.uint8, (5,)), (tf.float16, tf.bfloat16, (7,)),
    (tf.uint8, tf.float32, (2, 4)), (tf.int64, tf.float64, ()), (tf.int16, tf.int64, (3, 4)),
])
def test_bitcast_shares_the_bytes_like_cpu(source, destination, shape):
    x = random_array(shape, source.as_numpy_dtype, seed=1, low=0, high=100)
    actual = assert_matches_cpu(lambda t: tf.bitcast(t, destination), x, expect_launch=False,
                                equal_nan=True, rtol=0, atol=0)
    assert actual.dtype == destination


def test_bitcast_to_a_wider_type_needs_the_matching_last_dimension():
    with pytest.raises(tf.errors.InvalidArgumentError, match="Cannot bitcast from 4 to 1"):
        on_gpu(lambda t: tf.bitcast(t, tf.float32), np.ones((3,), np.uint8))


def test_keras_signbit_matches_cpu():
    # Bitcast on the device, then TensorFlow's host int32 kernels: no launch at all.
    import keras

    x = np.array([-2.0, -0.0, 0.0, 3.0, -np.inf, np.nan], np.float32)
    assert_matches_cpu(keras.ops.signbit, x, expect_launch=False)
