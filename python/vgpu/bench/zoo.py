"""The speed zoo of ``vgpu bench --zoo``: small Keras models of one or two layer families each,
the size of what users train on a laptop's CPU (batch 64, a few thousand to a few hundred
thousand weights). The four bench models (models.py) were tuned for; these were not, so they show
where the virtual GPU is still behind TensorFlow-CPU. Each model ends in 10 logits and trains on
the data of models.make_model_data (images of its input shape, or token ids)."""
from __future__ import annotations

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class ZooModel:
    """One zoo model: what it exercises, its input (one example's shape; `vocabulary` > 0 means
    int32 token ids below it), and how to build it (keras is imported by the caller)."""

    layers: str
    input_shape: tuple[int, ...]
    build: Callable[[object, object], object]  # (keras, keras.layers) -> keras.Model
    vocabulary: int = 0


def _sequential(keras, input_shape, *layers):
    return keras.Sequential([keras.Input(input_shape), *layers])


def _attention(keras, layers):
    inputs = keras.Input((16, 32))
    x = layers.MultiHeadAttention(num_heads=4, key_dim=8)(inputs, inputs)
    x = layers.GlobalAveragePooling1D()(x)
    return keras.Model(inputs, layers.Dense(10)(x))


ZOO: dict[str, ZooModel] = {
    "conv1d": ZooModel(
        "Conv1D, MaxPooling1D, GlobalAveragePooling1D", (128, 16),
        lambda k, L: _sequential(k, (128, 16), L.Conv1D(32, 5, activation="relu"),
                                 L.MaxPooling1D(), L.Conv1D(32, 3),
                                 L.GlobalAveragePooling1D(), L.Dense(10))),
    "conv2d_transpose": ZooModel(
        "Conv2DTranspose (stride 2), Conv2D", (16, 16, 8),
        lambda k, L: _sequential(k, (16, 16, 8),
                                 L.Conv2DTranspose(16, 3, strides=2, padding="same"),
                                 L.Conv2D(8, 3), L.Flatten(), L.Dense(10))),
    "separable_conv": ZooModel(
        "SeparableConv2D", (32, 32, 16),
        lambda k, L: _sequential(k, (32, 32, 16), L.SeparableConv2D(32, 3, activation="relu"),
                                 L.Flatten(), L.Dense(10))),
    "depthwise_conv": ZooModel(
        "DepthwiseConv2D, GlobalAveragePooling2D", (32, 32, 32),
        lambda k, L: _sequential(k, (32, 32, 32), L.DepthwiseConv2D(3, activation="relu"),
                                 L.GlobalAveragePooling2D(), L.Dense(10))),
    "lstm": ZooModel(
        "LSTM (20 steps)", (20, 16),
        lambda k, L: _sequential(k, (20, 16), L.LSTM(32), L.Dense(10))),
    "gru": ZooModel(
        "GRU (20 steps)", (20, 16),
        lambda k, L: _sequential(k, (20, 16), L.GRU(32), L.Dense(10))),
    "embedding": ZooModel(
        "Embedding, GlobalAveragePooling1D", (20,),
        lambda k, L: _sequential(k, (20,), L.Embedding(1000, 32), L.GlobalAveragePooling1D(),
                                 L.Dense(10)),
        vocabulary=1000),
    "layer_norm": ZooModel(
        "Dense, LayerNormalization", (64,),
        lambda k, L: _sequential(k, (64,), L.Dense(256), L.LayerNormalization(), L.Dense(10))),
    "attention": ZooModel("MultiHeadAttention (4 heads), GlobalAveragePooling1D", (16, 32),
                          _attention),
    "batch_norm": ZooModel(
        "Conv2D, BatchNormalization, ReLU", (16, 16, 16),
        lambda k, L: _sequential(k, (16, 16, 16), L.Conv2D(32, 3, use_bias=False),
                                 L.BatchNormalization(), L.ReLU(), L.Flatten(), L.Dense(10))),
    "average_pooling": ZooModel(
        "AveragePooling2D, Conv2D, GlobalMaxPooling2D", (32, 32, 16),
        lambda k, L: _sequential(k, (32, 32, 16), L.AveragePooling2D(2), L.Conv2D(16, 3),
                                 L.GlobalMaxPooling2D(), L.Dense(10))),
    "upsampling": ZooModel(
        "UpSampling2D, Conv2D", (16, 16, 8),
        lambda k, L: _sequential(k, (16, 16, 8), L.UpSampling2D(), L.Conv2D(8, 3), L.Flatten(),
                                 L.Dense(10))),
    "conv3d": ZooModel(
        "Conv3D", (8, 16, 16, 4),
        lambda k, L: _sequential(k, (8, 16, 16, 4), L.Conv3D(8, 3, activation="relu"),
                                 L.Flatten(), L.Dense(10))),
    "resizing": ZooModel(
        "Resizing (bilinear, 2x), Conv2D", (16, 16, 3),
        lambda k, L: _sequential(k, (16, 16, 3), L.Resizing(32, 32), L.Conv2D(8, 3),
                                 L.Flatten(), L.Dense(10))),
    "one_channel_conv": ZooModel(
        "Conv2D with one input or output channel", (28, 28, 1),
        lambda k, L: _sequential(k, (28, 28, 1), L.Conv2D(8, 3), L.Conv2D(1, 3, padding="same"),
                                 L.Conv2D(8, 3), L.Flatten(), L.Dense(10))),
    "dense_gelu_swish": ZooModel(
        "Dense (gelu, swish), Dropout", (512,),
        lambda k, L: _sequential(k, (512,), L.Dense(512, activation="gelu"), L.Dropout(0.3),
                                 L.Dense(512, activation="swish"), L.Dense(10))),
    "gelu": ZooModel(
        "Activation('gelu') on an image-sized tensor", (16, 16, 32),
        lambda k, L: _sequential(k, (16, 16, 32), L.Activation("gelu"), L.Flatten(),
                                 L.Dense(10))),
    "selu": ZooModel(
        "Activation('selu') on an image-sized tensor", (16, 16, 32),
        lambda k, L: _sequential(k, (16, 16, 32), L.Activation("selu"), L.Flatten(),
                                 L.Dense(10))),
    "zero_padding_elu": ZooModel(
        "ZeroPadding2D, Conv2D (elu), BatchNormalization", (16, 16, 8),
        lambda k, L: _sequential(k, (16, 16, 8), L.ZeroPadding2D(2),
                                 L.Conv2D(16, 3, activation="elu"), L.BatchNormalization(),
                                 L.Flatten(), L.Dense(10))),
}

NAMES = tuple(ZOO)


def build(name: str):
    """The zoo model `name`, freshly built (keras' global seed decides its weights)."""
    import keras  # noqa: PLC0415 - keras only in the worker that trains it

    return ZOO[name].build(keras, keras.layers)
