"""Einsum on the virtual GPU against TensorFlow's CPU kernel: values and gradients (which are
Einsum too) of many equations (matrix products, transposes, sums, diagonals, ellipsis
broadcasting, the equations Keras' MultiHeadAttention and EinsumDense emit), every registered
dtype, empty shapes, and the error classes of bad equations and operands."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu
from ops.op_testing import (BF16, assert_gradients_match_cpu, assert_matches_cpu, random_array,
                            tolerance_table)

TOLERANCE = tolerance_table(float64=(1e-10, 1e-10), float32=(1e-5, 1e-5), float16=(2e-2, 2e-2),
                            bfloat16=(5e-2, 5e-2))

# equation -> operand shapes
EQUATIONS = {
    # matrix products, operands used as they are or transposed
    "ij,jk->ik": [(3, 4), (4, 5)],
    "ij,kj->ik": [(3, 4), (5, 4)],
    "ji,jk->ik": [(4, 3), (4, 5)],
    "ji,kj->ki": [(4, 3), (5, 4)],
    "bij,bjk->bik": [(2, 3, 4), (2, 4, 5)],
    "bij,bkj->bik": [(2, 3, 4), (2, 5, 4)],
    "bij,jk->bik": [(2, 3, 4), (4, 5)],
    "ijk,ikl->ijl": [(2, 3, 4), (2, 4, 3)],
    # outer and inner products, element-wise products
    "i,j->ij": [(3,), (4,)],
    "i,i->": [(5,), (5,)],
    "ij,ij->ij": [(3, 4), (3, 4)],
    "ij,ij->": [(3, 4), (3, 4)],
    "ij,j->i": [(3, 4), (4,)],
    # results in another order than the product's
    "ij,jk->ki": [(3, 4), (4, 5)],
    "abc,bd->dca": [(2, 3, 4), (3, 5)],
    # summed labels (in one operand only, not in the output)
    "ij,jk->k": [(3, 4), (4, 5)],
    "abc,cd->ad": [(2, 3, 4), (4, 5)],
    # one operand: transposes and sums
    "ij->ji": [(3, 4)],
    "ijk->kij": [(2, 3, 4)],
    "ij->i": [(3, 4)],
    "ijk->j": [(2, 3, 4)],
    "ij->": [(3, 4)],
    # diagonals: taken (a label repeated in an operand) and written (repeated in the output)
    "ii->i": [(4, 4)],
    "ii->": [(4, 4)],
    "iij->ji": [(3, 3, 2)],
    "i->ii": [(3,)],
    "iij,jk->ik": [(2, 2, 3), (3, 4)],
    "ij,jk->iik": [(2, 3), (3, 4)],
    # ellipsis broadcasting
    "...ij,...jk->...ik": [(2, 1, 3, 4), (5, 4, 2)],
    "...ij,jk->...ik": [(2, 3, 3, 4), (4, 5)],
    "ij,...jk->...ik": [(3, 4), (2, 4, 5)],
    "...ij->...ji": [(2, 3, 4, 5)],
    "...i,...i->...": [(2, 3, 4), (3, 4)],
    # Keras' EinsumDense and MultiHeadAttention (projections, scores, weighted values)
    "abc,cde->abde": [(2, 5, 8), (8, 2, 4)],
    "aecd,abcd->acbe": [(2, 6, 2, 4), (2, 5, 2, 4)],
    "acbe,aecd->abcd": [(2, 2, 5, 6), (2, 6, 2, 4)],
    "abcd,cde->abe": [(2, 5, 2, 4), (2, 4, 8)],
    "ab,bc->ac": [(4, 6), (6, 3)],
}


def einsum(equation):
    """The raw Einsum op (tf.einsum refuses some equations the op takes, e.g. "i->ii")."""
    return lambda *t: tf.raw_ops.Einsum(inputs=list(t), equation=equation)


def operands(shapes, dtype=np.float32, seed=0):
    return [random_array(shape, dtype, seed=seed + i, low=-1, high=1)
            for i, shape in enumerate(shapes)]


@pytest.mark.parametrize("equation", sorted(EQUATIONS))
def test_einsum_and_its_gradients_match_cpu(equation):
    args = operands(EQUATIONS[equation])
    vgpu.reset_stats()
    assert_matches_cpu(einsum(equation), *args, **TOLERANCE[np.float32])
    assert vgpu.stats()["launches"] >= 1
    assert_gradients_match_cpu(einsum(equation), *args, **TOLERANCE[np.float32])


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float64], ids=["float16", "bfloat16",
                                                                      "float64"])
@pytest.mark.parametrize("equation", ["abc,cde->abde", "aecd,abcd->acbe", "ii->i", "ij->i",
                                      "...ij,...jk->...ik"])
def test_einsum_and_its_gradients_match_cpu_in_other_dtypes(equation, dtype):
    args = operands(EQUATIONS[equation], dtype)
    assert_matches_cpu(einsum(equation), *args, **TOLERANCE[dtype])
    assert_gradients_match_cpu(einsum(equation), *args, **TOLERANCE[dtype])


def test_einsum_of_operands_already_in_product_layout_is_a_single_launch():
    # "abc,cde->abde": the first operand is [free, contract], the second [contract, free]
    # (read transposed), and the product comes out in the output's order.
    args = operands(EQUATIONS["abc,cde->abde"])
    vgpu.reset_stats()
    assert_matches_cpu(einsum("abc,cde->abde"), *args, **TOLERANCE[np.float32])
    assert vgpu.stats()["launches"] == 1


@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(3, 0), (0, 4)]),      # an empty contraction: zeros
    ("ij,jk->ik", [(0, 3), (3, 4)]),      # an empty output
    ("ij->i", [(3, 0)]),                  # an empty sum: zeros
    ("abc,cd->ad", [(2, 0, 3), (3, 4)]),  # an empty summed label
    ("...ij,...jk->...ik", [(0, 2, 3), (3, 4)]),
])
def test_einsum_of_empty_operands_matches_cpu(equation, shapes):
    args = operands(shapes)
    output = assert_matches_cpu(einsum(equation), *args, expect_launch=False)
    if output.shape.num_elements() and any(0 in s for s in shapes):
        assert not np.any(output.numpy())


def test_einsum_of_a_large_product_matches_cpu():
    args = operands([(4, 64, 96), (4, 96, 80)])
    assert_matches_cpu(einsum("bij,bjk->bik"), *args, rtol=1e-4, atol=1e-4)


BAD_EINSUMS = {
    "no-arrow": ("ij,jk", [(2, 3), (3, 4)], "Expecting exactly one '->'"),
    "three-operands": ("ij,jk,k->i", [(2, 3), (3, 4), (4,)], "Expecting 1 or 2 input"),
    "dimension-mismatch": ("ij,jk->ik", [(2, 3), (4, 4)], "Expected dimension 3"),
    "rank-mismatch": ("ij,jk->ik", [(2, 3, 1), (3, 4)], "Expected input 0 to have rank 2"),
    "ellipsis-rank": ("...ijk->ijk", [(2, 3)], "rank at least 3"),
    "broadcast-mismatch": ("...ij,...jk->...ik", [(2, 3, 3), (4, 3, 4)],
                           "Invalid broadcasting dimensions"),
    "no-output-ellipsis": ("...ij,jk->ik", [(5, 2, 3), (3, 4)], "no ellipsis"),
    "unknown-output-label": ("ij,jk->iz", [(2, 3), (3, 4)], "appears in no input"),
    "bad-ellipsis": ("..ij,jk->ik", [(2, 3), (3, 4)], "Invalid ellipsis"),
    "output-too-large": ("i->iiiiiiii", [(300,)], "too large"),
}


@pytest.mark.parametrize("case", sorted(BAD_EINSUMS))
def test_bad_einsums_are_invalid_argument_errors(case):
    equation, shapes, match = BAD_EINSUMS[case]
    with tf.device("/GPU:0"), pytest.raises(tf.errors.InvalidArgumentError,
                                            match=match) as info:
        tf.raw_ops.Einsum(inputs=[tf.ones(s) for s in shapes], equation=equation)
    assert "GPU:0" in str(info.value), "the error did not come from the virtual GPU's kernel"
