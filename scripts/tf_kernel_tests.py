"""TensorFlow's own kernel tests as a check of the virtual GPU.

Given a folder of TensorFlow 2.21 kernel test files (fetched from tensorflow/tensorflow, kept
outside this repository: docs/tf_kernel_tests.md says how), runs each file twice (as a script, as TensorFlow's own test targets do):
once as TensorFlow sees it with tensorflow-vgpu installed (the virtual GPU is "GPU:0", so every
`use_gpu`/`run_gpu_only` path of the tests runs on it), and once with the plugin not loaded (no
GPU at all). A test that fails or errors only in the first run is a GPU-only failure: the
report lists those, grouped by cause (exception class and the message with its numbers, node
names and shapes blanked out), and exits non-zero when there is any.

Usage (inside the virtual environment scripts/setup.sh made):
    python scripts/tf_kernel_tests.py --tests_dir=/path/to/kernel_tests [--jobs=2]
        [--only=pooling,conv] [--timeout=1200] [--json=report.json]
"""
from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_string("tests_dir", None, "Folder searched recursively for TensorFlow's *_test.py.")
flags.DEFINE_list("only", [], "Run only the files whose path contains one of these words.")
flags.DEFINE_integer("jobs", 2, "Test files run at once (each run is one pytest process).")
flags.DEFINE_integer("timeout", 1800, "Seconds one pytest run of one file may take.")
flags.DEFINE_string("json", None, "Also write the full result (every failure) to this file.")
flags.DEFINE_string("python", sys.executable, "The Python of the environment to test.")
flags.mark_flag_as_required("tests_dir")

MODES = ("vgpu", "cpu")

# Put on PYTHONPATH for the "cpu" run: it keeps TensorFlow from loading the libraries in
# site-packages/tensorflow-plugins (tensorflow-vgpu's among them), so that run has no GPU.
# TensorFlow loads them from its __init__ through tensorflow.python.framework.load_library;
# the hook wraps that module's two loaders as soon as it is imported.
_NO_PLUGINS_SITECUSTOMIZE = '''
import importlib.abc, importlib.util, os, sys

_MODULE = "tensorflow.python.framework.load_library"

class _SkipPluginFolder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run_module = spec.loader.exec_module

        def exec_module(module):
            run_module(module)
            for loader_name in ("load_library", "load_pluggable_device_library"):
                real = getattr(module, loader_name)

                def load(library_location, _real=real):
                    folder = os.path.basename(os.path.normpath(library_location))
                    if folder == "tensorflow-plugins":
                        return None
                    return _real(library_location)

                setattr(module, loader_name, load)

        spec.loader.exec_module = exec_module
        return spec

sys.meta_path.insert(0, _SkipPluginFolder())
'''

# Blanked out of a failure message before grouping: what differs between instances of the
# same cause.
_NOISE = [
    (re.compile(r"\[Op:[^\]]*\]"), "[Op:_]"),
    (re.compile(r"name: [^\s,]+"), "name: _"),
    (re.compile(r"node [^\s:]+"), "node _"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x_"),
    (re.compile(r"-?\d+(\.\d+)?(e[-+]?\d+)?"), "#"),
    (re.compile(r"\s+"), " "),
]


def find_test_files(tests_dir: Path, only: list[str]) -> list[Path]:
    files = sorted(tests_dir.rglob("*_test.py"))
    if only:
        files = [f for f in files if any(word in str(f.relative_to(tests_dir)) for word in only)]
    return files


def run_file(test_file: Path, mode: str, work: Path, python: str, timeout: int) -> dict:
    """Runs one test file in one mode; returns {test id: (outcome, message)} and a status."""
    report = work / f"{test_file.stem}.{mode}.xml"
    env = dict(os.environ)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    if mode == "cpu":
        hook_dir = work / "no_plugins"
        hook_dir.mkdir(exist_ok=True)
        (hook_dir / "sitecustomize.py").write_text(_NO_PLUGINS_SITECUSTOMIZE)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(hook_dir),
                                                          env.get("PYTHONPATH")]))
    # As a script (several files add generated test methods in their __main__ block);
    # TensorFlow's test.main is absltest's, which writes JUnit XML to XML_OUTPUT_FILE.
    env["XML_OUTPUT_FILE"] = str(report)
    command = [python, str(test_file)]
    started = time.monotonic()
    try:
        completed = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True,
                                   timeout=timeout)
        status = f"exit {completed.returncode}"
        tail = completed.stdout[-2000:] + completed.stderr[-2000:]
    except subprocess.TimeoutExpired:
        status, tail = f"timed out after {timeout} s", ""
    seconds = time.monotonic() - started
    results = {}
    if report.exists():
        for case in ElementTree.parse(report).iter("testcase"):
            test_id = f"{case.get('classname')}.{case.get('name')}"
            outcome, message = "passed", ""
            for kind in ("failure", "error", "skipped"):
                element = case.find(kind)
                if element is not None:
                    outcome = "skipped" if kind == "skipped" else "failed"
                    message = element.get("message") or (element.text or "")[:500]
                    break
            if case.get("result") in ("suppressed", "skipped") or case.get("status") == "notrun":
                outcome = "skipped"
            results[test_id] = (outcome, message)
    elif "timed out" not in status:
        last_line = tail.strip().splitlines()[-1] if tail.strip() else ""
        status += f" (no report; last output: {last_line})"
    return {"results": results, "status": status, "seconds": seconds}


