"""End-to-end check of the benchmark harness: `vgpu bench --quick` writes well-formed outputs
(results.json, table.md, PNG plots), and `vgpu bench --profile --quick` the per-op account. The
numbers themselves are not checked."""
import json
import os
import re
import statistics
import subprocess
import sys

import pytest

pytest.importorskip("matplotlib")

_CONFIGURATIONS = ["tensorflow-cpu", "vgpu inproc reuse", "vgpu inproc forward",
                   "vgpu unix reuse", "vgpu unix forward", "vgpu tcp reuse", "vgpu tcp forward"]


def test_quick_bench_writes_results_table_and_plots(tmp_path):
    out = tmp_path / "bench"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    done = subprocess.run([sys.executable, "-m", "vgpu.cli", "bench", "--quick", "--models",
                           "mlp", "--out", str(out)], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert "[vgpu bench" in done.stdout  # progress lines

    results = json.loads((out / "results.json").read_text())
    assert {"machine", "settings", "runs", "ping_pong", "bandwidth"} <= results.keys()
    assert results["settings"]["configurations"] == _CONFIGURATIONS
    assert [(r["model"], r["configuration"]) for r in results["runs"]] == [
        ("mlp", c) for c in _CONFIGURATIONS]
    for run in results["runs"]:
        assert run["summary"]["median_step_s"] > 0
        if run["configuration"] != "tensorflow-cpu":
            for key in ("descriptor_calls_forwarded", "descriptor_calls_local", "launches",
                        "round_trips", "bytes_sent", "bytes_received"):
                assert f"{key}_per_step" in run["summary"]
            assert run["per_step_counters"]  # one per warm-up step
            assert run["summary"]["launches_per_step"] > 0
    assert [p["transport"] for p in results["ping_pong"]] == ["unix", "tcp"]
    assert [b["transport"] for b in results["bandwidth"]] == [
        "inproc", "unix", "unix-socket", "tcp"]
    for b in results["bandwidth"]:
        assert b["htod_GBps"] > 0 and b["dtoh_GBps"] > 0 and b["round_trip_GBps"] > 0
    # The tiny-launch rows: TensorFlow's CPU op as the reference, the virtual GPU in process
    # and through a Unix server, each op one launch there.
    assert [c["configuration"] for c in results["launch_cost"]] == [
        "tensorflow-cpu", "vgpu inproc", "vgpu unix"]
    for cost in results["launch_cost"]:
        # The reported cost is the line through the two chains' median calls (a quick run's
        # few calls are too noisy to bound the figures themselves).
        assert len(cost["call_s"]) == len(cost["short_call_s"]) == 5
        assert cost["short_ops"] < cost["ops"]
        assert cost["median_call_s"] == statistics.median(cost["call_s"])
        slope = (cost["median_call_s"] - cost["median_short_call_s"]) / (
            cost["ops"] - cost["short_ops"])
        assert cost["us_per_op"] == pytest.approx(1e6 * slope)
        assert cost["call_us"] == pytest.approx(
            1e6 * (cost["median_short_call_s"] - cost["short_ops"] * slope))
        if cost["device"] == "gpu":
            assert cost["launches_per_call"] >= cost["ops"]
    # Peak resident memory per configuration (a remote one adds its server's), and the
    # TensorFlow process's context switches over the measured steps (a virtual GPU's stream
    # worker sleeps between steps at least).
    for run in results["runs"]:
        assert run["summary"]["peak_rss_bytes"] > 50 << 20
        assert set(run["context_switches"]) == {"voluntary", "involuntary"}
        assert run["summary"]["voluntary_context_switches_per_step"] == pytest.approx(
            run["context_switches"]["voluntary"] / run["steps"])
        if run["configuration"].startswith("vgpu"):
            assert run["context_switches"]["voluntary"] > 0
    remote = [r for r in results["runs"] if r["configuration"].startswith("vgpu unix")]
    assert all(r["server_peak_rss_bytes"] > 0 for r in remote)

    table = (out / "table.md").read_text().splitlines()
    assert table[0].startswith("| model | configuration | median step (ms) |")
    assert "vs in-process" in table[0] and "KiB sent / step" in table[0]
    assert "peak RSS (MiB)" in table[0] and "executor primitives created / reused" in table[0]
    assert "context switches / step, voluntary / involuntary" in table[0]
    assert any(line.startswith("| configuration | µs per tiny op") for line in table)
    assert results["activity_hooks_off_ns"] > 0
    assert any(line.startswith("Profiling hooks with no profile taken:") for line in table)
    rows = [line for line in table if line.startswith("| mlp |")]
    assert [line.split("|")[2].strip() for line in rows] == _CONFIGURATIONS
    assert any(line.startswith("| transport |") for line in table)
    transport_rows = [line for line in table
                      if line.startswith(("| inproc |", "| unix |", "| unix-socket |", "| tcp |"))]
    assert len(transport_rows) == 4
    # Two ratio cells per row: time vs inproc, speed vs unix-socket.
    assert all(len(re.findall(r"\| \d+\.\d\dx ", line)) == 2 for line in transport_rows), \
        transport_rows

    for name in ("step_time.png", "round_trips.png", "warmup_curve.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name


def test_quick_profile_writes_a_per_op_account_of_each_model_in_process_and_remote(tmp_path):
    out = tmp_path / "profile"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    done = subprocess.run([sys.executable, "-m", "vgpu.cli", "bench", "--profile", "--quick",
                           "--profile_remote", "--models", "mlp", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    text = (out / "op_account.md").read_text()
    local, _, remote = text.partition("**mlp through a Unix server** (ms per step)")
    assert remote, "no table through a server"
    for table in (local.splitlines(), remote.splitlines()):
        rows = {line.split("|")[1].strip(): line for line in table if line.startswith("| ")}
        # The mlp's matrix products run on both sides (TensorFlow-CPU may fuse them with their
        # bias as _FusedMatMul): time on TensorFlow's CPU kernels and on the virtual GPU's
        # executor (through a server, the kernel times the server sent back).
        matmuls = [line.split("|") for name, line in rows.items() if "MatMul" in name]
        assert sum(float(cells[2]) for cells in matmuls) > 0
        assert sum(float(cells[3]) for cells in matmuls) > 0
        assert "**step, as the table adds up**" in rows
        assert "**step, measured by the worker**" in rows
        assert any(line.startswith("The table accounts for the measured gap to within")
                   for line in table)
    assert local.splitlines()[0] == "**mlp** (ms per step)"
    assert (out / "profiles" / "mlp-gpu-unix").is_dir()


@pytest.mark.parametrize("policy", ["mixed_bfloat16", "mixed_float16"])
def test_a_mixed_precision_run_trains_the_model_under_that_policy(policy):
    """--policy reaches the worker, which trains under it on the virtual GPU and on
    TensorFlow-CPU to a finite loss."""
    from vgpu.bench import harness  # noqa: PLC0415

    gpu = harness.run_configuration(harness.INPROC_REUSE, "cnn", steps=2, warmup=1,
                                    batch_size=8, policy=policy)
    cpu = harness.run_configuration(harness.TF_CPU, "cnn", steps=2, warmup=1, batch_size=8,
                                    policy=policy)
    for result in (gpu, cpu):
        assert result["policy"] == policy
        assert 0 < result["loss"] < 10
        assert len(result["step_times"]) == 2
    assert gpu["measured_counters"]["launches"] > 0  # it ran on the virtual GPU


def test_the_tiny_op_cost_is_the_slope_between_two_chains_and_the_call_the_rest():
    from vgpu.bench.launch_cost import per_op_cost

    us_per_op, call_us = per_op_cost(short_s=300e-6, long_s=700e-6, short_ops=20, ops=420)
    assert us_per_op == pytest.approx(1.0)
    assert call_us == pytest.approx(280.0)
    with pytest.raises(ValueError, match="longer than the short one"):
        per_op_cost(300e-6, 700e-6, short_ops=20, ops=20)


def test_quick_zoo_writes_a_row_per_model_with_both_sides_and_their_ratio(tmp_path):
    out = tmp_path / "zoo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    done = subprocess.run([sys.executable, "-m", "vgpu.cli", "bench", "--zoo", "--quick",
                           "--models", "layer_norm,embedding", "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    results = json.loads((out / "zoo.json").read_text())
    rows = results["rows"]
    assert [row["model"] for row in rows] == ["layer_norm", "embedding"]
    for row in rows:
        assert row["tf_cpu_step_s"] > 0 and row["vgpu_step_s"] > 0
        assert row["throughput_vs_tf_cpu"] == pytest.approx(row["tf_cpu_step_s"] /
                                                            row["vgpu_step_s"])
        assert row["launches_per_step"] > 0  # the virtual GPU side ran on the virtual GPU
        assert 0 < row["tf_cpu_loss"] < 10 and 0 < row["vgpu_loss"] < 10
    table = (out / "zoo.md").read_text().splitlines()
    assert table[2].startswith("| layer_norm | Dense, LayerNormalization |")
    geometric = (rows[0]["throughput_vs_tf_cpu"] * rows[1]["throughput_vs_tf_cpu"]) ** 0.5
    assert table[-1] == f"| geometric mean | | | | {geometric:.2f}x | |"


def test_the_worker_trains_from_a_dataset_of_unknown_batch_size_with_dataset():
    """--dataset: fit on a dataset batched without drop_remainder, so the traced step computes
    its shapes (the element counts of the layer norm's and the loss's means, cast on the device:
    more of the optimizer's host casts than with the arrays' whole batches); same loss."""
    results = {}
    for dataset in (False, True):
        env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        done = subprocess.run(
            [sys.executable, "-m", "vgpu.bench.worker", "--model=layer_norm", "--device=gpu",
             "--steps=2", "--warmup=1", "--batch_size=16", f"--{'' if dataset else 'no'}dataset"],
            env=env, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-4000:]
        line = next(l for l in done.stdout.splitlines() if l.startswith("VGPU_BENCH_RESULT "))
        results[dataset] = json.loads(line.split(" ", 1)[1])
    assert results[True]["dataset"] and not results[False]["dataset"]
    assert results[True]["steps"] == results[False]["steps"] == 2
    casts = {d: r["graph_fusions"]["cast_from_host"] for d, r in results.items()}
    assert casts[True] > casts[False], casts
    assert results[True]["loss"] == pytest.approx(results[False]["loss"], rel=1e-5)


def test_every_zoo_model_builds_for_its_data_and_ends_in_ten_logits():
    import keras  # noqa: PLC0415

    from vgpu.bench import models, zoo  # noqa: PLC0415

    assert set(zoo.NAMES).isdisjoint(models.MODELS)
    for name in zoo.NAMES:
        inputs, labels = models.make_model_data(name, samples=4, seed=0)
        assert inputs.shape == (4, *models.input_shape(name)), name
        assert labels.dtype == "int32" and labels.min() >= 0 and labels.max() < 10
        if zoo.ZOO[name].vocabulary:
            assert inputs.dtype == "int32" and inputs.min() >= 1
            assert inputs.max() < zoo.ZOO[name].vocabulary
        with keras.device("cpu"):  # building only: no need to run on the virtual GPU
            logits = models.build(name)(inputs)
        assert tuple(logits.shape) == (4, 10), name


def test_the_zoo_table_gives_each_ratio_and_their_geometric_mean():
    from vgpu.bench import runner  # noqa: PLC0415

    rows = [{"model": "lstm", "layers": "LSTM (20 steps)", "tf_cpu_step_s": 0.002,
             "vgpu_step_s": 0.004, "throughput_vs_tf_cpu": 0.5, "launches_per_step": 300.0},
            {"model": "gru", "layers": "GRU (20 steps)", "tf_cpu_step_s": 0.004,
             "vgpu_step_s": 0.0025, "throughput_vs_tf_cpu": 1.6, "launches_per_step": None}]
    lines = runner.zoo_table(rows).splitlines()
    assert lines[2] == "| lstm | LSTM (20 steps) | 2.00 | 4.00 | 0.50x | 300 |"
    assert lines[3] == "| gru | GRU (20 steps) | 4.00 | 2.50 | 1.60x | – |"
    assert lines[4] == "| geometric mean | | | | 0.89x | |"
    with pytest.raises(ValueError, match="not zoo models: cnn"):
        runner.run_zoo("unused", ["cnn"], steps=1, warmup=1, batch_size=8, repeats=1)
