"""The models and data the benchmarks train: MNIST-shaped images generated locally."""
from __future__ import annotations

import numpy as np


MODELS = ("cnn", "mlp", "resnet", "mobilenetv2")


def input_shape(name: str) -> tuple[int, int, int]:
    """The image shape model `name` takes: MNIST-shaped, except MobileNetV2 (96x96 RGB)."""
    return (96, 96, 3) if name == "mobilenetv2" else (28, 28, 1)


def make_data(samples: int, seed: int = 0, shape: tuple[int, int, int] = (28, 28, 1)):
    """Images (samples, *shape) in [0, 1] and int32 labels in [0, 10): class templates plus
    noise, so that the loss really falls."""
    rng = np.random.default_rng(seed)
    templates = rng.uniform(0.0, 1.0, size=(10, *shape)).astype("float32")
    labels = rng.integers(0, 10, size=samples)
    noise = rng.normal(0.0, 0.35, size=(samples, *shape)).astype("float32")
    images = np.clip(templates[labels] + noise, 0.0, 1.0).astype("float32")
    return images, labels.astype("int32")


def build(name: str):
    """A Keras model by name: "cnn", "mlp", "resnet" (a small residual network) or
    "mobilenetv2" (keras.applications.MobileNetV2 at 96x96, weights=None, 10 classes)."""
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
    if name == "mobilenetv2":
        return keras.applications.MobileNetV2(input_shape=input_shape(name), weights=None,
                                              classes=10, classifier_activation=None)
    raise ValueError(f"unknown model {name!r}; expected one of {', '.join(MODELS)}")
