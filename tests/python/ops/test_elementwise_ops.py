"""Element-wise ops on the virtual GPU against TensorFlow's CPU kernels: binary arithmetic,
comparisons and logical ops with numpy broadcasting, unary math, SelectV2, Cast, AddN, Fill,
ZerosLike/OnesLike, in every registered dtype, with empty, scalar and odd shapes; gradients of
the differentiable ops; TensorFlow's errors for bad input."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import assert_gradients_match_cpu, assert_matches_cpu, random_array

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
    "equal": (tf.math.equal, FLOATING_AND_INT64 + [np.uint8, np.bool_], "coarse"),
    "not_equal": (tf.math.not_equal, FLOATING_AND_INT64 + [np.uint8, np.bool_], "coarse"),
    "greater": (tf.math.greater, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "greater_equal": (tf.math.greater_equal, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "less": (tf.math.less, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "less_equal": (tf.math.less_equal, FLOATING_AND_INT64 + [np.uint8], "coarse"),
    "logical_and": (tf.math.logical_and, [np.bool_], "any"),
    "logical_or": (tf.math.logical_or, [np.bool_], "any"),
}
SAME_SHAPE_ONLY = {"rsqrt_grad", "sqrt_grad"}  # TensorFlow's kernels take equal shapes only


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
        assert_matches_cpu(lambda c, t, e: tf.where(c, t, e), condition, then, other,
                           expect_launch=size > 0)


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


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16, np.float64, np.int64,
                                   np.uint8, np.bool_])
def test_zeros_like_and_ones_like_match_cpu(dtype):
    for shape in [(0,), (), (3, 5)]:
        x = random_array(shape, dtype, seed=1)
        assert_matches_cpu(tf.zeros_like, x, expect_launch=x.size > 0)
        assert_matches_cpu(tf.ones_like, x, expect_launch=x.size > 0)


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
}
DIFFERENTIABLE_UNARY = {
    "neg": tf.math.negative,
    "abs": tf.math.abs,
    "sqrt": tf.math.sqrt,
    "rsqrt": tf.math.rsqrt,
    "square": tf.math.square,
    "exp": tf.math.exp,
    "log": tf.math.log,
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
