"""The models and data the benchmarks train: MNIST-shaped images generated locally."""
from __future__ import annotations

import numpy as np


def make_data(samples: int, seed: int = 0):
    """Images (samples, 28, 28, 1) in [0, 1] and int32 labels in [0, 10): class templates plus
    noise, so that the loss really falls."""
    rng = np.random.default_rng(seed)
    templates = rng.uniform(0.0, 1.0, size=(10, 28, 28, 1)).astype("float32")
    labels = rng.integers(0, 10, size=samples)
    noise = rng.normal(0.0, 0.35, size=(samples, 28, 28, 1)).astype("float32")
    images = np.clip(templates[labels] + noise, 0.0, 1.0).astype("float32")
    return images, labels.astype("int32")


def build(name: str):
    """A Keras model by name: "cnn", "mlp" or "resnet" (a small residual network)."""
    import keras

    if name == "cnn":
        return keras.Sequential([
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Conv2D(32, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Conv2D(64, 3, activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dropout(0.25),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ])
    if name == "mlp":
        return keras.Sequential([
            keras.Input(shape=(28, 28, 1)),
            keras.layers.Flatten(),
            keras.layers.Dense(256, activation="relu"),
            keras.layers.Dropout(0.2),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(10),
        ])
    if name == "resnet":
        inputs = keras.Input(shape=(28, 28, 1))
        x = keras.layers.Conv2D(16, 3, padding="same", use_bias=False)(inputs)
        x = keras.layers.BatchNormalization()(x)
        x = keras.layers.ReLU()(x)
        for filters, stride in ((16, 1), (32, 2), (32, 1)):
            shortcut = x
            y = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
            y = keras.layers.BatchNormalization()(y)
            y = keras.layers.ReLU()(y)
            y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
            y = keras.layers.BatchNormalization()(y)
            if stride != 1 or shortcut.shape[-1] != filters:
                shortcut = keras.layers.Conv2D(filters, 1, strides=stride, use_bias=False)(x)
            x = keras.layers.ReLU()(keras.layers.Add()([y, shortcut]))
        x = keras.layers.GlobalAveragePooling2D()(x)
        return keras.Model(inputs, keras.layers.Dense(10)(x))
    raise ValueError(f"unknown model {name!r}; expected cnn, mlp or resnet")
