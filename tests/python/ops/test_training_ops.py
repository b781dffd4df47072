"""The optimizers' update ops (ResourceApply* and ResourceSparseApply*) on virtual-GPU variables
against TensorFlow's CPU kernels: a few update steps from the same variables, every dtype the
CPU kernel has, every boolean attribute; duplicate and out-of-range indices of the sparse
updates; and bad inputs raising the CPU kernel's error class and message."""
import re

import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import random_array, tolerance

BF16 = tf.bfloat16.as_numpy_dtype
ALL_FLOATS = (np.float32, np.float64, np.float16, BF16)
NO_BF16 = (np.float32, np.float64, np.float16)
F32_F64 = (np.float32, np.float64)

# name: (op, slot variables, scalar hyper-parameters in order, gradient name, attributes,
#        dtypes TensorFlow's CPU kernel has)
DENSE = {
    "gradient_descent": ("ResourceApplyGradientDescent", [], [("alpha", 0.1)], "delta", {},
                         ALL_FLOATS),
    "proximal_gradient_descent": ("ResourceApplyProximalGradientDescent", [],
                                  [("alpha", 0.1), ("l1", 0.05), ("l2", 0.02)], "delta", {},
                                  F32_F64),
    "proximal_gradient_descent_no_l1": ("ResourceApplyProximalGradientDescent", [],
                                        [("alpha", 0.1), ("l1", 0.0), ("l2", 0.02)], "delta", {},
                                        F32_F64),
    "momentum": ("ResourceApplyMomentum", ["accum"], [("lr", 0.05), ("momentum", 0.9)], "grad",
                 {"use_nesterov": False}, ALL_FLOATS),
    "momentum_nesterov": ("ResourceApplyMomentum", ["accum"], [("lr", 0.05), ("momentum", 0.9)],
                          "grad", {"use_nesterov": True}, ALL_FLOATS),
    "keras_momentum": ("ResourceApplyKerasMomentum", ["accum"],
                       [("lr", 0.05), ("momentum", 0.9)], "grad", {"use_nesterov": False},
                       ALL_FLOATS),
    "keras_momentum_nesterov": ("ResourceApplyKerasMomentum", ["accum"],
                                [("lr", 0.05), ("momentum", 0.9)], "grad",
                                {"use_nesterov": True}, ALL_FLOATS),
    "adam": ("ResourceApplyAdam", ["m", "v"],
             [("beta1_power", 0.81), ("beta2_power", 0.998), ("lr", 0.01), ("beta1", 0.9),
              ("beta2", 0.999), ("epsilon", 1e-3)], "grad", {"use_nesterov": False},
             ALL_FLOATS),
    "adam_nesterov": ("ResourceApplyAdam", ["m", "v"],
                      [("beta1_power", 0.81), ("beta2_power", 0.998), ("lr", 0.01),
                       ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-3)], "grad",
                      {"use_nesterov": True}, ALL_FLOATS),
    "adam_with_amsgrad": ("ResourceApplyAdamWithAmsgrad", ["m", "v", "vhat"],
                          [("beta1_power", 0.81), ("beta2_power", 0.998), ("lr", 0.01),
                           ("beta1", 0.9), ("beta2", 0.999), ("epsilon", 1e-3)], "grad", {},
                          ALL_FLOATS),
    "ada_max": ("ResourceApplyAdaMax", ["m", "v"],
                [("beta1_power", 0.81), ("lr", 0.01), ("beta1", 0.9), ("beta2", 0.999),
                 ("epsilon", 1e-3)], "grad", {}, NO_BF16),
    "adagrad": ("ResourceApplyAdagrad", ["accum"], [("lr", 0.1)], "grad",
                {"update_slots": True}, ALL_FLOATS),
    "adagrad_fixed_slots": ("ResourceApplyAdagrad", ["accum"], [("lr", 0.1)], "grad",
                            {"update_slots": False}, ALL_FLOATS),
    "adagrad_v2": ("ResourceApplyAdagradV2", ["accum"], [("lr", 0.1), ("epsilon", 1e-3)], "grad",
                   {"update_slots": True}, ALL_FLOATS),
    "proximal_adagrad": ("ResourceApplyProximalAdagrad", ["accum"],
                         [("lr", 0.1), ("l1", 0.05), ("l2", 0.02)], "grad", {}, F32_F64),
    "proximal_adagrad_no_l1": ("ResourceApplyProximalAdagrad", ["accum"],
                               [("lr", 0.1), ("l1", 0.0), ("l2", 0.02)], "grad", {}, F32_F64),
    "adadelta": ("ResourceApplyAdadelta", ["accum", "accum_update"],
                 [("lr", 1.0), ("rho", 0.95), ("epsilon", 1e-3)], "grad", {}, ALL_FLOATS),
    "rms_prop": ("ResourceApplyRMSProp", ["ms", "mom"],
                 [("lr", 0.01), ("rho", 0.9), ("momentum", 0.5), ("epsilon", 1e-3)], "grad", {},
                 ALL_FLOATS),
    "centered_rms_prop": ("ResourceApplyCenteredRMSProp", ["mg", "ms", "mom"],
                          [("lr", 0.01), ("rho", 0.9), ("momentum", 0.5), ("epsilon", 1e-3)],
                          "grad", {}, ALL_FLOATS),
    "ftrl": ("ResourceApplyFtrl", ["accum", "linear"],
             [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("lr_power", -0.5)], "grad",
             {"multiply_linear_by_lr": False}, ALL_FLOATS),
    "ftrl_power": ("ResourceApplyFtrl", ["accum", "linear"],
                   [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("lr_power", -0.3)], "grad",
                   {"multiply_linear_by_lr": False}, ALL_FLOATS),
    "ftrl_multiply": ("ResourceApplyFtrl", ["accum", "linear"],
                      [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("lr_power", -0.5)], "grad",
                      {"multiply_linear_by_lr": True}, ALL_FLOATS),
    "ftrl_v2": ("ResourceApplyFtrlV2", ["accum", "linear"],
                [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("l2_shrinkage", 0.03),
                 ("lr_power", -0.5)], "grad", {"multiply_linear_by_lr": False}, ALL_FLOATS),
    "ftrl_v2_multiply_power": ("ResourceApplyFtrlV2", ["accum", "linear"],
                               [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("l2_shrinkage", 0.03),
                                ("lr_power", -0.3)], "grad", {"multiply_linear_by_lr": True},
                               ALL_FLOATS),
    "add_sign": ("ResourceApplyAddSign", ["m"],
                 [("lr", 0.01), ("alpha", 1.0), ("sign_decay", 0.9), ("beta", 0.9)], "grad", {},
                 ALL_FLOATS),
    "power_sign": ("ResourceApplyPowerSign", ["m"],
                   [("lr", 0.01), ("logbase", 0.7), ("sign_decay", 0.9), ("beta", 0.9)], "grad",
                   {}, ALL_FLOATS),
}

