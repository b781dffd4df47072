"""Keras 3 optimizers on text models with an Embedding (sparse IndexedSlices gradients) on the
virtual GPU: after a few training steps the weights equal the CPU's, and no op of the compiled
train step lands on the CPU except host bookkeeping (mixed precision included)."""
import numpy as np
import pytest
import tensorflow as tf

import keras
from placement import ops_on, run_child, unimplemented

OPTIMIZERS = {
    "sgd": lambda: keras.optimizers.SGD(0.1),
    "sgd_momentum": lambda: keras.optimizers.SGD(0.1, momentum=0.9),
    "sgd_nesterov": lambda: keras.optimizers.SGD(0.1, momentum=0.9, nesterov=True),
    "adam": lambda: keras.optimizers.Adam(0.01),
    "adam_amsgrad": lambda: keras.optimizers.Adam(0.01, amsgrad=True),
    "adamw": lambda: keras.optimizers.AdamW(0.01),
    "rmsprop": lambda: keras.optimizers.RMSprop(0.01),
    "rmsprop_centered": lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
    "adagrad": lambda: keras.optimizers.Adagrad(0.1),
    "adadelta": lambda: keras.optimizers.Adadelta(1.0),
    "nadam": lambda: keras.optimizers.Nadam(0.01),
    "adamax": lambda: keras.optimizers.Adamax(0.01),
    "lion": lambda: keras.optimizers.Lion(0.001),
    "ftrl": lambda: keras.optimizers.Ftrl(0.1),
}


def _data(samples=24, length=6, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 20, size=(samples, length)).astype("int32")
    y = rng.integers(0, 3, size=samples).astype("int32")
    return x, y


def _conv_classifier():
    return keras.Sequential([
        keras.Input(shape=(6,), dtype="int32"),
        keras.layers.Embedding(20, 8),
        keras.layers.Conv1D(8, 3, activation="relu"),
        keras.layers.GlobalMaxPooling1D(),
        keras.layers.Dense(3),
    ])


def _attention_model():
    inputs = keras.Input(shape=(6,), dtype="int32")
    h = keras.layers.Embedding(20, 8)(inputs)
    h = keras.layers.MultiHeadAttention(2, 4)(h, h)
    h = keras.layers.LayerNormalization()(h)
    h = keras.layers.GlobalAveragePooling1D()(h)
    return keras.Model(inputs, keras.layers.Dense(3)(h))


def _train(device, optimizer, weights, steps=3):
    x, y = _data(samples=8 * steps)
    with tf.device(device):
        model = _conv_classifier()
        model.set_weights(weights)
        model.compile(optimizer=OPTIMIZERS[optimizer](),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=8, epochs=1, verbose=0, shuffle=False)
        return [w.numpy() for w in model.weights]


@pytest.mark.parametrize("optimizer", sorted(OPTIMIZERS))
def test_weights_after_a_few_steps_equal_the_cpu(optimizer):
    keras.utils.set_random_seed(3)
    weights = _conv_classifier().get_weights()
    cpu = _train("/CPU:0", optimizer, weights)
    gpu = _train("/GPU:0", optimizer, weights)
    assert len(cpu) == len(gpu)
    for g, c in zip(gpu, cpu):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-6)
    assert not np.allclose(gpu[0], weights[0]), "the embedding did not train"


# Ops of other op families that the train steps may leave on the CPU while the plugin has no
# kernel for them at the node's dtype: the attention layer's Einsum, and the IsNan / IsFinite
# checks of Keras' IndexedSlices helpers and loss scaling (with host bookkeeping, placement.py).
OTHER_FAMILIES = {"Einsum", "Erfc", "IsNan", "IsFinite"}

PLACEMENT_SCRIPT = """
import keras
from test_keras_optimizers import OPTIMIZERS, _attention_model, _conv_classifier, _data
x, y = _data(samples=8)
runs = [(build, name, "float32") for build in (_conv_classifier, _attention_model)
        for name in {optimizers!r}]
runs += [(build, "adam", "mixed_float16") for build in (_conv_classifier, _attention_model)]
for build, name, policy in runs:
    keras.mixed_precision.set_global_policy(policy)
    keras.utils.set_random_seed(1)
    with tf.device("/GPU:0"):
        model = build()
        model.compile(optimizer=OPTIMIZERS[name](),
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    print("TRAINED", build.__name__, name, policy, flush=True)
"""


# Optimizers whose train steps together use every op kind the others do: ResourceScatterSub
# (SGD), UnsortedSegmentSum densification (Adam), Keras' IndexedSlices division helper with
# ResourceScatterAdd, ScatterNd, Where and GatherV2 (Adagrad); mixed precision adds the loss
# scale optimizer's bool TensorScatterUpdate.
REPRESENTATIVE = ["adagrad", "adam", "sgd"]


@pytest.mark.parametrize("optimizers", [
    pytest.param(REPRESENTATIVE, id="representative"),
    pytest.param(sorted(OPTIMIZERS), id="every_optimizer", marks=pytest.mark.full),
])
def test_no_op_of_a_text_model_train_step_runs_on_the_cpu(optimizers):
    run = run_child(PLACEMENT_SCRIPT.format(optimizers=optimizers), timeout=900)
    assert run.stdout.count("TRAINED") == 2 * len(optimizers) + 2
    on_cpu = run.off_device(unimplemented(OTHER_FAMILIES))
    assert not on_cpu, "ops of the train steps placed on the CPU:\n" + "\n".join(on_cpu[:20])
    on_gpu = ops_on(run.train_step(), "GPU")
    assert {"GatherV2", "UnsortedSegmentSum", "ResourceScatterAdd", "ResourceScatterSub",
            "AssignSubVariableOp", "ScatterNd", "Where", "TensorScatterUpdate"} <= on_gpu
