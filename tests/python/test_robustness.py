"""Bad situations end in clear errors, never in a crashed or hung TensorFlow process: device
OOM, bad VGPU_* configuration, and the plugin loaded twice. Each runs in a child interpreter
because the plugin reads its configuration once, when TensorFlow loads it."""
import json
import os
import shutil
import subprocess
import sys

import pytest

PRINT_GPUS = """
import tensorflow as tf
print("GPUS", len(tf.config.list_physical_devices("GPU")))
"""


def test_device_oom_raises_resource_exhausted_and_the_process_stays_usable(run_python):
    result = run_python(
        """
        import gc
        import numpy as np
        import tensorflow as tf
        x = tf.constant(np.ones((25, 1024, 1024), np.float32))  # 100 MiB
        with tf.device("/GPU:0"):
            a = tf.identity(x)
            b = tf.nn.relu(a)
            try:
                tf.nn.relu(b)  # a third 100 MiB buffer does not fit in 256 MiB
                print("NO-OOM")
            except tf.errors.ResourceExhaustedError as error:
                print("OOM", "OOM when allocating" in str(error))
            del a, b
            gc.collect()
            after = tf.nn.relu(tf.constant(np.full(1000, -2.0, np.float32)))
            print("AFTER", float(tf.reduce_sum(after)), after.device)
        """,
        env={"VGPU_MEMORY_LIMIT": "256MiB"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OOM True" in result.stdout
    assert "AFTER 0.0 /job:localhost/replica:0/task:0/device:GPU:0" in result.stdout


@pytest.mark.parametrize(
    "variable, value",
    [
        ("VGPU_MEMORY_LIMIT", "lots"),
        ("VGPU_DEVICE_COUNT", "0"),
        ("VGPU_BACKEND", "carrier-pigeon://gpu"),
        ("VGPU_DESCRIPTOR_MODE", "sometimes"),
        ("VGPU_DEVICE_TYPE", "gpu9"),
        ("VGPU_EXECUTOR", "quantum"),
    ],
)
def test_bad_configuration_gives_zero_devices_and_names_the_variable(run_python, variable, value):
    result = run_python(
        PRINT_GPUS + "import vgpu\nprint('DECLINED', vgpu.info()['declined'])\n",
        env={variable: value},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "GPUS 0" in result.stdout
    assert variable in result.stderr  # the logged reason
    assert f"DECLINED {variable}" in result.stdout


def _installed_plugin_path():
    import vgpu

    return vgpu._plugin.plugin_path()


@pytest.mark.parametrize("how", ["folder", "file", "copy"])
def test_loading_the_plugin_twice_does_not_abort(run_python, tmp_path, how):
    plugin = _installed_plugin_path()
    if how == "folder":
        extra = os.path.dirname(plugin)
    elif how == "file":
        extra = plugin.replace("/tensorflow-plugins/", "//tensorflow-plugins/")
    else:
        extra = str(tmp_path / "another_copy.so")
        shutil.copy(plugin, extra)
    result = run_python(
        PRINT_GPUS
        + "import numpy as np\n"
        + "with tf.device('/GPU:0'): y = tf.nn.relu(tf.constant([-1.0, 2.0]))\n"
        + "print('RELU', y.numpy().tolist(), y.device)\n",
        env={"TF_PLUGGABLE_DEVICE_LIBRARY_PATH": extra},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "GPUS 1" in result.stdout
    assert "RELU [0.0, 2.0] /job:localhost/replica:0/task:0/device:GPU:0" in result.stdout
    assert "loaded twice" in result.stderr


def test_vgpu_info_command_describes_the_setup(run_python):
    result = run_python(
        "import sys; from vgpu.cli import run; sys.argv = ['vgpu', 'info', '--json']; run()",
        env={"VGPU_DEVICE_COUNT": "3", "VGPU_MEMORY_LIMIT": "512MiB"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    details = json.loads(result.stdout[result.stdout.index("{"):])
    assert details["device_count"] == 3
    assert details["devices"] == [f"/physical_device:GPU:{i}" for i in range(3)]
    assert details["memory_limit_bytes"] == 512 << 20
    assert details["backends"] == ["inproc"] * 3
    assert details["executor"] == "cpu"
    assert "cpu" in details["executors_available"].split(", ")
    assert details["plugin_path"].endswith("tensorflow-plugins/libvgpu_plugin.so")


def test_vgpu_executor_names_the_in_process_executor_case_insensitively(run_python):
    result = run_python(
        PRINT_GPUS
        + "with tf.device('/GPU:0'): y = tf.nn.relu(tf.constant([-1.0, 2.0]))\n"
        + "print('RELU', y.numpy().tolist())\n"
        + "import sys; from vgpu.cli import run; sys.argv = ['vgpu', 'info']; run()\n",
        env={"VGPU_EXECUTOR": " CPU "},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "GPUS 1" in result.stdout
    assert "RELU [0.0, 2.0]" in result.stdout
    assert "executor:          cpu" in result.stdout


def test_unknown_vgpu_executor_lists_the_known_ones(run_python):
    result = run_python(PRINT_GPUS + "import vgpu\nprint('DECLINED', vgpu.info()['declined'])\n",
                        env={"VGPU_EXECUTOR": "quantum"})
    assert "GPUS 0" in result.stdout
    assert "VGPU_EXECUTOR='quantum' is not an executor of this build; it offers: cpu" in result.stdout


def test_vgpu_server_refuses_an_unknown_executor_and_lists_the_known_ones(tmp_path):
    done = subprocess.run([sys.executable, "-m", "vgpu.server",
                           f"--listen=unix://{tmp_path}/vgpu.sock", "--executor=quantum"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    assert "unknown executor 'quantum'; this build offers: cpu" in done.stderr
    assert not os.path.exists(tmp_path / "vgpu.sock")


def test_the_build_lists_its_executors_with_the_default_first():
    from vgpu import server

    executors = server.executors()
    assert executors[0][0] == "cpu"
    assert all(name and description for name, description in executors)


def test_vgpu_info_command_exits_nonzero_when_no_device_is_offered(run_python):
    result = run_python(
        "import sys; from vgpu.cli import run; sys.argv = ['vgpu', 'info']; run()",
        env={"VGPU_DEVICE_COUNT": "99"},
    )
    assert result.returncode == 1
    assert "NO DEVICE OFFERED" in result.stdout
    assert "VGPU_DEVICE_COUNT" in result.stdout


def test_console_script_is_installed():
    assert shutil.which("vgpu", path=os.path.dirname(sys.executable)) is not None