# name: (op, slot variables, scalars, attributes, CPU dtypes)
SPARSE = {
    "adagrad": ("ResourceSparseApplyAdagrad", ["accum"], [("lr", 0.1)], {"update_slots": True},
                ALL_FLOATS),
    "adagrad_v2": ("ResourceSparseApplyAdagradV2", ["accum"], [("lr", 0.1), ("epsilon", 1e-3)],
                   {"update_slots": True}, ALL_FLOATS),
    "proximal_adagrad": ("ResourceSparseApplyProximalAdagrad", ["accum"],
                         [("lr", 0.1), ("l1", 0.05), ("l2", 0.02)], {}, F32_F64),
    "ftrl": ("ResourceSparseApplyFtrl", ["accum", "linear"],
             [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("lr_power", -0.5)],
             {"multiply_linear_by_lr": False}, ALL_FLOATS),
    "ftrl_multiply_power": ("ResourceSparseApplyFtrl", ["accum", "linear"],
                            [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("lr_power", -0.3)],
                            {"multiply_linear_by_lr": True}, ALL_FLOATS),
    "ftrl_v2": ("ResourceSparseApplyFtrlV2", ["accum", "linear"],
                [("lr", 0.1), ("l1", 0.01), ("l2", 0.02), ("l2_shrinkage", 0.03),
                 ("lr_power", -0.5)], {"multiply_linear_by_lr": False}, ALL_FLOATS),
    "keras_momentum": ("ResourceSparseApplyKerasMomentum", ["accum"],
                       [("lr", 0.05), ("momentum", 0.9)], {"use_nesterov": False}, ALL_FLOATS),
    "keras_momentum_nesterov": ("ResourceSparseApplyKerasMomentum", ["accum"],
                                [("lr", 0.05), ("momentum", 0.9)], {"use_nesterov": True},
                                ALL_FLOATS),
    # CPU-only in TensorFlow: the legacy optimizers' sparse updates.
    "momentum": ("ResourceSparseApplyMomentum", ["accum"], [("lr", 0.05), ("momentum", 0.9)],
                 {"use_nesterov": False}, ALL_FLOATS),
    "momentum_nesterov": ("ResourceSparseApplyMomentum", ["accum"],
                          [("lr", 0.05), ("momentum", 0.9)], {"use_nesterov": True}, ALL_FLOATS),
    "adadelta": ("ResourceSparseApplyAdadelta", ["accum", "accum_update"],
                 [("lr", 1.0), ("rho", 0.95), ("epsilon", 1e-3)], {}, ALL_FLOATS),
    "rms_prop": ("ResourceSparseApplyRMSProp", ["ms", "mom"],
                 [("lr", 0.01), ("rho", 0.9), ("momentum", 0.5), ("epsilon", 1e-3)], {},
                 NO_BF16),
    "centered_rms_prop": ("ResourceSparseApplyCenteredRMSProp", ["mg", "ms", "mom"],
                          [("lr", 0.01), ("rho", 0.9), ("momentum", 0.5), ("epsilon", 1e-3)], {},
                          NO_BF16),
    "proximal_gradient_descent": ("ResourceSparseApplyProximalGradientDescent", [],
                                  [("alpha", 0.1), ("l1", 0.05), ("l2", 0.02)], {}, F32_F64),
}

