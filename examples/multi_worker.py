"""One worker of a multi-worker Keras training job, each worker on its own virtual GPU.

Run one process per worker. Each process names its place in the job with TensorFlow's own
TF_CONFIG, and its virtual GPU with VGPU_BACKEND (typically a `vgpu server` of its own, on the
worker's host or a GPU host near it). The workers train one model with
tf.distribute.MultiWorkerMirroredStrategy: TensorFlow's collective ops exchange the gradients
over gRPC, the virtual GPUs do the compute. Every worker builds the same synthetic dataset with
tf.data and the strategy shards each global batch across the workers, so the job trains to the
same losses as one worker with the whole global batch.

    # two servers and two workers on one host (README, "Running a pool", shows it in full)
    TF_CONFIG='{"cluster": {"worker": ["localhost:12345", "localhost:12346"]},
                "task": {"type": "worker", "index": 0}}' \\
    VGPU_BACKEND=unix:///tmp/vgpu-0.sock python examples/multi_worker.py --epochs 2

Without TF_CONFIG it trains alone (one worker, the whole global batch): the reference the
multi-worker job must match. The chief (worker 0, or the only worker) prints one line
`RESULT {"loss": [...], "workers": N, ...}` at the end; --result_file writes it to a file too.
"""
import json
import os

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("epochs", 2, "Training epochs.")
flags.DEFINE_integer("global_batch_size", 32, "Batch size summed over all workers.")
flags.DEFINE_integer("samples", 256, "Training samples to generate (the same on every worker).")
flags.DEFINE_integer("seed", 11, "Seed for data and weights.")
flags.DEFINE_string("result_file", "", "Also write the chief's RESULT JSON here.")


def make_dataset(tf, samples, seed, global_batch_size):
    import numpy as np

    rng = np.random.default_rng(seed)
    templates = rng.uniform(0.0, 1.0, size=(4, 12, 12, 1)).astype("float32")
    labels = rng.integers(0, 4, size=samples).astype("int32")
    noise = rng.normal(0.0, 0.3, size=(samples, 12, 12, 1)).astype("float32")
    images = (templates[labels] + noise).astype("float32")
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).batch(
        global_batch_size, drop_remainder=True)
    # Each worker reads the whole dataset and keeps its share of every global batch.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)


def build_model(keras):
    return keras.Sequential([
        keras.Input(shape=(12, 12, 1)),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Flatten(),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(4),
    ])


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    import vgpu

    cluster = json.loads(os.environ.get("TF_CONFIG", "{}"))
    workers = len(cluster.get("cluster", {}).get("worker", [])) or 1
    index = cluster.get("task", {}).get("index", 0)
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    keras.utils.set_random_seed(FLAGS.seed)
    dataset = make_dataset(tf, FLAGS.samples, FLAGS.seed, FLAGS.global_batch_size)
    with strategy.scope():
        model = build_model(keras)
        optimizer = keras.optimizers.SGD(learning_rate=0.05, momentum=0.9)
        per_example_loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                      reduction="none")
    batches = strategy.experimental_distribute_dataset(dataset)

    # A custom training loop, the form MultiWorkerMirroredStrategy documents: each replica
    # averages its examples' losses over the global batch, and the strategy sums the gradients
    # across workers (TensorFlow's collective all-reduce).
    @tf.function
    def train_step(images, labels):
        def replica_step(images, labels):
            with tf.GradientTape() as tape:
                logits = model(images, training=True)
                loss = tf.nn.compute_average_loss(
                    per_example_loss(labels, logits), global_batch_size=FLAGS.global_batch_size)
            gradients = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(gradients, model.trainable_variables))
            return loss

        losses = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    epoch_losses = []
    for _ in range(FLAGS.epochs):
        total, steps = 0.0, 0
        for images, labels in batches:
            total += float(train_step(images, labels))
            steps += 1
        epoch_losses.append(total / steps)
    stats = vgpu.stats()
    result = {
        "loss": epoch_losses,
        "workers": workers,
        "replicas": strategy.num_replicas_in_sync,
        "backend": stats["devices"][0]["backend"] if stats["devices"] else None,
        "launches": stats["launches"],
    }
    if index == 0:
        line = "RESULT " + json.dumps(result)
        print(line, flush=True)
        if FLAGS.result_file:
            with open(FLAGS.result_file, "w", encoding="utf-8") as f:
                f.write(line + "\n")


if __name__ == "__main__":
    app.run(main)
