"""The wheel a user installs (scripts/build_wheel.sh; scripts/setup.sh builds it and installs it
into .venv). Installed with pip into a fresh virtual environment, and run with a PATH that holds
no compiler, CMake, ninja or build tree and from a folder outside the source tree, it imports
TensorFlow and sees GPU:0, trains the Keras example, and `vgpu server` starts and serves a
TensorFlow client. Its native code references no folder of the build machine
(scripts/wheel_report.py), and every library it needs resolves inside the fresh environment or
to the system's C/C++ runtime.

The wheel is $VGPU_WHEEL (scripts/test.sh sets it, so that a missing wheel fails) or else the
newest dist/tensorflow_vgpu-*.whl; without either the module is skipped."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import wheel_report  # noqa: E402  (scripts/wheel_report.py)


def _the_wheel():
    if os.environ.get("VGPU_WHEEL"):
        return Path(os.environ["VGPU_WHEEL"])
    wheels = sorted(glob.glob(str(ROOT / "dist" / "tensorflow_vgpu-*.whl")), key=os.path.getmtime)
    if not wheels:
        pytest.skip("no wheel: run scripts/build_wheel.sh (scripts/setup.sh does)")
    return Path(wheels[-1])


class FreshInstall:
    """A virtual environment with only the wheel and what it depends on, and the environment
    its programs run in: PATH = the environment's bin/ and an empty folder, HOME and the working
    folder in tmp, nothing of the developer's environment (no PYTHONPATH, no VGPU_*)."""

    def __init__(self, folder: Path, wheel: Path):
        self.folder = folder
        self.venv = folder / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(self.venv)], check=True, timeout=300)
        python = str(self.venv / "bin" / "python")
        installed = subprocess.run(
            [python, "-m", "pip", "install", "--disable-pip-version-check", "-q", str(wheel)],
            capture_output=True, text=True, timeout=1200)
        assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
        (folder / "empty").mkdir()
        (folder / "home").mkdir()
        (folder / "work").mkdir()
        self.path = f"{self.venv / 'bin'}:{folder / 'empty'}"
        self.env = {"PATH": self.path, "HOME": str(folder / "home"), "LANG": "C.UTF-8",
                    "TF_CPP_MIN_LOG_LEVEL": "2"}

    def run(self, *args, timeout=600, env=None):
        return subprocess.run(list(args), cwd=self.folder / "work", env={**self.env, **(env or {})},
                              capture_output=True, text=True, timeout=timeout, check=False)

    def python(self, code, **kwargs):
        return self.run(str(self.venv / "bin" / "python"), "-c", textwrap.dedent(code), **kwargs)


@pytest.fixture(scope="module")
def wheel():
    path = _the_wheel()
    assert path.is_file(), f"{path} does not exist (scripts/build_wheel.sh builds it)"
    return path


@pytest.fixture(scope="module")
def fresh(wheel, tmp_path_factory):
    return FreshInstall(tmp_path_factory.mktemp("wheel"), wheel)


def test_the_wheel_references_nothing_of_the_build_machine(wheel):
    entries = wheel_report.analyse(str(wheel))
    names = {Path(entry["name"]).name for entry in entries}
    assert {"libvgpu_plugin.so", "vgpu-server"} <= names, names
    assert any(name.startswith("_core.") for name in names), names
    assert wheel_report.problems(entries) == []
    for entry in entries:
        assert entry["runpath"], f"{entry['name']} has no RUNPATH"


def test_the_fresh_environment_has_no_compiler_cmake_or_build_tree(fresh):
    for tool in ("cc", "gcc", "g++", "c++", "clang", "cmake", "ninja", "make"):
        assert shutil.which(tool, path=fresh.path) is None, tool
    done = fresh.python("""
        import json, vgpu
        print(json.dumps({"vgpu": vgpu.__file__}))
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    location = json.loads(done.stdout.strip().splitlines()[-1])["vgpu"]
    assert location.startswith(str(fresh.venv)), location


def test_every_library_of_the_installed_wheel_resolves_inside_the_environment(fresh):
    site = next((fresh.venv / "lib").glob("python3*/site-packages"))
    binaries = [site / "tensorflow-plugins" / "libvgpu_plugin.so", site / "vgpu" / "bin" / "vgpu-server",
                *(site / "vgpu").glob("_core.*.so")]
    for binary in binaries:
        assert binary.is_file(), binary
        listing = subprocess.run(["ldd", str(binary)], capture_output=True, text=True,
                                 check=True, timeout=60, env={"PATH": "/usr/bin:/bin"}).stdout
        assert "not found" not in listing, listing
        for name, path in re.findall(r"^\s*(\S+) => (\S+)", listing, re.MULTILINE):
            inside = os.path.realpath(path).startswith(os.path.realpath(fresh.venv) + os.sep)
            assert inside or wheel_report.provider(name), (binary.name, name, path)
            if name in ("libtensorflow_framework.so.2", "libdnnl.so.3"):
                assert inside, (binary.name, name, path)


def test_tensorflow_sees_the_virtual_gpu(fresh):
    done = fresh.python("""
        import json
        import tensorflow as tf
        x = tf.constant([[1.0, -2.0], [3.0, 4.0]])
        with tf.device("/GPU:0"):
            y = tf.nn.relu(tf.matmul(x, x))
        print(json.dumps({"gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
                          "device": y.device, "value": y.numpy().tolist()}))
    """)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["gpus"] == ["/physical_device:GPU:0"]
    assert result["device"].endswith("GPU:0")
    assert result["value"] == [[0.0, 0.0], [15.0, 10.0]]


def test_the_keras_example_trains(fresh):
    example = fresh.folder / "work" / "keras_cnn.py"
    shutil.copy(ROOT / "examples" / "keras_cnn.py", example)
    done = fresh.run(str(fresh.venv / "bin" / "python"), str(example), "--epochs=2",
                     "--samples=512", "--batch_size=64")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "virtual GPUs: ['/physical_device:GPU:0']" in done.stdout
    assert re.search(r"model variables live on: .*GPU:0", done.stdout), done.stdout
    losses = [float(x) for x in re.findall(r"epoch \d+: loss ([\d.]+)", done.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0], done.stdout


def test_vgpu_server_starts_and_serves_a_tensorflow_client(fresh):
    socket_path = fresh.folder / "work" / "vgpu.sock"
    ready = fresh.folder / "work" / "ready"
    log = open(fresh.folder / "server.log", "w+")
    server = subprocess.Popen(
        [str(fresh.venv / "bin" / "vgpu"), "server", f"--listen=unix://{socket_path}",
         f"--ready_file={ready}", "--memory_limit=256MiB"],
        cwd=fresh.folder / "work", env=fresh.env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not ready.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        log.seek(0)
        assert ready.exists() and server.poll() is None, log.read()
        done = fresh.python("""
            import json
            import numpy as np, tensorflow as tf, vgpu
            a = np.arange(12, dtype=np.float32).reshape(3, 4)
            with tf.device("/GPU:0"):
                b = tf.matmul(tf.constant(a), tf.constant(a.T)).numpy()
            print(json.dumps({"equal": bool(np.array_equal(b, a @ a.T)),
                              "backends": vgpu.info()["backends"],
                              "round_trips": vgpu.stats()["round_trips"]}))
        """, env={"VGPU_BACKEND": ready.read_text()})
        assert done.returncode == 0, done.stderr[-3000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["equal"] and result["round_trips"] > 0, result
        assert str(socket_path) in json.dumps(result["backends"]), result
    finally:
        server.terminate()
        code = server.wait(30)
        log.close()
    assert code == 0
