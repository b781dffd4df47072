"""The server executable, vgpu/bin/vgpu-server. The default build links it with the plugin's
layers, which reach Abseil through libtensorflow_framework.so.2 from the installed TensorFlow
package (found by its RUNPATH, relative to the executable); built with
VGPU_BUILD_STANDALONE_SERVER=ON it links no TensorFlow at all and runs on a machine without
TensorFlow. Either way it is run here directly, in an empty environment (no PYTHONPATH, no
virtual environment, a minimal PATH), and served to a raw wire-format tenant and to a TensorFlow
client. Every wait is bounded."""
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from raw_tenant import ALLOCATE, ChildProcess, RawTenant, wait_for

from vgpu import server as vgpu_server

BINARY = vgpu_server.binary_path()
BARE_ENVIRONMENT = {"PATH": "/usr/bin:/bin"}


def _dynamic_section(path):
    """readelf -d of an ELF file."""
    return subprocess.run(["readelf", "-d", path], capture_output=True, text=True, check=True,
                          timeout=60).stdout


def _needed_libraries(path):
    """The DT_NEEDED entries of an ELF file."""
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", _dynamic_section(path))


# Built with VGPU_BUILD_STANDALONE_SERVER=ON (no TensorFlow library at all)?
STANDALONE = not any("tensorflow" in name for name in _needed_libraries(BINARY))
# Where the TensorFlow package this Python imports lives (without importing it).
TENSORFLOW_DIR = os.path.realpath(os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(vgpu_server.__file__))), "tensorflow"))


def _run_bare(*flags):
    """Runs vgpu-server with `flags` in the bare environment to its end (60 s at most)."""
    return subprocess.run([BINARY, *flags], env=BARE_ENVIRONMENT, capture_output=True, text=True,
                          timeout=60, check=False)


class BareServer(ChildProcess):
    """vgpu-server started with nothing from this environment, on a Unix socket in tmp_path."""

    def __init__(self, tmp_path, *flags):
        self.socket_path = tmp_path / "vgpu.sock"
        ready = tmp_path / "ready"
        self._start_server(
            [BINARY, f"--listen=unix://{self.socket_path}", f"--ready_file={ready}",
             "--memory_limit=256MiB", "--compute_threads=2", *flags],
            ready, tmp_path / "server.log", "vgpu-server", env=BARE_ENVIRONMENT, cwd=tmp_path)

    def stop(self):
        """SIGTERM; returns the exit code."""
        self.process.terminate()
        code = self.process.wait(15)
        self.log.close()
        return code


@pytest.fixture
def bare_server(tmp_path):
    server = BareServer(tmp_path)
    yield server
    if server.process.poll() is None:
        server.process.kill()
        server.process.wait(5)


def test_the_package_installs_the_server():
    assert os.access(BINARY, os.X_OK), BINARY


def test_the_server_links_tensorflow_only_from_its_package_or_not_at_all():
    needed = _needed_libraries(BINARY)
    assert needed, "readelf found no NEEDED entries"
    assert not [name for name in needed if "absl" in name], needed  # Abseil is never a library
    if STANDALONE:
        assert not [name for name in needed if "tensorflow" in name], needed
        return
    # The default build: libtensorflow_framework.so.2 alone, found beside the vgpu package.
    assert [name for name in needed if "tensorflow" in name] == ["libtensorflow_framework.so.2"]
    runpath = re.search(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[([^\]]*)\]",
                        _dynamic_section(BINARY))
    assert runpath, "vgpu-server has no RUNPATH"
    assert "$ORIGIN/../../tensorflow" in runpath.group(1).split(":"), runpath.group(1)
    assert all(entry.startswith("$ORIGIN") for entry in runpath.group(1).split(":")), runpath


def test_the_server_serves_a_raw_tenant_from_a_bare_environment(bare_server):
    with open(f"/proc/{bare_server.process.pid}/maps", encoding="ascii") as f:
        mapped = {line.split()[-1] for line in f if line.rstrip().endswith(".so") or ".so." in line}
    tensorflow_files = sorted(path for path in mapped if "tensorflow" in path)
    if STANDALONE:
        assert not tensorflow_files
    else:  # only the framework library, and only from the installed TensorFlow package
        assert [os.path.basename(path) for path in tensorflow_files] == [
            "libtensorflow_framework.so.2"], tensorflow_files
        assert os.path.realpath(tensorflow_files[0]).startswith(TENSORFLOW_DIR + os.sep)
    values = np.linspace(-2, 2, 512, dtype=np.float32)
    with RawTenant(bare_server.address) as tenant:
        stream = tenant.create_stream()
        x, y = tenant.allocate(values.nbytes), tenant.allocate(values.nbytes)
        tenant.write(stream, x, values.tobytes())
        tenant.relu(stream, x, y, values.size)
        data = tenant.read(stream, y, values.nbytes)
        assert tenant.synchronize(stream).ok
    np.testing.assert_array_equal(np.frombuffer(data, np.float32), np.maximum(values, 0))


