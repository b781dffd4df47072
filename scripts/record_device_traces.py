"""Records the small command traces scripts/device_check.sh replays on the GPU machine.

Run with a Python that has TensorFlow and the vgpu plugin installed (the main checkout's venv):
    /work/main/.venv/bin/python scripts/record_device_traces.py OUT_DIR [MODEL...]
MODEL is cnn, mlp, lstm or transformer (default: all). Each model is a tiny Keras model trained
for 3 steps on random data (fixed seeds) in a child process with VGPU_TRACE=OUT_DIR/MODEL.vgtrace,
so that each trace stays around a MiB. The op-test trace (ops.vgtrace) is recorded by
scripts/prepare_device_kit.sh (it runs pytest from a checkout).
"""
import os
import subprocess
import sys

_MODELS = {
    "cnn": """
m = keras.Sequential([keras.Input((16, 16, 3)),
    keras.layers.Conv2D(8, 3, padding="same", activation="relu"),
    keras.layers.MaxPooling2D(),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.BatchNormalization(),
    keras.layers.GlobalAveragePooling2D(),
    keras.layers.Dense(10)])
x = np.random.rand(24, 16, 16, 3).astype("float32"); y = np.random.randint(0, 10, 24)
""",
    "mlp": """
m = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
    keras.layers.Dropout(0.1), keras.layers.Dense(64, activation="tanh"), keras.layers.Dense(10)])
x = np.random.rand(24, 32).astype("float32"); y = np.random.randint(0, 10, 24)
""",
    "lstm": """
m = keras.Sequential([keras.Input((6, 8)), keras.layers.LSTM(16), keras.layers.Dense(10)])
x = np.random.rand(24, 6, 8).astype("float32"); y = np.random.randint(0, 10, 24)
""",
    "transformer": """
inp = keras.Input((8, 16))
a = keras.layers.MultiHeadAttention(num_heads=2, key_dim=8)(inp, inp)
h = keras.layers.LayerNormalization()(inp + a)
f = keras.layers.Dense(32, activation="relu")(h)
f = keras.layers.Dense(16)(f)
h = keras.layers.LayerNormalization()(h + f)
out = keras.layers.Dense(10)(keras.layers.GlobalAveragePooling1D()(h))
m = keras.Model(inp, out)
x = np.random.rand(24, 8, 16).astype("float32"); y = np.random.randint(0, 10, 24)
""",
}

_TRAIN = """
import numpy as np, tensorflow as tf, keras
tf.random.set_seed(1); np.random.seed(1)
with tf.device("/GPU:0"):
{model}
    m.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    m.fit(x, y, batch_size=8, epochs=1, steps_per_epoch=3, verbose=0)
print("recorded")
"""


def record(out_dir, name):
    path = os.path.join(out_dir, name + ".vgtrace")
    if os.path.exists(path):
        os.remove(path)
    body = "\n".join("    " + line for line in _MODELS[name].strip().splitlines())
    env = dict(os.environ, VGPU_TRACE=path, VGPU_MEMORY_LIMIT="512MiB",
               TF_CPP_MIN_LOG_LEVEL="2")
    subprocess.run([sys.executable, "-c", _TRAIN.format(model=body)], env=env, check=True)
    print(f"{path}: {os.path.getsize(path) / 2**20:.2f} MiB")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or list(_MODELS):
        record(out_dir, name)


if __name__ == "__main__":
    main()
