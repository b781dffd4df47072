"""Shared set-up of the Python tests. The plugin reads its configuration when TensorFlow loads
it, so the environment is set here, before any test module imports TensorFlow: two virtual GPUs
of 1 GiB each. Tests that need another configuration run a child Python (`run_python`)."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

os.environ.setdefault("VGPU_DEVICE_COUNT", "2")
os.environ.setdefault("VGPU_MEMORY_LIMIT", "1GiB")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
# The reference is TensorFlow's CPU kernels with oneDNN, whatever the machine: TensorFlow turns
# oneDNN on by itself only on CPUs with AVX-512 (VNNI/BF16) or AMX, and its other CPU kernels
# differ on some cases the op tests check (checked on an AVX2-only EPYC: AvgPoolGrad with a window
# wider than the input disagrees with TensorFlow's own AvgPool forward, dilated
# Conv2DBackpropInput is unsupported, 3-D max pooling handles NaNs otherwise).
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")


def _child_env(extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.pop("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", None)
    env.update(extra or {})
    return env


def run_python_code(code, env=None, timeout=180):
    """Runs Python code in a fresh interpreter with the given VGPU_* environment; returns the
    CompletedProcess (stdout/stderr as text). Never hangs: `timeout` seconds at most."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=_child_env(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def run_probe(code, env=None, timeout=300):
    """Runs a probe (Python code that prints one line "PROBE <json>") as run_python_code does;
    asserts that it succeeded and returns the decoded JSON."""
    result = run_python_code(code, env=env, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("PROBE "))
    return json.loads(line.split(" ", 1)[1])


def declined_info(env):
    """vgpu.info() of a fresh interpreter with the given VGPU_* environment, which the plugin
    must decline: asserts zero devices and returns the info (its "declined" says why)."""
    result = run_python_code(
        "import json, vgpu; print('INFO ' + json.dumps(vgpu.info()))", env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    line = next(l for l in result.stdout.splitlines() if l.startswith("INFO "))
    info = json.loads(line[5:])
    assert info["device_count"] == 0
    return info


@pytest.fixture
def run_python():
    """run_python_code as a fixture: run(code, env=None, timeout=180)."""
    return run_python_code


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true", default=False,
                     help="also run the slow cases marked `full` (./scripts/test.sh --full)")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "full: a slow case that CI skips; ./scripts/test.sh --full runs it")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--full") or os.environ.get("VGPU_FULL_TESTS") == "1":
        return
    skip = pytest.mark.skip(reason="slow case: run with ./scripts/test.sh --full")
    for item in items:
        if "full" in item.keywords:
            item.add_marker(skip)
