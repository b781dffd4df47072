"""The CPU compile matrix: compiles (-fsyntax-only, nothing is run) every translation unit of the
project that includes Eigen, oneDNN or TensorFlow's C++ headers, once per CPU target, so that a
header that does not build for some user's CPU fails CI instead of that user's first build.

For each target it configures a build folder with -DVGPU_CPU_TARGET=<target> (so the target
goes through cmake/CpuTarget.cmake's probe exactly as a user's build does, dropping an ISA
extension TensorFlow's Eigen rejects), reads the compile commands CMake exports, and compiles
the chosen sources with those very flags, in parallel, each under a time limit. Prints a table
(target, flags, units, failures, seconds) and exits non-zero if any unit fails anywhere.

Usage (scripts/compile_matrix.sh sets up the environment first):
    python scripts/compile_matrix.py [--targets sapphirerapids,znver4] [--jobs 2]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TARGETS = ("sapphirerapids", "graniterapids", "znver4", "x86-64-v3", "x86-64-v2")
# A project source reaching any of these headers is compiled in the matrix.
HEAVY_HEADER = re.compile(r'#\s*include\s*[<"](Eigen/|unsupported/Eigen/|dnnl|oneapi/dnnl|'
                          r'tensorflow/core/|xla/)')
PROJECT_INCLUDE = re.compile(r'#\s*include\s*"((?:plugin|python|tests)/[^"]+)"')


def includes_heavy_headers(source: Path, memo: dict[Path, bool]) -> bool:
    """Whether `source` includes, directly or through project headers, a heavy header."""
    if source in memo:
        return memo[source]
    memo[source] = False  # include cycles end here
    try:
        text = source.read_text(errors="replace")
    except OSError:
        return False
    found = bool(HEAVY_HEADER.search(text))
    if not found:
        for header in PROJECT_INCLUDE.findall(text):
            if includes_heavy_headers(ROOT / header, memo):
                found = True
                break
    memo[source] = found
    return found


def configure(build: Path, target: str, python: str) -> str:
    """Configures `build` for `target`; returns the CPU flags the probe chose."""
    pybind11_dir = subprocess.run([python, "-m", "pybind11", "--cmakedir"], check=True,
                                  capture_output=True, text=True).stdout.strip()
    done = subprocess.run(
        ["cmake", "-S", str(ROOT), "-B", str(build), "-G", "Ninja",
         f"-DPython_EXECUTABLE={python}", f"-Dpybind11_DIR={pybind11_dir}",
         f"-DVGPU_CPU_TARGET={target}", "-DCMAKE_EXPORT_COMPILE_COMMANDS=ON",
         "-DVGPU_BUILD_TESTS=ON"],
        capture_output=True, text=True)
    output = done.stdout + done.stderr
    if done.returncode != 0:
        raise RuntimeError(f"configuring for {target} failed:\n{output}")
    chosen = re.findall(r"CPU target: \S+ \(([^)]*)\)", output)
    for line in output.splitlines():
        if "CPU target" in line or "does not compile with" in line:
            print(f"  [{target}] {line.strip()}", flush=True)
    return chosen[-1] if chosen else "?"


def syntax_only_command(entry: dict) -> list[str]:
    """The build's compile command for one unit, checking syntax only (no object written)."""
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    if Path(args[0]).name == "ccache":
        args = args[1:]
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if arg in ("-MD", "-MMD", "-c"):
            continue
        kept.append(arg)
    return kept + ["-fsyntax-only"]


def compile_unit(entry: dict, timeout: float) -> tuple[str, str | None, float]:
    started = time.monotonic()
    try:
        done = subprocess.run(syntax_only_command(entry), cwd=entry["directory"],
                              capture_output=True, text=True, timeout=timeout)
        error = None if done.returncode == 0 else (done.stderr.strip() or "failed")[-3000:]
    except subprocess.TimeoutExpired:
        error = f"timed out after {timeout:.0f} s"
    return entry["file"], error, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", default=",".join(DEFAULT_TARGETS))
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--build_root", default=str(ROOT / "build-matrix"))
    parser.add_argument("--python", default=str(ROOT / ".venv" / "bin" / "python"))
    parser.add_argument("--unit_timeout", type=float, default=300,
                        help="seconds one unit may take")
    args = parser.parse_args()

    memo: dict[Path, bool] = {}
    rows = []
    failures = 0
    for target in [t for t in args.targets.split(",") if t]:
        started = time.monotonic()
        build = Path(args.build_root) / target
        try:
            flags = configure(build, target, args.python)
        except RuntimeError as error:
            print(error, file=sys.stderr)
            rows.append((target, "configure failed", 0, 1, time.monotonic() - started))
            failures += 1
            continue
        entries = json.loads((build / "compile_commands.json").read_text())
        # One flavour of each source: the TensorFlow one (the standalone copy, when configured,
        # compiles the same code against the system's Abseil).
        seen: set[str] = set()
        units = []
        for entry in entries:
            source = Path(entry["file"])
            if str(source) in seen or not includes_heavy_headers(source, memo):
                continue
            seen.add(str(source))
            units.append(entry)
        failed = 0
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            for file, error, seconds in pool.map(
                    lambda e: compile_unit(e, args.unit_timeout), units):
                if error:
                    failed += 1
                    print(f"  [{target}] FAILED {Path(file).relative_to(ROOT)}:\n{error}",
                          flush=True)
        elapsed = time.monotonic() - started
        print(f"  [{target}] {len(units) - failed}/{len(units)} units compile ({elapsed:.0f} s)",
              flush=True)
        rows.append((target, flags, len(units), failed, elapsed))
        failures += failed

    print("\n| target | flags | units | failed | seconds |\n|---|---|---|---|---|")
    for target, flags, units, failed, seconds in rows:
        print(f"| {target} | `{flags}` | {units} | {failed} | {seconds:.0f} |")
    passed = sum(units - failed for _, _, units, failed, _ in rows)
    print(f"\nmatrix: {passed} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
