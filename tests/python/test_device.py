"""The virtual GPU as TensorFlow sees it: discovery, tensors to and from the device in every
dtype, tf.function, copies between devices, counters, and the Relu kernels that run on it."""
import os

import numpy as np
import pytest
import tensorflow as tf

import vgpu


def _on(device, fn):
    with tf.device(device):
        return fn()


def test_virtual_gpu_is_discovered_as_gpu0():
    names = [d.name for d in tf.config.list_physical_devices("GPU")]
    assert names == ["/physical_device:GPU:0", "/physical_device:GPU:1"]
    assert vgpu.devices() == names
    assert vgpu.is_available()
    details = vgpu.info()
    assert details["platform"] == "VGPU"
    assert details["device_type"] == "GPU"
    assert details["device_count"] == 2
    assert details["declined"] is None
    assert details["memory_limit_bytes"] == 1 << 30
    assert details["tensorflow_running"].startswith("2.21.")


def test_package_reports_its_version():
    assert vgpu.__version__ == vgpu.info()["version"]


@pytest.mark.parametrize(
    "dtype", [np.float16, np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_]
)
@pytest.mark.parametrize("shape", [(), (0,), (0, 3), (7,), (3, 5, 2)])
def test_tensor_round_trips_through_the_device(dtype, shape):
    rng = np.random.default_rng(sum(shape) + 1)
    if dtype is np.bool_:
        host = rng.integers(0, 2, size=shape).astype(np.bool_)
    elif np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        host = rng.integers(info.min, info.max, size=shape, dtype=dtype)
    else:
        host = (rng.standard_normal(size=shape) * 100).astype(dtype)
    on_device = _on("/GPU:0", lambda: tf.identity(tf.constant(host)))
    assert on_device.dtype.as_numpy_dtype == dtype
    assert on_device.shape == shape
    np.testing.assert_array_equal(on_device.numpy(), host)


def test_large_tensor_round_trips_through_the_device():
    host = np.arange(64 * 1024 * 1024, dtype=np.float32)  # 256 MiB
    host[::4097] *= -1.5
    on_device = _on("/GPU:0", lambda: tf.identity(tf.constant(host)))
    assert on_device.device.endswith("GPU:0")
    back = on_device.numpy()
    assert back.nbytes == 256 << 20
    np.testing.assert_array_equal(back, host)


def test_copies_between_gpu0_and_gpu1_keep_values():
    host = np.linspace(-3, 3, 1001, dtype=np.float32)
    on_gpu0 = _on("/GPU:0", lambda: tf.nn.relu(tf.constant(host)))
    on_gpu1 = _on("/GPU:1", lambda: tf.identity(on_gpu0))
    assert on_gpu0.device.endswith("GPU:0")
    assert on_gpu1.device.endswith("GPU:1")
    np.testing.assert_array_equal(on_gpu1.numpy(), np.maximum(host, 0))
    back_on_gpu0 = _on("/GPU:0", lambda: tf.nn.relu(on_gpu1 - 1.0))
    np.testing.assert_array_equal(back_on_gpu0.numpy(), np.maximum(np.maximum(host, 0) - 1.0, 0))


@pytest.mark.parametrize("shape", [(0,), (1,), (17,), (4, 1023), (3, 5, 7, 11)])
def test_relu_matches_the_cpu_kernel(shape):
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    expected = _on("/CPU:0", lambda: tf.nn.relu(x))
    actual = _on("/GPU:0", lambda: tf.nn.relu(x))
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_relu_gradient_matches_the_cpu():
    x = np.random.default_rng(4).standard_normal((64, 33)).astype(np.float32)
    upstream = np.random.default_rng(5).standard_normal((64, 33)).astype(np.float32)

    def gradient():
        value = tf.constant(x)
        with tf.GradientTape() as tape:
            tape.watch(value)
            y = tf.nn.relu(value)
        return tape.gradient(y, value, output_gradients=tf.constant(upstream))

    expected = _on("/CPU:0", gradient)
    actual = _on("/GPU:0", gradient)
    assert actual.device.endswith("GPU:0")
    np.testing.assert_array_equal(actual.numpy(), expected.numpy())


