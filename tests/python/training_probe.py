"""A child-process probe for the descriptor-reuse tests: trains a small Keras CNN (with a final
partial batch) on the virtual GPU or on TensorFlow's CPU kernels and prints one JSON line with
the losses and the vgpu counters of every step. Run as
    python training_probe.py gpu|cpu
with the plugin configured through VGPU_* variables."""
import json
import sys

import numpy as np


def per_step_counters(keys):
    """A Keras callback whose `steps` lists, for each training batch, how much each vgpu.stats()
    counter named in `keys` grew during it. Imports keras and vgpu: call it in the probe's child
    process, after the plugin's configuration is in place."""
    import keras

    import vgpu

    class PerStep(keras.callbacks.Callback):
        def __init__(self):
            super().__init__()
            self.steps = []

        def on_train_batch_begin(self, batch, logs=None):
            self.before = vgpu.stats()

        def on_train_batch_end(self, batch, logs=None):
            after = vgpu.stats()
            self.steps.append({k: after[k] - self.before[k] for k in keys})

    return PerStep()


def main(device):
    import keras
    import tensorflow as tf

    if device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    import vgpu
    import vgpu.keras

    keras.utils.set_random_seed(5)
    rng = np.random.default_rng(5)
    x = rng.uniform(0, 1, size=(200, 14, 14, 1)).astype("float32")  # 200 = 3 * 64 + 8
    y = rng.integers(0, 6, size=200).astype("int32")
    model = keras.Sequential([
        keras.Input(shape=(14, 14, 1)),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.MaxPooling2D(),
        keras.layers.Conv2D(8, 3, activation="relu"),
        keras.layers.Flatten(),
        keras.layers.Dropout(0.2),
        keras.layers.Dense(16, activation="relu"),
        keras.layers.Dense(6),
    ])
    # On the CPU, Keras' jit_compile="auto" would pick XLA (the hidden GPU still counts as a
    # physical device): compare against TensorFlow's own CPU kernels instead.
    model.compile(optimizer="adam",
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  jit_compile=False if device == "cpu" else "auto")
    callbacks = []
    if device == "gpu":
        callbacks.append(per_step_counters((
            "descriptor_calls_forwarded", "descriptor_calls_local", "round_trips", "launches",
            "descriptor_settings_updates")))
    history = model.fit(x, y, batch_size=64, epochs=3, shuffle=False, verbose=0,
                        callbacks=callbacks)
    result = {"losses": history.history["loss"]}
    if device == "gpu":
        stats = vgpu.stats()
        result.update(steps=callbacks[0].steps, iterations_detected=stats["iterations_detected"],
                      descriptor_calls=stats["descriptor_calls"], mode=stats["descriptor_mode"],
                      forwarded=stats["descriptor_calls_forwarded"],
                      local=stats["descriptor_calls_local"], graph_fusions=stats["graph_fusions"])
    print("PROBE " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1])
