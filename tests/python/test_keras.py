"""Unmodified Keras code on the virtual GPU: the default jit_compile="auto" trains, an explicit
jit_compile=True (Keras' or tf.function's) runs without XLA with the same results, and variable updates (AssignAdd/AssignSub, what Keras
optimizers use) run on the device with the CPU's results."""
import numpy as np
import pytest
import tensorflow as tf

import keras


def _tiny_model():
    keras.utils.set_random_seed(1)
    return keras.Sequential(
        [keras.Input(shape=(8,)), keras.layers.Dense(16, activation="relu"), keras.layers.Dense(3)]
    )


def test_default_compile_trains_without_xla_on_the_virtual_gpu():
    model = _tiny_model()
    model.compile(optimizer="adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    assert model.jit_compile is False
    x = np.random.default_rng(0).standard_normal((64, 8)).astype("float32")
    y = np.random.default_rng(1).integers(0, 3, 64)
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    assert len(history.history["loss"]) == 2
    assert all(np.isfinite(history.history["loss"]))
    assert model.weights[0].value.device.endswith("GPU:0")
    assert int(model.optimizer.iterations.numpy()) == 8


def test_explicit_jit_compile_true_trains_without_xla_like_the_default():
    """Code written for a CUDA GPU asks for XLA; XLA has no compiler for the virtual GPU, so the
    train step runs op by op there (it used to fail with "Could not find compiler for platform
    VGPU"), to the same weights as the default."""
    x = np.random.default_rng(0).standard_normal((32, 8)).astype("float32")
    y = np.random.default_rng(1).integers(0, 3, 32)
    weights = []
    for jit_compile in (True, "auto"):
        model = _tiny_model()
        model.compile(optimizer="sgd", jit_compile=jit_compile,
                      loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.fit(x, y, epochs=1, batch_size=16, verbose=0)
        assert model.weights[0].value.device.endswith("GPU:0")
        weights.append([w.numpy() for w in model.weights])
    for jitted, default in zip(*weights):
        np.testing.assert_array_equal(jitted, default)


def test_tf_function_with_jit_compile_runs_on_the_virtual_gpu():
    @tf.function(jit_compile=True)
    def step(a, b):
        return tf.nn.relu(tf.matmul(a, b)) * 2.0

    a = np.random.default_rng(2).standard_normal((4, 5)).astype("float32")
    b = np.random.default_rng(3).standard_normal((5, 3)).astype("float32")
    with tf.device("/GPU:0"):
        result = step(a, b)
    assert result.device.endswith("GPU:0")
    np.testing.assert_allclose(result.numpy(), np.maximum(a @ b, 0) * 2.0, rtol=1e-5)


def _updated_variable_on(device, dtype, update):
    """update(variable, delta) on `device`, for a new 4x6 `dtype` variable there and a `delta` of
    the same shape (small values, the same on every device); returns what `update` returns."""
    start = (np.arange(24).reshape(4, 6) % 7).astype(dtype)
    delta = (np.arange(24).reshape(4, 6) % 5).astype(dtype)
    with tf.device(device):
        return update(tf.Variable(start), delta)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, np.int32, np.int64])
def test_assign_add_and_sub_on_device_variables_match_the_cpu(dtype):
    def update(variable, delta):
        variable.assign_add(delta)
        variable.assign_add(delta)
        variable.assign_sub(tf.constant(delta) * 3 if dtype != np.int32 else delta * 3)
        return variable.read_value()

    on_gpu = _updated_variable_on("/GPU:0", dtype, update)
    np.testing.assert_array_equal(on_gpu.numpy(),
                                  _updated_variable_on("/CPU:0", dtype, update).numpy())


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16, np.uint32, np.uint64,
                                   np.complex64, np.complex128])
def test_assign_add_and_sub_of_dtypes_the_executor_lacks_match_the_cpu(dtype):
    # These once fell to TensorFlow's DEFAULT kernel, which read device memory on the host: a
    # SIGSEGV of the process. Unsigned results wrap as on the CPU.
    def update(variable, delta):
        variable.assign_add(delta)
        variable.assign_sub(delta)
        variable.assign_sub(delta)
        variable.assign_sub(delta)
        return variable

    on_gpu = _updated_variable_on("/GPU:0", dtype, update)
    assert "GPU:0" in on_gpu.device
    np.testing.assert_array_equal(on_gpu.numpy(),
                                  _updated_variable_on("/CPU:0", dtype, update).numpy())


