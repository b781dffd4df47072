"""The benchmark suite behind ``vgpu bench`` and ``python -m vgpu.bench``: trains the benchmark
models under every configuration (each in a child process), measures the transports (ping-pong
latency, host/device bandwidth), and writes results.json, table.md and PNG plots."""
from __future__ import annotations

import json
import os
import platform
import time

from absl import flags

from vgpu.bench import harness, models as bench_models, zoo

FLAGS = flags.FLAGS
flags.DEFINE_list("models", list(bench_models.MODELS),
                  "Models: cnn, mlp, resnet, mobilenetv2 (keras.applications.MobileNetV2, "
                  "96x96), or any zoo model (--zoo).")
flags.DEFINE_integer("steps", 40, "Measured steps per configuration.")
flags.DEFINE_integer("warmup", 5, "Warm-up steps per configuration.")
flags.DEFINE_integer("batch_size", 64, "Batch size.")
flags.DEFINE_enum("policy", "float32", ["float32", "mixed_float16", "mixed_bfloat16"],
                  "Keras' dtype policy of the models' layers, in every configuration (mixed: "
                  "16-bit computation, float32 variables and logits).")
flags.DEFINE_integer("repeats", 1, "Run the whole set of configurations this many times, "
                     "interleaved, and keep the best median of each (less noise).")
flags.DEFINE_string("out", "bench-out", "Folder for results.json, table.md and the plots.")
flags.DEFINE_bool("quick", False, "A few steps and small transfers only: checks the harness, "
                  "not the numbers.")
flags.DEFINE_bool("remote", True, "Also run through a `vgpu server` (Unix socket and TCP), and "
                  "measure the transports (ping-pong latency, bandwidth).")
flags.DEFINE_bool("tf_cpu", True, "Include TensorFlow's own CPU kernels as a configuration.")
flags.DEFINE_float("bandwidth_mb", 64, "Size of the tensor of the bandwidth test, MiB.")
flags.DEFINE_bool("profile", False, "Instead of the suite: the per-op account. Profiles "
                  "--profile_steps steps of each model under TensorFlow-CPU and the in-process "
                  "virtual GPU and writes op_account.md: each op type's time per step on both, "
                  "the client's, and the idle rest (vgpu/bench/op_account.py).")
flags.DEFINE_integer("profile_steps", 5, "Profiled steps per model with --profile.")
flags.DEFINE_bool("profile_remote", False, "With --profile: also profile each model on the "
                  "virtual GPU through a `vgpu server` on a Unix socket, a second table per "
                  "model (the server times each command; it does not say when commands were "
                  "queued or what its streams waited for).")
flags.DEFINE_bool("zoo", False, "Instead of the suite: the speed zoo, small Keras models of "
                  "one or two layer families each (vgpu/bench/zoo.py; all of them unless "
                  "--models names some), each trained on TensorFlow-CPU and on the in-process "
                  "virtual GPU in turn, --repeats rounds; writes zoo.md and zoo.json.")
flags.DEFINE_bool("dataset", False, "With --zoo: train each model from a tf.data dataset "
                  "batched without drop_remainder (the step's batch size unknown when traced, "
                  "as in most users' fit) instead of from arrays.")


def machine() -> dict:
    """The machine the numbers were measured on: cores, CPU model, memory, Python/platform."""
    details = {"nproc": os.cpu_count(), "platform": platform.platform(),
               "python": platform.python_version()}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            details["cpu"] = next((l.split(":", 1)[1].strip() for l in f
                                   if l.startswith("model name")), None)
        with open("/proc/meminfo", encoding="utf-8") as f:
            kib = int(next(l for l in f if l.startswith("MemTotal")).split()[1])
            details["memory_gib"] = round(kib / (1 << 20), 1)
    except (OSError, StopIteration, ValueError):
        pass
    return details


def _progress(message: str) -> None:
    print(f"[vgpu bench {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _best_runs(models: list[str], configurations, repeats: int, steps: int, warmup: int,
               batch_size: int, policy: str = "float32",
               dataset: bool = False) -> dict[tuple[str, str], dict]:
    """Runs every model under every configuration, `repeats` interleaved rounds (from a dataset
    of unknown batch size with `dataset`); returns the result with the best median step of each
    (model, configuration name)."""
    best: dict[tuple[str, str], dict] = {}
    total, done = repeats * len(models) * len(configurations), 0
    for repeat in range(repeats):
        for model in models:
            for config in configurations:
                done += 1
                _progress(f"({done}/{total}) repeat {repeat + 1}: {model} on {config.name} ...")
                result = harness.run_configuration(config, model, steps, warmup, batch_size,
                                                   policy=policy, dataset=dataset)
                _progress(f"  median step {1000 * result['summary']['median_step_s']:.2f} ms")
                key = (model, config.name)
                if (key not in best or result["summary"]["median_step_s"]
                        < best[key]["summary"]["median_step_s"]):
                    best[key] = result
    return best


