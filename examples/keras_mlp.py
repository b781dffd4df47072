"""Trains a small Keras MLP on the virtual GPU, with unmodified Keras code, and shows the
descriptor-reuse method at work: the first step (the warm-up) forwards descriptor calls to the
backing executor, every later step answers them locally.

The data is MNIST-shaped and generated locally (nothing is downloaded). Prints where the model
runs, the loss per epoch, and per step the descriptor calls forwarded and the round trips
(also shown in the progress bar by vgpu.keras.VgpuStepCallback).

    python examples/keras_mlp.py --epochs 3
"""
from absl import app, flags

FLAGS = flags.FLAGS
flags.DEFINE_integer("epochs", 3, "Training epochs.")
flags.DEFINE_integer("batch_size", 128, "Batch size.")
flags.DEFINE_integer("samples", 4096, "Training images to generate.")


def main(argv):
    del argv
    import keras
    import numpy as np
    import tensorflow as tf

    import vgpu
    import vgpu.keras

    print(f"TensorFlow {tf.__version__}, virtual GPUs: {vgpu.devices() or 'none'}")
    if not vgpu.is_available():
        print(f"no virtual GPU: {vgpu.info()['declined']}")
        return 1
    rng = np.random.default_rng(3)
    templates = rng.uniform(0, 1, size=(10, 28, 28)).astype("float32")
    labels = rng.integers(0, 10, size=FLAGS.samples)
    images = np.clip(templates[labels] + rng.normal(0, 0.4, size=(FLAGS.samples, 28, 28)), 0, 1)

    keras.utils.set_random_seed(3)
    model = keras.Sequential([
        keras.Input(shape=(28, 28)),
        keras.layers.Flatten(),
        keras.layers.Dense(256, activation="relu"),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(128, activation="relu"),
        keras.layers.Dense(10),
    ])
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    print(f"model variables live on: {model.weights[0].value.device}")
    callback = vgpu.keras.VgpuStepCallback(mark_steps=False)
    history = model.fit(images.astype("float32"), labels.astype("int32"), epochs=FLAGS.epochs,
                        batch_size=FLAGS.batch_size, verbose=2, callbacks=[callback])
    for epoch, loss in enumerate(history.history["loss"], start=1):
        print(f"epoch {epoch}: loss {loss:.4f}")
    steps = callback.history
    print(f"step 1 (warm-up): {steps[0]['fwd_desc']} descriptor calls forwarded, "
          f"{steps[0]['round_trips']} round trips")
    later = steps[1:]
    print(f"steps 2-{len(steps)}: {sum(s['fwd_desc'] for s in later)} descriptor calls forwarded, "
          f"{sum(s['round_trips'] for s in later) / max(len(later), 1):.1f} round trips per step")
    stats = vgpu.stats()
    print(f"vgpu: {stats['launches']} launches, {stats['descriptor_calls_local']} descriptor calls "
          f"answered locally, iterations detected {stats['iterations_detected']}, "
          f"mode {stats['descriptor_mode']}")
    return 0


if __name__ == "__main__":
    app.run(main)
