"""The CPU target of the build (cmake/CpuTarget.cmake, docs/building.md): configuring for a CPU
whose AVX512-FP16 TensorFlow's Eigen cannot compile with this compiler drops exactly that
extension and says so; a CPU name the compiler does not know is spelled as a known ancestor plus
its extensions; a name nobody knows is refused with what to use instead. Each case configures
the source tree in a scratch folder (the configure-time probe compiles one small unit); nothing
is built. scripts/compile_matrix.sh then compiles the project itself for such CPUs."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CMAKE = Path(sys.executable).parent / "cmake"

pytestmark = pytest.mark.skipif(not (ROOT / "cmake" / "CpuTarget.cmake").is_file() or
                                not CMAKE.exists(), reason="needs the source tree and cmake")


def _configure(build, target):
    pybind11_dir = subprocess.run([sys.executable, "-m", "pybind11", "--cmakedir"], check=True,
                                  capture_output=True, text=True).stdout.strip()
    return subprocess.run(
        [str(CMAKE), "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
         f"-DPython_EXECUTABLE={sys.executable}", f"-Dpybind11_DIR={pybind11_dir}",
         f"-DVGPU_CPU_TARGET={target}"],
        capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "PATH": f"{CMAKE.parent}:{os.environ.get('PATH', '')}"})


def _chosen_flags(output):
    chosen = re.findall(r"-- CPU target: \S+ \(([^)]*)\)", output)
    assert chosen, output
    return chosen[-1].split()


def _eigen_accepts_avx512fp16():
    """Whether this compiler builds TensorFlow's Eigen with AVX512-FP16 (GCC 12 does not)."""
    import tensorflow as tf  # noqa: F401  (only for its include folder)
    include = os.path.join(os.path.dirname(tf.__file__), "include")
    done = subprocess.run(
        ["c++", "-std=c++17", "-march=sapphirerapids", "-DEIGEN_MAX_ALIGN_BYTES=64",
         "-fsyntax-only", "-isystem", include, "-x", "c++", "-"],
        input='#include "unsupported/Eigen/CXX11/Tensor"\n', capture_output=True, text=True,
        timeout=300, check=False)
    return done.returncode == 0


def test_the_portable_default_is_x86_64_v2_with_avx(tmp_path):
    done = _configure(tmp_path / "build", "portable")
    assert done.returncode == 0, done.stdout + done.stderr
    assert _chosen_flags(done.stdout) == ["-march=x86-64-v2", "-mavx", "-mtune=generic"]


def test_an_extension_eigen_rejects_is_dropped_alone_and_named(tmp_path):
    done = _configure(tmp_path / "build", "sapphirerapids")
    assert done.returncode == 0, done.stdout + done.stderr
    flags = _chosen_flags(done.stdout)
    if _eigen_accepts_avx512fp16():
        assert flags == ["-march=sapphirerapids"]
    else:
        assert flags == ["-march=sapphirerapids", "-mno-avx512fp16"], flags
        assert re.search(r"does not compile with\s+avx512fp16", done.stderr), done.stderr
        assert "PacketMathFP16.h" in done.stderr  # the first error, for the user to see
    # Probed once: a second configure reuses the answer.
    again = _configure(tmp_path / "build", "sapphirerapids")
    assert again.returncode == 0 and "as probed before" in again.stdout, again.stdout
    assert _chosen_flags(again.stdout) == flags


def test_an_unknown_name_is_refused_with_what_to_use(tmp_path):
    done = _configure(tmp_path / "build", "quantum9000")
    assert done.returncode != 0
    text = re.sub(r"\s+", " ", done.stderr)
    assert "VGPU_CPU_TARGET='quantum9000'" in text and "Use portable, native" in text, text
    assert _configure(tmp_path / "other", "-O3; rm").returncode != 0  # not a CPU name