def run(out: str, models: list[str], steps: int, warmup: int, batch_size: int, repeats: int,
        quick: bool, remote: bool, tf_cpu: bool, bandwidth_mb: float,
        policy: str = "float32") -> dict:
    """Runs the suite (the models' layers under Keras' dtype `policy`) and writes its outputs
    into `out`; returns the results (as results.json)."""
    if quick:
        steps, warmup, repeats, bandwidth_mb = 3, 2, 1, 4
    configurations = [harness.INPROC_REUSE, harness.INPROC_FORWARD]
    if tf_cpu:
        configurations.insert(0, harness.TF_CPU)
    if remote:
        configurations += [harness.REMOTE_UNIX_REUSE, harness.REMOTE_UNIX_FORWARD,
                           harness.REMOTE_TCP_REUSE, harness.REMOTE_TCP_FORWARD]
    transports = ["inproc"] + (["unix", "unix-socket", "tcp"] if remote else [])
    ping_pongs, bandwidths = [], []
    for kind in transports:
        if kind in ("unix", "tcp"):  # unix-socket: the same connection latency as unix
            _progress(f"ping-pong over {kind} ...")
            ping_pongs.append(harness.ping_pong(kind, 2000 if quick else 20000))
            _progress(f"  median {ping_pongs[-1]['median_us']:.1f} µs")
        _progress(f"bandwidth {kind} ({bandwidth_mb:g} MiB) ...")
        bandwidths.append(harness.bandwidth(kind, bandwidth_mb, 2 if quick else 5))
        _progress(f"  host to device {bandwidths[-1]['htod_GBps']:.2f} GB/s, "
                  f"device to host {bandwidths[-1]['dtoh_GBps']:.2f} GB/s, "
                  f"round trip {bandwidths[-1]['round_trip_GBps']:.2f} GB/s")
    launch_costs = []
    for name, _, server in harness.LAUNCH_COST_CONFIGURATIONS:
        if (server is not None and not remote) or (name == "tensorflow-cpu" and not tf_cpu):
            continue
        _progress(f"launch cost {name} ...")
        launch_costs.append(harness.launch_cost(name, 60 if quick else 420, 10 if quick else 20,
                                                5 if quick else 100))
        _progress(f"  {launch_costs[-1]['us_per_op']:.2f} µs per tiny op, "
                  f"{launch_costs[-1]['call_us']:.0f} µs per call besides its ops")
    hooks_off_ns = harness.activity_hooks_off_ns()
    _progress(f"profiling hooks with no profile taken: {hooks_off_ns:.1f} ns per op")
    best = _best_runs(models, configurations, repeats, steps, warmup, batch_size, policy)
    rows = [best[(m, c.name)] for m in models for c in configurations]
    table = harness.markdown_table(rows, configurations[0].name)
    transport = (harness.transport_table(ping_pongs, bandwidths) + "\n\n" +
                 harness.launch_cost_table(launch_costs, hooks_off_ns))
    results = {"machine": machine(),
               "settings": {"models": models, "steps": steps, "warmup": warmup,
                            "batch_size": batch_size, "repeats": repeats, "quick": quick,
                            "policy": policy,
                            "configurations": [c.name for c in configurations],
                            "bandwidth_mb": bandwidth_mb},
               "runs": rows, "ping_pong": ping_pongs, "bandwidth": bandwidths,
               "launch_cost": launch_costs, "activity_hooks_off_ns": hooks_off_ns}
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, "table.md"), "w", encoding="utf-8") as f:
        f.write(table + "\n\n" + transport + "\n")
    _progress("plotting ...")
    from vgpu.bench import plots  # noqa: PLC0415 - matplotlib only when plotting

    plots.write_all(rows, out)
    print(table + "\n\n" + transport, flush=True)
    _progress(f"wrote results.json, table.md, step_time.png, round_trips.png, warmup_curve.png "
              f"to {out}")
    return results


def run_profile(out: str, models: list[str], steps: int, warmup: int,
                batch_size: int, remote: bool = False, policy: str = "float32") -> str:
    """The per-op account of each model (see --profile; with `remote`, --profile_remote's second
    table), its layers under Keras' dtype `policy`; writes op_account.md into `out` and returns
    its text."""
    from vgpu.bench import op_account  # noqa: PLC0415

    configs = [("cpu", harness.TF_CPU), ("gpu", harness.INPROC_REUSE)]
    if remote:
        configs.append(("gpu-unix", harness.REMOTE_UNIX_REUSE))
    sections = []
    for model in models:
        profiles = {}
        for label, config in configs:
            folder = os.path.abspath(os.path.join(out, "profiles", f"{model}-{label}"))
            _progress(f"profiling {steps} steps of {model} on {config.name} ...")
            result = harness.run_configuration(config, model, steps, warmup, batch_size,
                                               profile_dir=folder, policy=policy)
            profiles[label] = (op_account.load_xspace(folder), result["profiled_span_s"])
        named = model if policy == "float32" else f"{model}, {policy}"
        for label, title in (("gpu", named), ("gpu-unix", f"{named} through a Unix server")):
            if label not in profiles:
                continue
            comparison = op_account.compare(*profiles["cpu"], *profiles[label])
            sections.append(op_account.markdown(title, comparison))
            _progress(f"  {title}: gap accounted to within "
                      f"{100 * comparison.unaccounted:.1f}%")
    text = "\n\n".join(sections) + "\n"
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "op_account.md"), "w", encoding="utf-8") as f:
        f.write(text)
    print(text, flush=True)
    return text


