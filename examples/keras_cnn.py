"""Trains a small Keras CNN on the virtual GPU, with unmodified Keras code.

The data is MNIST-shaped (28x28 grey images, 10 classes) and generated locally: each class is a
fixed random template plus noise, so the model has something real to learn and nothing is
downloaded. Prints where the model runs, the loss per epoch, and the vgpu counters.

    python examples/keras_cnn.py --epochs 3 --batch_size 64
"""
import time

from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("epochs", 3, "Training epochs.")
flags.DEFINE_integer("batch_size", 64, "Batch size.")
flags.DEFINE_integer("samples", 2048, "Training images to generate.")
flags.DEFINE_integer("seed", 7, "Seed for data and weights.")


def make_dataset(samples, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    templates = rng.uniform(0.0, 1.0, size=(10, 28, 28, 1)).astype("float32")
    labels = rng.integers(0, 10, size=samples)
    noise = rng.normal(0.0, 0.35, size=(samples, 28, 28, 1)).astype("float32")
    images = np.clip(templates[labels] + noise, 0.0, 1.0).astype("float32")
    return images, labels.astype("int32")


def build_model(keras):
    return keras.Sequential(
        [
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Conv2D(16, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.25),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )


def main(argv):
    del argv
    import keras
    import tensorflow as tf

    import vgpu

    gpus = vgpu.devices()
    print(f"TensorFlow {tf.__version__}, virtual GPUs: {gpus or 'none'}")
    if not gpus:
        print(f"no virtual GPU: {vgpu.info()['declined']}")
        return 1
    keras.utils.set_random_seed(FLAGS.seed)
    images, labels = make_dataset(FLAGS.samples, FLAGS.seed)

    model = build_model(keras)
    model.compile(
        optimizer="adam",
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    print(f"model variables live on: {model.weights[0].value.device}")
    vgpu.reset_stats()
    start = time.perf_counter()
    history = model.fit(
        images, labels, epochs=FLAGS.epochs, batch_size=FLAGS.batch_size, verbose=2
    )
    elapsed = time.perf_counter() - start
    for epoch, loss in enumerate(history.history["loss"], start=1):
        print(f"epoch {epoch}: loss {loss:.4f}")
    stats = vgpu.stats()
    steps = FLAGS.epochs * -(-FLAGS.samples // FLAGS.batch_size)
    print(f"trained {steps} steps in {elapsed:.1f} s")
    print(
        "vgpu counters: "
        f"launches {stats['launches']}, commands {stats['commands_sent']}, "
        f"round trips {stats['round_trips']}, "
        f"to device {stats['bytes_to_device'] >> 20} MiB, "
        f"from device {stats['bytes_from_device'] >> 20} MiB, "
        f"device memory in use {stats['bytes_in_use'] >> 20} MiB"
    )
    return 0


if __name__ == "__main__":
    app.run(main)