def test_sigterm_stops_the_server_cleanly(bare_server):
    with RawTenant(bare_server.address) as tenant:
        tenant.allocate(4096)
        assert bare_server.stop() == 0
    assert not bare_server.socket_path.exists()


def test_an_unknown_executor_exits_nonzero_listing_the_known_ones(tmp_path):
    done = _run_bare(f"--listen=unix://{tmp_path}/vgpu.sock", "--executor=quantum")
    assert done.returncode != 0
    assert "unknown executor 'quantum'; this build offers: cpu" in done.stderr
    assert not (tmp_path / "vgpu.sock").exists()


def test_the_cuda_executor_of_a_build_without_cuda_exits_nonzero_naming_cuda(tmp_path):
    # The package's vgpu-server is built without VGPU_CUDA (scripts/build_cuda.sh builds one).
    done = _run_bare(f"--listen=unix://{tmp_path}/vgpu.sock", "--executor=cuda")
    assert done.returncode != 0
    assert "this build has no CUDA executor; build it with scripts/build_cuda.sh" in done.stderr
    assert not (tmp_path / "vgpu.sock").exists()


def test_help_lists_every_flag_of_vgpu_server():
    done = _run_bare("--help")
    assert done.returncode == 0, done.stderr
    for flag in vgpu_server.SERVER_FLAGS:
        assert re.search(rf"--(\[no\])?{flag}:", done.stdout), flag


@pytest.mark.parametrize("contents", ["", "   \n\t\n"])
def test_a_token_file_without_a_token_is_refused_at_start(tmp_path, contents):
    # Taken as "no token", it would silently serve without authentication.
    token_file = tmp_path / "token"
    token_file.write_text(contents)
    done = _run_bare(f"--listen=unix://{tmp_path}/vgpu.sock", f"--token_file={token_file}")
    assert done.returncode != 0
    assert f"--token_file {token_file} holds no token" in done.stderr, done.stderr
    assert not (tmp_path / "vgpu.sock").exists()


def test_flags_take_byte_sizes_and_refuse_unknown_flags(tmp_path):
    server = BareServer(tmp_path, "--client_quota=1.5MiB", "--max_staging_bytes", "64MiB",
                        "--nofair_scheduling", "--max_connections=8", "--frame_timeout=2.5")
    try:
        with RawTenant(server.address) as tenant:
            assert tenant.call(ALLOCATE, size=1 << 20).ok  # within the quota
            assert not tenant.call(ALLOCATE, size=1 << 20).ok  # past 1.5 MiB
    finally:
        assert server.stop() == 0
    done = _run_bare("--listen=unix:///tmp/x.sock", "--bogus=1")
    assert done.returncode == 2 and "unknown flag --bogus" in done.stderr
    done = _run_bare("--listen=unix:///tmp/x.sock", "--memory_limit=lots")
    assert done.returncode == 1 and "--memory_limit" in done.stderr


def test_vgpu_server_command_runs_the_server_binary(tmp_path):
    ready = tmp_path / "ready"
    process = subprocess.Popen([sys.executable, "-m", "vgpu.server",
                                f"--listen=unix://{tmp_path}/vgpu.sock", f"--ready_file={ready}",
                                "--memory_limit=64MiB"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: ready.exists() or process.poll() is not None, 30, "the server")
        assert process.poll() is None, process.stderr.read()
        assert os.path.realpath(f"/proc/{process.pid}/exe") == os.path.realpath(BINARY)
    finally:
        process.terminate()
        assert process.wait(15) == 0


TRAIN = """
    import numpy as np, keras
    import vgpu
    assert vgpu.is_available(), vgpu.info()
    keras.utils.set_random_seed(1)
    x = np.random.default_rng(0).uniform(size=(32, 8)).astype("float32")
    y = (x.sum(axis=1) > 4).astype("int32")
    model = keras.Sequential([keras.Input(shape=(8,)), keras.layers.Dense(16, activation="relu"),
                              keras.layers.Dense(2)])
    model.compile(optimizer="sgd",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    history = model.fit(x, y, epochs=2, batch_size=16, verbose=0)
    assert all(np.isfinite(history.history["loss"])), history.history
    print("TRAINED", vgpu.info()["backends"])
"""


def test_a_tensorflow_client_trains_against_the_bare_server(bare_server):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.update(VGPU_BACKEND=bare_server.address, TF_CPP_MIN_LOG_LEVEL="2")
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(TRAIN)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "TRAINED" in done.stdout and bare_server.address in done.stdout
    wait_for(lambda: "disconnected" in bare_server.output(), 5, "the client's departure")