def test_update_does_not_change_a_value_read_before_it():
    with tf.device("/GPU:0"):
        variable = tf.Variable(np.ones(1000, np.float32))
        before = variable.read_value()  # TF may alias the variable's buffer
        variable.assign_add(np.ones(1000, np.float32))
    np.testing.assert_array_equal(before.numpy(), np.ones(1000, np.float32))
    np.testing.assert_array_equal(variable.numpy(), np.full(1000, 2, np.float32))


def test_assign_add_with_a_wrong_shape_is_invalid_argument():
    with tf.device("/GPU:0"):
        variable = tf.Variable(np.zeros((2, 3), np.float32))
        with pytest.raises(tf.errors.InvalidArgumentError, match="shapes must be equal"):
            variable.assign_add(np.ones((3, 2), np.float32))
    np.testing.assert_array_equal(variable.numpy(), np.zeros((2, 3), np.float32))


def test_step_callback_reports_forwarded_descriptor_calls_and_round_trips_per_step():
    import vgpu.keras

    model = _tiny_model()
    model.compile(optimizer="sgd", loss="mse")
    seen_logs = []

    class Recorder(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen_logs.append(dict(logs))

    callback = vgpu.keras.VgpuStepCallback()
    x = np.ones((64, 8), "float32")
    model.fit(x, np.ones((64, 3), "float32"), batch_size=16, epochs=2, verbose=0,
              callbacks=[callback, Recorder()])
    assert len(callback.history) == 8
    assert all(step["round_trips"] >= 1 for step in callback.history)
    # Steps are marked, so reuse is active after the first one: nothing forwarded any more.
    assert all(step["fwd_desc"] == 0 for step in callback.history[1:])
    assert seen_logs[-1]["fwd_desc"] == callback.history[-1]["fwd_desc"]
    assert seen_logs[-1]["round_trips"] == callback.history[-1]["round_trips"]


def test_step_callback_writes_each_steps_counters_as_tensorboard_scalars(tmp_path):
    import vgpu.keras
    from tensorflow.core.util import event_pb2  # noqa: PLC0415

    model = _tiny_model()
    model.compile(optimizer="sgd", loss="mse")
    callback = vgpu.keras.VgpuStepCallback(show_stats=False, log_dir=str(tmp_path))
    x = np.ones((64, 8), "float32")
    model.fit(x, np.ones((64, 3), "float32"), batch_size=16, epochs=2, verbose=0,
              callbacks=[callback])
    scalars = {}  # tag -> {step: value}
    for path in tmp_path.glob("events.out.tfevents.*"):
        for record in tf.data.TFRecordDataset(str(path)):
            event = event_pb2.Event.FromString(record.numpy())
            for value in event.summary.value:
                scalars.setdefault(value.tag, {})[event.step] = float(
                    tf.make_ndarray(value.tensor))
    expected = {"vgpu/descriptor_calls_forwarded", "vgpu/descriptor_calls_local",
                "vgpu/round_trips", "vgpu/commands_sent", "vgpu/launches", "vgpu/bytes_sent",
                "vgpu/bytes_received", "vgpu/executor_ms"}
    assert expected <= set(scalars), set(scalars)
    assert all(sorted(curve) == list(range(8)) for curve in scalars.values())
    # The method's steady state: the marked steps after the first answer every descriptor call
    # locally; every step launches kernels, waits at least once, and the executor spends time
    # in them.
    forwarded = scalars["vgpu/descriptor_calls_forwarded"]
    assert all(forwarded[step] == 0 for step in range(1, 8))
    assert all(value > 0 for value in scalars["vgpu/launches"].values())
    assert all(value >= 1 for value in scalars["vgpu/round_trips"].values())
    assert all(value > 0 for value in scalars["vgpu/executor_ms"].values())
