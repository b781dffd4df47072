"""The GNU OpenMP settings oneDNN runs under (vgpu/_openmp.py): set before libgomp loads, in
every interpreter of the environment (tensorflow_vgpu.pth) and in the server binary `vgpu server`
starts, unless the user set them."""
import os
import subprocess
import sys
import time

from vgpu import _openmp

OPENMP_VARIABLES = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
PRINT_THEM = "import os; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"


def _without_openmp_variables():
    return {k: v for k, v in os.environ.items() if k not in OPENMP_VARIABLES}


def test_the_defaults_fill_only_what_the_user_left_unset():
    environ = {"GOMP_SPINCOUNT": "7", "PATH": "/bin"}
    _openmp.apply_defaults(environ)
    assert environ == {"GOMP_SPINCOUNT": "7", "PATH": "/bin", "OMP_WAIT_POLICY": "PASSIVE"}
    environ = {}
    _openmp.apply_defaults(environ)
    assert environ == {"OMP_WAIT_POLICY": "PASSIVE", "GOMP_SPINCOUNT": "20000"}


def test_every_interpreter_starts_with_them_and_keeps_the_users_values():
    env = _without_openmp_variables()
    done = subprocess.run([sys.executable, "-c", PRINT_THEM], env=env, capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.split() == ["PASSIVE", "20000"]
    done = subprocess.run([sys.executable, "-c", PRINT_THEM],
                          env={**env, "OMP_WAIT_POLICY": "ACTIVE", "GOMP_SPINCOUNT": "3"},
                          capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.split() == ["ACTIVE", "3"]


def test_the_server_binary_runs_with_them(tmp_path):
    ready = tmp_path / "ready"
    env = {**_without_openmp_variables(), "GOMP_SPINCOUNT": "5"}
    process = subprocess.Popen([sys.executable, "-m", "vgpu.server",
                                f"--listen=unix://{tmp_path}/vgpu.sock", f"--ready_file={ready}",
                                "--memory_limit=64MiB"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):
            if ready.exists() or process.poll() is not None:
                break
            time.sleep(0.1)
        assert process.poll() is None
        with open(f"/proc/{process.pid}/environ", "rb") as environ:
            variables = dict(entry.decode().partition("=")[::2]
                             for entry in environ.read().split(b"\0") if entry)
        assert variables["OMP_WAIT_POLICY"] == "PASSIVE"
        assert variables["GOMP_SPINCOUNT"] == "5"  # the user's value
    finally:
        process.terminate()
        assert process.wait(15) == 0