def run_zoo(out: str, models: list[str], steps: int, warmup: int, batch_size: int,
            repeats: int, quick: bool = False, dataset: bool = False) -> dict:
    """The speed zoo (see --zoo): trains each of `models` (zoo names) on TensorFlow-CPU and on
    the in-process virtual GPU, `repeats` interleaved rounds, keeping each side's best median
    step (from a dataset of unknown batch size with `dataset`); writes zoo.json and zoo.md (one
    row per model, its ratio, and the geometric mean of the ratios) into `out` and returns the
    results."""
    unknown = [m for m in models if m not in zoo.ZOO]
    if unknown:
        raise ValueError(f"not zoo models: {', '.join(unknown)}; the zoo has "
                         f"{', '.join(zoo.NAMES)}")
    if quick:
        steps, warmup, repeats = 3, 2, 1
    best = _best_runs(models, (harness.TF_CPU, harness.INPROC_REUSE), repeats, steps, warmup,
                      batch_size, dataset=dataset)
    rows = [zoo_row(model, best[(model, harness.TF_CPU.name)],
                    best[(model, harness.INPROC_REUSE.name)]) for model in models]
    results = {"machine": machine(),
               "settings": {"models": models, "steps": steps, "warmup": warmup,
                            "batch_size": batch_size, "repeats": repeats, "quick": quick,
                            "dataset": dataset},
               "rows": rows}
    table = zoo_table(rows)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "zoo.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(out, "zoo.md"), "w", encoding="utf-8") as f:
        f.write(table + "\n")
    print(table, flush=True)
    _progress(f"wrote zoo.json and zoo.md to {out}")
    return results


def zoo_row(model: str, cpu: dict, vgpu: dict) -> dict:
    """One zoo table row from the best TensorFlow-CPU and in-process results of `model`."""
    cpu_s, vgpu_s = cpu["summary"]["median_step_s"], vgpu["summary"]["median_step_s"]
    return {"model": model, "layers": zoo.ZOO[model].layers, "tf_cpu_step_s": cpu_s,
            "vgpu_step_s": vgpu_s, "throughput_vs_tf_cpu": cpu_s / vgpu_s,
            "launches_per_step": vgpu["summary"].get("launches_per_step"),
            "tf_cpu_loss": cpu["loss"], "vgpu_loss": vgpu["loss"]}


def zoo_table(rows: list[dict]) -> str:
    """The zoo's Markdown table: a row per model and the geometric mean of the ratios."""
    lines = ["| model | layers | TF-CPU step (ms) | virtual GPU step (ms) | "
             "throughput vs TF-CPU | launches / step |",
             "|---|---|---:|---:|---:|---:|"]
    for row in rows:
        launches = row["launches_per_step"]
        lines.append(f"| {row['model']} | {row['layers']} | {1000 * row['tf_cpu_step_s']:.2f} | "
                     f"{1000 * row['vgpu_step_s']:.2f} | {row['throughput_vs_tf_cpu']:.2f}x | "
                     f"{'–' if launches is None else f'{launches:.0f}'} |")
    if rows:
        product = 1.0
        for row in rows:
            product *= row["throughput_vs_tf_cpu"]
        lines.append(f"| geometric mean | | | | {product ** (1 / len(rows)):.2f}x | |")
    return "\n".join(lines)


def main_from_flags() -> int:
    """Runs the suite (or, with --profile, the per-op account; with --zoo, the speed zoo) with
    the parsed absl flags; returns the exit status."""
    if FLAGS.zoo:
        names = FLAGS.models if FLAGS["models"].present else list(zoo.NAMES)
        run_zoo(FLAGS.out, names, FLAGS.steps, FLAGS.warmup, FLAGS.batch_size, FLAGS.repeats,
                FLAGS.quick, FLAGS.dataset)
        return 0
    if FLAGS.profile:
        steps = 2 if FLAGS.quick else FLAGS.profile_steps
        run_profile(FLAGS.out, FLAGS.models, steps, 2 if FLAGS.quick else FLAGS.warmup,
                    FLAGS.batch_size, FLAGS.profile_remote, FLAGS.policy)
        return 0
    run(FLAGS.out, FLAGS.models, FLAGS.steps, FLAGS.warmup, FLAGS.batch_size, FLAGS.repeats,
        FLAGS.quick, FLAGS.remote, FLAGS.tf_cpu, FLAGS.bandwidth_mb, FLAGS.policy)
    return 0
