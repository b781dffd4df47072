"""``python -m vgpu.bench``: trains the benchmark models under several configurations, side by
side in one run, and prints a Markdown table (and writes results.json with --out)."""
from __future__ import annotations

import json
import os

from absl import app, flags

from vgpu.bench import harness

FLAGS = flags.FLAGS
flags.DEFINE_list("models", ["cnn", "mlp"], "Models: cnn, mlp, resnet.")
flags.DEFINE_integer("steps", 40, "Measured steps per configuration.")
flags.DEFINE_integer("warmup", 5, "Warm-up steps per configuration.")
flags.DEFINE_integer("batch_size", 64, "Batch size.")
flags.DEFINE_integer("repeats", 1, "Run the whole set of configurations this many times, "
                     "interleaved, and keep the best median of each (less noise).")
flags.DEFINE_string("out", None, "Folder for results.json and table.md.")
flags.DEFINE_bool("quick", False, "A few steps only: checks the harness, not the numbers.")
flags.DEFINE_bool("remote", True, "Also run through a `vgpu server` (Unix socket and TCP), and "
                  "measure the transports' round-trip latency (ping-pong).")
flags.DEFINE_bool("tf_cpu", True, "Include TensorFlow's own CPU kernels as a configuration.")


def main(argv):
    del argv
    steps, warmup = (4, 2) if FLAGS.quick else (FLAGS.steps, FLAGS.warmup)
    configurations = [harness.INPROC_REUSE, harness.INPROC_FORWARD]
    if FLAGS.tf_cpu:
        configurations.insert(0, harness.TF_CPU)
    if FLAGS.remote:
        configurations += [harness.REMOTE_UNIX_REUSE, harness.REMOTE_UNIX_FORWARD,
                           harness.REMOTE_TCP_REUSE, harness.REMOTE_TCP_FORWARD]
        for kind in ("unix", "tcp"):
            print("ping-pong " + json.dumps(harness.ping_pong(kind, 2000 if FLAGS.quick
                                                                  else 20000)), flush=True)
    best: dict[tuple[str, str], dict] = {}
    for repeat in range(FLAGS.repeats):
        for model in FLAGS.models:
            for config in configurations:
                print(f"[{repeat + 1}/{FLAGS.repeats}] {model}: {config.name} ...", flush=True)
                result = harness.run_configuration(config, model, steps, warmup,
                                                   FLAGS.batch_size)
                key = (model, config.name)
                if (key not in best or result["summary"]["median_step_s"]
                        < best[key]["summary"]["median_step_s"]):
                    best[key] = result
    rows = [best[(m, c.name)] for m in FLAGS.models for c in configurations]
    table = harness.markdown_table(rows, configurations[0].name)
    print(table)
    if FLAGS.out:
        os.makedirs(FLAGS.out, exist_ok=True)
        with open(os.path.join(FLAGS.out, "results.json"), "w") as f:
            json.dump(rows, f, indent=1)
        with open(os.path.join(FLAGS.out, "table.md"), "w") as f:
            f.write(table + "\n")


if __name__ == "__main__":
    app.run(main)