SHAPE = (7, 3)


def _variables(device, dtype, slots):
    with tf.device(device):
        var = tf.Variable(random_array(SHAPE, dtype, seed=1))
        # Slots start positive (accumulators), small and distinct.
        slot_vars = [tf.Variable((np.abs(random_array(SHAPE, np.float32, seed=2 + i)) * 0.1 +
                                  0.2).astype(dtype)) for i in range(len(slots))]
    return var, slot_vars


def _dense_steps(device, dtype, case, steps=3):
    op, slots, scalars, grad_name, attrs, _ = case
    var, slot_vars = _variables(device, dtype, slots)
    with tf.device(device):
        for step in range(steps):
            kwargs = {"var": var.handle, grad_name: tf.constant(
                random_array(SHAPE, dtype, seed=10 + step))}
            kwargs.update({name: v.handle for name, v in zip(slots, slot_vars)})
            kwargs.update({name: tf.constant(value, dtype) for name, value in scalars})
            getattr(tf.raw_ops, op)(**kwargs, **attrs)
        return [v.read_value() for v in [var] + slot_vars]


def _assert_all_close(actual, expected, dtype):
    for a, e in zip(actual, expected):
        assert a.device.endswith("GPU:0")
        np.testing.assert_allclose(a.numpy().astype(np.float64), e.numpy().astype(np.float64),
                                   **tolerance(dtype))


def _dense_cases():
    return [pytest.param(name, dtype, id=f"{name}-{np.dtype(dtype).name}")
            for name, case in sorted(DENSE.items()) for dtype in case[-1]]


@pytest.mark.parametrize("name,dtype", _dense_cases())
def test_dense_update_matches_cpu(name, dtype):
    expected = _dense_steps("/CPU:0", dtype, DENSE[name])
    vgpu.reset_stats()
    actual = _dense_steps("/GPU:0", dtype, DENSE[name])
    assert vgpu.stats()["launches"] >= 3
    _assert_all_close(actual, expected, dtype)