def test_relu_grad_with_mismatched_shapes_is_invalid_argument():
    with pytest.raises(tf.errors.InvalidArgumentError, match="must have the same size and shape"):
        _on(
            "/GPU:0",
            lambda: tf.raw_ops.ReluGrad(gradients=tf.ones([3]), features=tf.ones([4])),
        )


def test_relu_in_an_unregistered_dtype_falls_back_to_the_cpu():
    # Relu is registered for float32 only in this build: float64 must still compute correctly
    # (TensorFlow places it on the CPU) rather than fail.
    x = np.array([-1.0, 2.0], np.float64)
    result = _on("/GPU:0", lambda: tf.nn.relu(x))
    np.testing.assert_array_equal(result.numpy(), [0.0, 2.0])


def test_tf_function_runs_on_the_device_and_launches_kernels():
    @tf.function
    def two_relus(x):
        return tf.nn.relu(tf.nn.relu(x) - 1.0)

    x = np.linspace(-2, 4, 600, dtype=np.float32).reshape(20, 30)
    vgpu.reset_stats()
    result = _on("/GPU:0", lambda: two_relus(tf.constant(x)))
    np.testing.assert_array_equal(result.numpy(), np.maximum(np.maximum(x, 0) - 1.0, 0))
    assert result.device.endswith("GPU:0")
    stats = vgpu.stats()
    assert stats["launches"] >= 2
    assert stats["commands"]["launch"] == stats["launches"]


def test_stats_count_commands_bytes_and_round_trips():
    host = np.ones(1000, np.float32)
    _on("/GPU:0", lambda: tf.nn.relu(tf.constant(host))).numpy()  # warm up: streams, memory
    vgpu.reset_stats()
    result = _on("/GPU:0", lambda: tf.nn.relu(tf.constant(host)))
    result.numpy()
    stats = vgpu.stats()
    assert stats["launches"] == 1
    assert stats["commands"]["memcpy_htod"] + stats["commands"]["memcpy_sync"] >= 1
    assert stats["bytes_to_device"] >= host.nbytes
    assert stats["bytes_from_device"] >= host.nbytes
    # Protocol bytes: the frames carrying the data and commands out, replies and data back.
    assert stats["bytes_sent"] > host.nbytes
    assert stats["bytes_received"] > host.nbytes
    # Posted work costs no round trip: only the device-to-host wait does.
    assert stats["round_trips"] < stats["commands_sent"]
    assert sum(stats["commands"].values()) == stats["commands_sent"]
    per_device = stats["devices"][0]["counters"]
    assert per_device["launches"] == 1
    assert stats["devices"][1]["counters"]["launches"] == 0
    vgpu.reset_stats()
    assert vgpu.stats()["commands_sent"] == 0


def test_stats_report_the_in_process_executors_own_counters():
    host = np.ones(256, np.float32)
    before = vgpu.stats()["executor"]
    assert before["name"] == "cpu"
    _on("/GPU:0", lambda: tf.nn.relu(tf.constant(host))).numpy()
    after = vgpu.stats()
    executor = after["executor"]
    # What the executor ran, counted on its side of the boundary: the launch and the copies.
    assert executor["launches"] >= before["launches"] + 1
    assert executor["copies"] >= before["copies"] + 2
    assert executor["bytes_copied"] >= before["bytes_copied"] + 2 * host.nbytes
    assert after["executor_primitives_created"] == executor["primitives_created"]
    vgpu.reset_stats()  # the client's counters only
    assert vgpu.stats()["executor"]["launches"] >= executor["launches"]


def test_the_plugins_threads_are_named_vgpu_in_the_tensorflow_process():
    # Profilers and `top -H` tell the executor's threads from TensorFlow's ("tf_...") by name.
    with tf.device("GPU:0"):
        (tf.ones([512, 512]) * 2.0).numpy()  # starts a stream worker and the compute pool
    names = set()
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                names.add(comm.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    assert {"vgpu-stream", "vgpu-compute"} <= names, names
