"""The models and data the benchmarks train: the four bench models on MNIST-shaped images
generated locally, and the small models of the speed zoo (zoo.py)."""
from __future__ import annotations

import numpy as np

from vgpu.bench import zoo

MODELS = ("cnn", "mlp", "resnet", "mobilenetv2")
ALL_MODELS = MODELS + zoo.NAMES  # what the worker trains by name


def input_shape(name: str) -> tuple[int, ...]:
    """The shape of one example of model `name`: MNIST-shaped for the bench models except
    MobileNetV2 (96x96 RGB); a zoo model's own."""
    if name in zoo.ZOO:
        return zoo.ZOO[name].input_shape
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


def make_model_data(name: str, samples: int, seed: int = 0):
    """(inputs, int32 labels in [0, 10)) for `samples` examples of model `name`: images of its
    input shape (make_data), or for a zoo model that reads tokens, int32 ids in [1, vocabulary)
    whose first id follows the label (so that the loss can fall)."""
    vocabulary = zoo.ZOO[name].vocabulary if name in zoo.ZOO else 0
    if not vocabulary:
        return make_data(samples, seed, input_shape(name))
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 10, size=samples)
    tokens = rng.integers(1, vocabulary, size=(samples, *input_shape(name)))
    tokens[:, 0] = 1 + labels
    return tokens.astype("int32"), labels.astype("int32")


def build(name: str):
    """A Keras model by name: "cnn", "mlp", "resnet" (a small residual network),
    "mobilenetv2" (keras.applications.MobileNetV2 at 96x96, weights=None, 10 classes) or a zoo
    model (zoo.NAMES)."""
    import keras

    if name in zoo.ZOO:
        return zoo.build(name)
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
    raise ValueError(f"unknown model {name!r}; expected one of {', '.join(ALL_MODELS)}")