def test_every_dense_update_of_bfloat16_runs_on_the_virtual_gpu():
    # bfloat16 updates the CPU kernels lack still run on the device (checked against float32).
    for name in ("proximal_adagrad", "ada_max"):
        expected = _dense_steps("/GPU:0", np.float32, DENSE[name])
        actual = _dense_steps("/GPU:0", BF16, DENSE[name])
        _assert_all_close(actual, expected, BF16)


INDICES = [5, 1, 5, 0]  # row 5 twice: duplicates update the row twice, in order


def _sparse_steps(device, dtype, case, index_dtype, indices=INDICES, steps=2):
    op, slots, scalars, attrs, _ = case
    var, slot_vars = _variables(device, dtype, slots)
    with tf.device(device):
        for step in range(steps):
            kwargs = {"var": var.handle,
                      "grad": tf.constant(random_array((len(indices), 3), dtype, seed=20 + step)),
                      "indices": tf.constant(indices, index_dtype)}
            kwargs.update({name: v.handle for name, v in zip(slots, slot_vars)})
            kwargs.update({name: tf.constant(value, dtype) for name, value in scalars})
            getattr(tf.raw_ops, op)(**kwargs, **attrs)
        return [v.read_value() for v in [var] + slot_vars]


def _sparse_cases():
    return [pytest.param(name, dtype, index_dtype,
                         id=f"{name}-{np.dtype(dtype).name}-{np.dtype(index_dtype).name}")
            for name, case in sorted(SPARSE.items()) for dtype in case[-1]
            for index_dtype in (np.int32, np.int64)]


@pytest.mark.parametrize("name,dtype,index_dtype", _sparse_cases())
def test_sparse_update_matches_cpu_with_duplicate_indices(name, dtype, index_dtype):
    expected = _sparse_steps("/CPU:0", dtype, SPARSE[name], index_dtype)
    vgpu.reset_stats()
    actual = _sparse_steps("/GPU:0", dtype, SPARSE[name], index_dtype)
    assert vgpu.stats()["launches"] >= 2
    _assert_all_close(actual, expected, dtype)


@pytest.mark.parametrize("name", sorted(SPARSE))
def test_sparse_update_skips_out_of_range_indices(name):
    # The GPU kernels skip an index outside the variable; its gradient row changes nothing.
    case = SPARSE[name]
    expected = _sparse_steps("/CPU:0", np.float32, case, np.int64, indices=[5, 1, 0], steps=1)
    op, slots, scalars, attrs, _ = case
    var, slot_vars = _variables("/GPU:0", np.float32, slots)
    grad = random_array((3, 3), np.float32, seed=20)
    with tf.device("/GPU:0"):
        kwargs = {"var": var.handle, "indices": tf.constant([5, 7, 1, -1, 0], tf.int64),
                  "grad": tf.constant(np.concatenate([grad[:1], np.full((1, 3), 9.0, np.float32),
                                                      grad[1:2], np.full((1, 3), 9.0, np.float32),
                                                      grad[2:]]))}
        kwargs.update({n: v.handle for n, v in zip(slots, slot_vars)})
        kwargs.update({n: tf.constant(value, tf.float32) for n, value in scalars})
        getattr(tf.raw_ops, op)(**kwargs, **attrs)
    _assert_all_close([v.read_value() for v in [var] + slot_vars], expected, np.float32)


def _message(error):
    """The kernel's message without TensorFlow's function-node prefix and op suffix."""
    text = str(error).split("\n")[0]
    text = re.sub(r"^\{\{function_node [^}]*\}\} ", "", text)
    return re.sub(r" \[Op:\w+\].*$", "", text)


def _assert_same_error(build):
    """build(device) runs a bad update on `device`: the GPU raises the CPU's error and message."""
    errors = []
    for device in ("/CPU:0", "/GPU:0"):
        with pytest.raises(tf.errors.OpError) as info:
            build(device)
        errors.append(info.value)
    assert type(errors[1]) is type(errors[0])
    assert _message(errors[1]) == _message(errors[0])