def cause_of(message: str) -> str:
    """The message reduced to what identifies its cause."""
    first = message.strip().splitlines()[0] if message.strip() else "(no message)"
    for pattern, replacement in _NOISE:
        first = pattern.sub(replacement, first)
    return first[:160]


def main(argv):
    del argv
    tests_dir = Path(FLAGS.tests_dir).resolve()
    files = find_test_files(tests_dir, FLAGS.only)
    if not files:
        sys.exit(f"no *_test.py under {tests_dir}")
    print(f"{len(files)} test files, each run with the virtual GPU and with no GPU "
          f"({FLAGS.jobs} at once)", flush=True)
    with tempfile.TemporaryDirectory(prefix="vgpu-tf-kernel-tests-") as scratch:
        runs = {}
        with concurrent.futures.ThreadPoolExecutor(FLAGS.jobs) as pool:
            futures = {}
            for test_file in files:
                for mode in MODES:
                    work = Path(scratch) / f"{test_file.relative_to(tests_dir)}".replace("/", "_")
                    work.mkdir(exist_ok=True)
                    future = pool.submit(run_file, test_file, mode, work, FLAGS.python,
                                         FLAGS.timeout)
                    futures[future] = (test_file, mode)
            for future in concurrent.futures.as_completed(futures):
                test_file, mode = futures[future]
                runs[(test_file, mode)] = future.result()
                run = runs[(test_file, mode)]
                counts = collections.Counter(o for o, _ in run["results"].values())
                print(f"  {mode:4} {test_file.relative_to(tests_dir)}: {counts['passed']} passed, "
                      f"{counts['failed']} failed, {counts['skipped']} skipped, "
                      f"{run['status']}, {run['seconds']:.0f} s", flush=True)

    gpu_only = []  # (file, test id, cause, message)
    broken_runs = []
    table = []
    for test_file in files:
        name = str(test_file.relative_to(tests_dir))
        vgpu, cpu = runs[(test_file, "vgpu")], runs[(test_file, "cpu")]
        for mode, run in (("vgpu", vgpu), ("cpu", cpu)):
            if not run["results"]:
                broken_runs.append((name, mode, run["status"]))
        failures = 0
        for test_id, (outcome, message) in sorted(vgpu["results"].items()):
            cpu_outcome = cpu["results"].get(test_id, ("missing", ""))[0]
            if outcome == "failed" and cpu_outcome in ("passed", "skipped"):
                gpu_only.append((name, test_id, cause_of(message), message))
                failures += 1
        table.append((name, len(vgpu["results"]), failures))

    print("\nGPU-only failures per file:")
    for name, tests, failures in table:
        print(f"  {failures:4} of {tests:5}  {name}")
    groups = collections.defaultdict(list)
    for name, test_id, cause, _ in gpu_only:
        groups[cause].append(f"{name}::{test_id}")
    print(f"\n{len(gpu_only)} GPU-only failures in {len(groups)} causes:")
    for cause, tests in sorted(groups.items(), key=lambda item: -len(item[1])):
        print(f"\n[{len(tests)}] {cause}")
        for test in tests[:8]:
            print(f"    {test}")
        if len(tests) > 8:
            print(f"    ... and {len(tests) - 8} more")
    for name, mode, status in broken_runs:
        print(f"\nno results from {name} ({mode}): {status}")
    if FLAGS.json:
        Path(FLAGS.json).write_text(json.dumps({
            "files": [{"file": n, "tests": t, "gpu_only": f} for n, t, f in table],
            "gpu_only": [{"file": n, "test": t, "cause": c, "message": m}
                         for n, t, c, m in gpu_only],
            "broken_runs": [{"file": n, "mode": m, "status": s} for n, m, s in broken_runs],
        }, indent=1))
    sys.exit(1 if gpu_only or broken_runs else 0)


if __name__ == "__main__":
    app.run(main)
