"""Unmodified Keras recurrent layers on the virtual GPU: LSTM, GRU (return_sequences, stacked),
Bidirectional(LSTM) after Embedding(mask_zero=True) with right-padded sequences, and
go_backwards=True run through the CudnnRNNV3 ops (Keras' cuDNN path) and train to the CPU's
numbers (Keras' generic implementation, use_cudnn=False) from the same weights, with SGD and
Adam. The GRU needs the package's Keras hook (cuDNN gate order); after the warm-up step an LSTM
training step forwards no descriptor call."""
import importlib
import json

import numpy as np
import pytest
import tensorflow as tf

import keras
import vgpu

STEPS, FEATURES, CLASSES, SAMPLES = 7, 5, 4, 48
L = keras.layers


def _sequences(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, (SAMPLES, STEPS, FEATURES)).astype("float32")
    return x, rng.integers(0, CLASSES, SAMPLES).astype("int32")


def _token_sequences(seed=0):
    """Right-padded token ids (0 = padding), every sequence at least one token long."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, STEPS + 1, SAMPLES)
    ids = rng.integers(1, 20, (SAMPLES, STEPS))
    ids[np.arange(STEPS)[None, :] >= lengths[:, None]] = 0
    return ids.astype("int32"), rng.integers(0, CLASSES, SAMPLES).astype("int32")


def _lstm(cudnn):
    return [keras.Input((STEPS, FEATURES)), L.LSTM(8, use_cudnn=cudnn)]


def _stacked_gru(cudnn):
    return [keras.Input((STEPS, FEATURES)), L.GRU(8, return_sequences=True, use_cudnn=cudnn),
            L.GRU(6, use_cudnn=cudnn)]


def _masked_bidirectional_lstm(cudnn):
    return [keras.Input((STEPS,), dtype="int32"), L.Embedding(20, 6, mask_zero=True),
            L.Bidirectional(L.LSTM(8, use_cudnn=cudnn))]


def _backwards_lstm(cudnn):
    return [keras.Input((STEPS, FEATURES)),
            L.LSTM(8, go_backwards=True, return_sequences=True, use_cudnn=cudnn), L.Flatten()]


MODELS = {
    "lstm": (_lstm, _sequences),
    "stacked_gru": (_stacked_gru, _sequences),
    "masked_bidirectional_lstm": (_masked_bidirectional_lstm, _token_sequences),
    "go_backwards_lstm": (_backwards_lstm, _sequences),
}


def _build(name, cudnn):
    layers, _ = MODELS[name]
    return keras.Sequential(layers("auto" if cudnn else False) + [L.Dense(CLASSES)])


def _train(device, name, optimizer, weights):
    keras.utils.set_random_seed(1)
    x, y = MODELS[name][1]()
    with tf.device(device):
        # On the CPU, Keras' generic RNN implementation (the reference); on the virtual GPU, its
        # cuDNN path (CudnnRNNV3). Both without XLA.
        model = _build(name, cudnn=device.endswith("GPU:0"))
        model.set_weights(weights)
        model.compile(optimizer=optimizer,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=False)
        history = model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
        return history.history["loss"], [w.numpy() for w in model.weights]


@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_keras_rnn_training_on_the_virtual_gpu_matches_the_cpu(name, optimizer):
    keras.utils.set_random_seed(3)
    weights = _build(name, cudnn=False).get_weights()
    cpu_losses, cpu_weights = _train("/CPU:0", name, optimizer, weights)
    vgpu.reset_stats()
    gpu_losses, gpu_weights = _train("/GPU:0", name, optimizer, weights)
    rnn_calls = vgpu.stats()["descriptor_calls"].get("rnn", {})
    assert rnn_calls.get("create", 0) > 0, "the CudnnRNN ops did not run on the virtual GPU"
    np.testing.assert_allclose(gpu_losses, cpu_losses, rtol=1e-4, atol=1e-6)
    for g, c in zip(gpu_weights, cpu_weights):
        np.testing.assert_allclose(g, c, rtol=1e-4, atol=1e-6)


def test_the_keras_hook_wraps_the_cudnn_gru():
    rnn = importlib.import_module("keras.src.backend.tensorflow.rnn")
    assert getattr(rnn._cudnn_gru, "_vgpu_patched", False)


GRU_WITHOUT_HOOK = """
import numpy as np, tensorflow as tf, keras
rng = np.random.default_rng(0)
x = rng.uniform(-1, 1, (4, 5, 3)).astype("float32")
keras.utils.set_random_seed(2)
with tf.device("/CPU:0"):
    reference = keras.layers.GRU(6, use_cudnn=False)
    expected = reference(x).numpy()
with tf.device("/GPU:0"):
    layer = keras.layers.GRU(6)
    layer.build(x.shape)
    layer.set_weights(reference.get_weights())
    actual = layer(x).numpy()
print("MAX_DIFFERENCE", float(np.abs(actual - expected).max()))
"""


def test_keras_gru_needs_the_hook_for_cudnn_gate_order(run_python):
    # Without the hook Keras (tensorflow-cpu: no CUDA build) hands the virtual GPU its z, r, h
    # gate blocks unswapped, and the cuDNN GRU computes something else.
    result = run_python(GRU_WITHOUT_HOOK, env={"VGPU_KERAS_HOOK": "0"})
    assert result.returncode == 0, result.stderr[-3000:]
    difference = float(result.stdout.split("MAX_DIFFERENCE")[1])
    assert difference > 1e-3


REUSE_PROBE = """
import json
import numpy as np, keras, vgpu
keras.utils.set_random_seed(5)
rng = np.random.default_rng(5)
x = rng.uniform(-1, 1, (104, 9, 6)).astype("float32")  # three batches of 32 and one of 8
y = rng.integers(0, 4, 104).astype("int32")
model = keras.Sequential([keras.Input((9, 6)), keras.layers.LSTM(12), keras.layers.Dense(4)])
model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))

class PerStep(keras.callbacks.Callback):
    steps = []

    def on_train_batch_begin(self, batch, logs=None):
        self.before = vgpu.stats()

    def on_train_batch_end(self, batch, logs=None):
        after = vgpu.stats()
        step = {k: after[k] - self.before[k]
                for k in ("descriptor_calls_forwarded", "descriptor_calls_local")}
        step["rnn_creates"] = (after["descriptor_calls"]["rnn"]["create"] -
                               self.before["descriptor_calls"].get("rnn", {}).get("create", 0))
        self.steps.append(step)

model.fit(x, y, batch_size=32, epochs=2, shuffle=False, verbose=0, callbacks=[PerStep()])
print("PROBE " + json.dumps(PerStep.steps))
"""


def test_keras_lstm_forwards_no_descriptor_call_after_the_warm_up(run_python):
    result = run_python(REUSE_PROBE, env={"VGPU_DESCRIPTOR_MODE": "reuse"})
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("PROBE "))
    steps = json.loads(line.split(" ", 1)[1])
    assert len(steps) == 8
    assert steps[0]["descriptor_calls_forwarded"] > 0  # the warm-up step
    for step in steps:
        assert step["rnn_creates"] == 2  # CudnnRNNV3 and CudnnRNNBackpropV3, every step
    for step in steps[1:]:
        assert step["descriptor_calls_forwarded"] == 0, steps
        assert step["descriptor_calls_local"] > 0