BAD_DENSE = {
    "non-scalar lr": lambda v, s: tf.raw_ops.ResourceApplyAdam(
        var=v.handle, m=s[0].handle, v=s[1].handle, beta1_power=0.9, beta2_power=0.99,
        lr=[0.1, 0.2], beta1=0.9, beta2=0.999, epsilon=1e-3, grad=tf.ones((7, 3))),
    "non-scalar momentum": lambda v, s: tf.raw_ops.ResourceApplyKerasMomentum(
        var=v.handle, accum=s[0].handle, lr=0.1, grad=tf.ones((7, 3)), momentum=[0.9]),
    "non-scalar lr_power": lambda v, s: tf.raw_ops.ResourceApplyFtrl(
        var=v.handle, accum=s[0].handle, linear=s[1].handle, grad=tf.ones((7, 3)), lr=0.1,
        l1=0.0, l2=0.0, lr_power=[-0.5]),
    "mismatched gradient": lambda v, s: tf.raw_ops.ResourceApplyRMSProp(
        var=v.handle, ms=s[0].handle, mom=s[1].handle, lr=0.1, rho=0.9, momentum=0.0,
        epsilon=1e-3, grad=tf.ones((3, 7))),
    "mismatched delta": lambda v, s: tf.raw_ops.ResourceApplyGradientDescent(
        var=v.handle, alpha=0.1, delta=tf.ones((7,))),
}


def _assert_update_raises_the_cpu_error(update):
    """update(var, slots) on a float32 variable with two slots ("a" and "b") raises on GPU:0 the
    error it raises on the CPU."""

    def build(device):
        var, slots = _variables(device, np.float32, ["a", "b"])
        with tf.device(device):
            update(var, slots)

    _assert_same_error(build)


@pytest.mark.parametrize("case", sorted(BAD_DENSE))
def test_bad_dense_update_raises_the_cpu_error(case):
    _assert_update_raises_the_cpu_error(BAD_DENSE[case])


def test_mismatched_slot_shape_raises_the_cpu_error():
    def build(device):
        with tf.device(device):
            var = tf.Variable(np.zeros((2, 3), np.float32))
            accum = tf.Variable(np.ones((3, 2), np.float32))
            tf.raw_ops.ResourceApplyAdagrad(var=var.handle, accum=accum.handle, lr=0.1,
                                            grad=tf.ones((2, 3)))

    _assert_same_error(build)


BAD_SPARSE = {
    "indices not a vector": lambda v, s: tf.raw_ops.ResourceSparseApplyAdagrad(
        var=v.handle, accum=s[0].handle, lr=0.1, grad=tf.ones((2, 3)), indices=[[0, 1]]),
    "gradient rows do not match the indices": lambda v, s: tf.raw_ops.ResourceSparseApplyFtrl(
        var=v.handle, accum=s[0].handle, linear=s[1].handle, grad=tf.ones((3, 3)),
        indices=[0, 1], lr=0.1, l1=0.0, l2=0.0, lr_power=-0.5),
    "gradient columns do not match var": lambda v, s: tf.raw_ops.ResourceSparseApplyKerasMomentum(
        var=v.handle, accum=s[0].handle, lr=0.1, grad=tf.ones((2, 4)), indices=[0, 1],
        momentum=0.9),
    "non-scalar epsilon": lambda v, s: tf.raw_ops.ResourceSparseApplyAdagradV2(
        var=v.handle, accum=s[0].handle, lr=0.1, epsilon=[1e-3], grad=tf.ones((2, 3)),
        indices=[0, 1]),
}


@pytest.mark.parametrize("case", sorted(BAD_SPARSE))
def test_bad_sparse_update_raises_the_cpu_error(case):
    _assert_update_raises_the_cpu_error(BAD_SPARSE[case])


def test_update_of_a_variable_of_another_dtype_is_invalid_argument():
    with tf.device("/GPU:0"):
        var = tf.Variable(np.zeros((2, 3), np.float64))
        with pytest.raises(tf.errors.InvalidArgumentError, match="has dtype double"):
            tf.raw_ops.ResourceApplyGradientDescent(var=var.handle, alpha=0.1,
                                                    delta=tf.ones((2, 3)))


def test_update_keeps_earlier_reads_of_the_variable_intact():
    with tf.device("/GPU:0"):
        var = tf.Variable(np.ones((2, 3), np.float32))
        accum = tf.Variable(np.ones((2, 3), np.float32))
        before = var.read_value()
        tf.raw_ops.ResourceApplyAdagrad(var=var.handle, accum=accum.handle, lr=0.5,
                                        grad=tf.ones((2, 3)))
        tf.raw_ops.ResourceSparseApplyAdagrad(var=var.handle, accum=accum.handle, lr=0.5,
                                              grad=tf.ones((1, 3)), indices=[1])
    np.testing.assert_array_equal(before.numpy(), np.ones((2, 3)))
    assert not np.allclose(var.numpy(), 1.0)


LEGACY_OPTIMIZERS = {
    "gradient_descent": lambda: tf.compat.v1.train.GradientDescentOptimizer(0.1),
    "momentum": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9),
    "nesterov": lambda: tf.compat.v1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
    "adam": lambda: tf.compat.v1.train.AdamOptimizer(0.01),
    "adagrad": lambda: tf.compat.v1.train.AdagradOptimizer(0.1),
    "adadelta": lambda: tf.compat.v1.train.AdadeltaOptimizer(1.0),
    "rmsprop": lambda: tf.compat.v1.train.RMSPropOptimizer(0.01, momentum=0.5),
    "rmsprop_centered": lambda: tf.compat.v1.train.RMSPropOptimizer(0.01, momentum=0.5,
                                                                    centered=True),
    "ftrl": lambda: tf.compat.v1.train.FtrlOptimizer(
        0.1, l1_regularization_strength=0.01, l2_shrinkage_regularization_strength=0.01),
    "proximal_adagrad": lambda: tf.compat.v1.train.ProximalAdagradOptimizer(
        0.1, l1_regularization_strength=0.01),
    "proximal_gradient_descent": lambda: tf.compat.v1.train.ProximalGradientDescentOptimizer(
        0.1, l1_regularization_strength=0.01),
}


def _legacy_steps(device, name, sparse, steps=3):
    with tf.device(device):
        table = tf.Variable(np.linspace(-1, 1, 30, dtype=np.float32).reshape(10, 3))
        weights = tf.Variable(np.linspace(0.5, -0.5, 3, dtype=np.float32))
        optimizer = LEGACY_OPTIMIZERS[name]()
        for step in range(steps):
            with tf.GradientTape() as tape:
                rows = tf.gather(table, [1, 4, 1, 7]) if sparse else table * 1.0
                loss = tf.reduce_sum(tf.tanh(rows * weights + 0.1 * step))
            grads = tape.gradient(loss, [table, weights])
            optimizer.apply_gradients(zip(grads, [table, weights]))
        return [table.read_value(), weights.read_value()]


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "indexed_slices"])
@pytest.mark.parametrize("name", sorted(LEGACY_OPTIMIZERS))
def test_legacy_optimizer_steps_match_cpu(name, sparse):
    # The tf.compat.v1.train optimizers emit ResourceApply* (and ResourceSparseApply* or
    # ResourceScatter* for IndexedSlices gradients).
    expected = _legacy_steps("/CPU:0", name, sparse)
    actual = _legacy_steps("/GPU:0", name, sparse)
    _assert_all_close(actual, expected, np.float32)


def test_empty_updates_are_no_ops():
    with tf.device("/GPU:0"):
        var = tf.Variable(np.zeros((0, 3), np.float32))
        accum = tf.Variable(np.zeros((0, 3), np.float32))
        tf.raw_ops.ResourceApplyAdagrad(var=var.handle, accum=accum.handle, lr=0.5,
                                        grad=tf.zeros((0, 3)))
        var2 = tf.Variable(np.ones((2, 3), np.float32))
        accum2 = tf.Variable(np.ones((2, 3), np.float32))
        tf.raw_ops.ResourceSparseApplyAdagrad(var=var2.handle, accum=accum2.handle, lr=0.5,
                                              grad=tf.zeros((0, 3)),
                                              indices=tf.zeros((0,), tf.int32))
    np.testing.assert_array_equal(var2.numpy(), np.ones((2, 3)))
