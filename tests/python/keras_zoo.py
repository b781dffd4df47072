"""The Keras model zoo of the breadth tests: one small model per family of layers a user trains
(recurrent, text, attention, 3-D convolution, grouped/separable/transposed convolution, every
activation, group normalization, augmentation layers, a U-Net, 1-D and 3-D resampling, the
attention and merge layers, masking, ConvLSTM, a model with one output per loss of ten, mixed
precision), the optimizers Keras offers, and a trainer
that runs a few steps from given weights on one device. Used by test_keras_zoo.py in-process
and, for the placement check, in a child process (`python keras_zoo.py placement`)."""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Callable

import numpy as np

VOCAB = 24
SEQ = 7
BATCH = 8
SAMPLES = 24  # three steps per epoch


@dataclass(frozen=True)
class ZooModel:
    name: str
    build: Callable[[], object]
    data: Callable[[], tuple[np.ndarray, np.ndarray]]
    policy: str = "float32"  # the Keras dtype policy it trains under
    # The loss (a Keras loss, or a list for a model with several outputs); None: sparse
    # categorical cross-entropy on logits.
    loss: Callable[[], object] | None = None


def _labels(rng, classes=3):
    return rng.integers(0, classes, size=SAMPLES).astype("int32")


def _sequences():
    rng = np.random.default_rng(1)
    return rng.normal(size=(SAMPLES, SEQ, 4)).astype("float32"), _labels(rng)


def _tokens():
    """Right-padded token sequences (0 = padding), as masking layers expect."""
    rng = np.random.default_rng(2)
    x = rng.integers(1, VOCAB, size=(SAMPLES, SEQ)).astype("int32")
    lengths = rng.integers(2, SEQ + 1, size=SAMPLES)
    for row, length in enumerate(lengths):
        x[row, length:] = 0
    return x, _labels(rng)


def _images(shape):
    def data():
        rng = np.random.default_rng(3)
        return rng.uniform(0, 1, size=(SAMPLES, *shape)).astype("float32"), _labels(rng)

    return data


def _vectors():
    rng = np.random.default_rng(4)
    return rng.normal(size=(SAMPLES, 6)).astype("float32"), _labels(rng)


def _padded_sequences():
    """Sequences whose last steps are zeros (a Masking layer skips them), lengths 2 to SEQ."""
    x, y = _sequences()
    lengths = np.random.default_rng(5).integers(2, SEQ + 1, size=SAMPLES)
    for row, length in enumerate(lengths):
        x[row, length:] = 0.0
    return x, y


def _lstm():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((SEQ, 4)), layers.LSTM(8), layers.Dense(3)])


def _gru():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((SEQ, 4)), layers.GRU(8, return_sequences=True),
                             layers.GRU(6), layers.Dense(3)])


def _bidirectional_lstm_masked():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((SEQ,), dtype="int32"),
                             layers.Embedding(VOCAB, 6, mask_zero=True),
                             layers.Bidirectional(layers.LSTM(5)), layers.Dense(3)])


def _simple_rnn():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((SEQ, 4)), layers.SimpleRNN(8), layers.Dense(3)])


def _conv1d_text():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((SEQ,), dtype="int32"), layers.Embedding(VOCAB, 8),
                             layers.Conv1D(8, 3, activation="relu"),
                             layers.GlobalMaxPooling1D(), layers.Dense(3)])


def _transformer_block():
    import keras
    from keras import layers

    tokens = keras.Input((SEQ,), dtype="int32")
    x = layers.Embedding(VOCAB, 8)(tokens)
    # No attention biases: the key bias gets a zero gradient (softmax ignores a constant shift),
    # so adaptive optimizers would move it by rounding noise alone, on either device.
    x = layers.LayerNormalization()(x + layers.MultiHeadAttention(2, 4, use_bias=False)(x, x))
    y = layers.Dense(8)(layers.Dense(16, activation="gelu")(x))
    x = layers.LayerNormalization()(x + y)
    logits = layers.Dense(3)(layers.GlobalAveragePooling1D()(x))
    return keras.Model(tokens, logits)


def _conv3d():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((6, 6, 6, 2)),
                             layers.Conv3D(4, 3, padding="same", activation="relu"),
                             layers.MaxPool3D(2), layers.AveragePooling3D(2, padding="same"),
                             layers.Flatten(), layers.Dense(3)])


def _grouped_conv2d():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((8, 8, 4)),
                             layers.Conv2D(8, 3, groups=2, activation="relu"),
                             layers.Conv2D(4, 3, groups=4), layers.Flatten(), layers.Dense(3)])


def _every_activation():
    """One Dense branch per activation Keras offers (keras.activations' ALL_OBJECTS; GELU exact
    and approximate; threshold with arguments), each reduced to one feature (glu halves its
    width, which Keras' shape inference does not know) as the sum of its units plus its first
    unit (softmax's units alone always sum to 1), then a Dense head."""
    import keras
    from keras import layers
    from keras.src.activations import ALL_OBJECTS

    functions = []
    for fn in sorted(ALL_OBJECTS, key=lambda f: f.__name__):
        if fn.__name__ == "gelu":
            functions += [lambda t: keras.activations.gelu(t, approximate=False),
                          lambda t: keras.activations.gelu(t, approximate=True)]
        elif fn.__name__ == "threshold":
            functions.append(lambda t: keras.activations.threshold(t, 0.1, -0.5))
        else:
            functions.append(fn)
    inputs = keras.Input((6,))
    branches = []
    for fn in functions:
        hidden = layers.Dense(4, activation=fn)(inputs)
        branches.append(keras.ops.sum(hidden, axis=-1, keepdims=True) + hidden[:, :1])
    return keras.Model(inputs, layers.Dense(3)(layers.Concatenate()(branches)))


def _group_normalization():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((8, 8, 4)), layers.Conv2D(8, 3),
                             layers.GroupNormalization(4), layers.Flatten(), layers.Dense(3)])


def _separable_depthwise():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((8, 8, 3)),
                             layers.SeparableConv2D(6, 3, activation="relu"),
                             layers.DepthwiseConv2D(3, depth_multiplier=2), layers.Flatten(),
                             layers.Dense(3)])


def _transpose_upsampling():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((6, 6, 3)),
                             layers.Conv2DTranspose(4, 3, strides=2, padding="same"),
                             layers.UpSampling2D(2), layers.Conv2D(2, 3, strides=2),
                             layers.Flatten(), layers.Dense(3)])


def _augmentation():
    """Keras' random augmentation layers inside the model (active in fit): flips, rotation,
    zoom, translation and shear are ImageProjectiveTransformV3, contrast and brightness plain
    arithmetic."""
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((12, 12, 3)),
                             layers.RandomFlip("horizontal", seed=1),
                             layers.RandomRotation(0.1, seed=2),
                             layers.RandomZoom(0.1, seed=3),
                             layers.RandomTranslation(0.1, 0.1, fill_mode="reflect", seed=4),
                             layers.RandomContrast(0.2, seed=5),
                             layers.RandomBrightness(0.1, value_range=(0, 1), seed=6),
                             layers.Conv2D(6, 3, activation="relu"),
                             layers.GlobalAveragePooling2D(), layers.Dense(3)])


def _color_and_crop_preprocessing():
    """The other Keras preprocessing layers TensorFlow runs on a GPU: colour (RandomHue,
    RandomSaturation, RandomColorJitter: RGBToHSV / HSVToRGB), RandomShear (a projective
    transform), RandomCrop and CenterCrop (slices and a bilinear resize), Rescaling and
    Normalization."""
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((14, 14, 3)),
                             layers.Rescaling(1.0 / 1.0),
                             layers.RandomHue(0.2, value_range=(0, 1), seed=7),
                             layers.RandomSaturation(0.3, value_range=(0, 1), seed=8),
                             layers.RandomColorJitter(value_range=(0, 1), brightness_factor=0.1,
                                                      contrast_factor=0.1, seed=9),
                             layers.RandomShear(0.1, 0.1, seed=10),
                             layers.RandomCrop(12, 12, seed=11), layers.CenterCrop(10, 10),
                             layers.Normalization(mean=0.5, variance=0.25),
                             layers.Conv2D(4, 3, activation="relu"),
                             layers.GlobalAveragePooling2D(), layers.Dense(3)])


def _unet():
    """A small U-Net: down with pooling, up with bilinear UpSampling2D, a skip connection
    concatenated, and a Resizing layer (ResizeBilinear forward and backward)."""
    import keras
    from keras import layers

    inputs = keras.Input((12, 12, 3))
    down = layers.Conv2D(6, 3, padding="same", activation="relu")(inputs)
    bottom = layers.Conv2D(8, 3, padding="same", activation="relu")(layers.MaxPooling2D()(down))
    up = layers.UpSampling2D(2, interpolation="bilinear")(bottom)
    merged = layers.Concatenate()([down, up])
    features = layers.Conv2D(4, 3, padding="same", activation="relu")(merged)
    resized = layers.Resizing(8, 8, interpolation="bilinear")(features)
    outputs = layers.Dense(3)(layers.GlobalAveragePooling2D()(resized))
    return keras.Model(inputs, outputs)


def _resampling_1d():
    """Conv1DTranspose and every 1-D resampling layer: padding, cropping, up-sampling, average
    and max pooling, global max pooling."""
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((SEQ, 4)), layers.Conv1DTranspose(4, 3, strides=2),
                             layers.ZeroPadding1D(1), layers.Cropping1D((1, 2)),
                             layers.UpSampling1D(2), layers.AveragePooling1D(2),
                             layers.MaxPooling1D(2, padding="same"),
                             layers.GlobalMaxPooling1D(), layers.Dense(3)])


def _resampling_3d():
    """The 3-D resampling layers around a Conv3D: padding, up-sampling, cropping, average
    pooling, global max pooling."""
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((4, 4, 4, 2)), layers.ZeroPadding3D(1),
                             layers.Conv3D(3, 3, activation="relu"), layers.UpSampling3D(2),
                             layers.Cropping3D(1), layers.AveragePooling3D(2),
                             layers.GlobalMaxPooling3D(), layers.Dense(3)])


def _attention_layers():
    """Dot-product (scaled) and additive attention of a sequence over itself, after a
    TimeDistributed Dense, and a Permute."""
    import keras
    from keras import layers

    inputs = keras.Input((SEQ, 4))
    steps = layers.TimeDistributed(layers.Dense(6, activation="tanh"))(inputs)
    dot = layers.Attention(use_scale=True)([steps, steps])
    additive = layers.AdditiveAttention()([steps, steps])
    merged = layers.Permute((2, 1))(layers.Concatenate()([dot, additive]))
    return keras.Model(inputs, layers.Dense(3)(layers.Flatten()(merged)))


def _merges_and_parametric_activations():
    """Parametric and leaky activations as layers (PReLU, LeakyReLU, ELU), Keras' merge layers
    (Multiply, Subtract, Maximum, Minimum, Average, a normalised Dot) and UnitNormalization."""
    import keras
    from keras import layers

    inputs = keras.Input((6,))
    a = layers.PReLU()(layers.Dense(8)(inputs))
    b = layers.LeakyReLU(negative_slope=0.1)(layers.Dense(8)(inputs))
    c = layers.ELU()(layers.Dense(8)(inputs))
    merged = layers.Concatenate()([
        layers.Multiply()([a, b]), layers.Subtract()([a, c]), layers.Maximum()([a, b]),
        layers.Minimum()([b, c]), layers.Average()([a, b, c]),
        layers.Dot(axes=1, normalize=True)([a, c])])
    return keras.Model(inputs, layers.Dense(3)(layers.UnitNormalization()(merged)))


def _masked_lstm():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((SEQ, 4)), layers.Masking(0.0), layers.LSTM(5),
                             layers.Dense(3)])


def _conv_lstm():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((4, 6, 2)), layers.ConvLSTM1D(3, 3),
                             layers.Flatten(), layers.Dense(3)])


_LOSS_HEADS = (  # (output units, activation, loss factory name)
    (2, None, "huber"), (2, None, "log_cosh"), (2, "softplus", "poisson"),
    (2, None, "cosine_similarity"), (2, "softplus", "msle"), (1, None, "hinge"),
    (1, None, "binary_focal"), (3, None, "categorical_smoothed"), (3, "softmax", "kl_divergence"),
    (3, None, "categorical_hinge"))


def _loss_heads():
    """One output per loss of _LOSS_HEADS on a shared Dense trunk."""
    import keras
    from keras import layers

    inputs = keras.Input((6,))
    trunk = layers.Dense(8, activation="tanh")(inputs)
    return keras.Model(inputs, [layers.Dense(units, activation=activation)(trunk)
                                for units, activation, _ in _LOSS_HEADS])


def _loss_targets():
    """Vectors and one target per output of _loss_heads: real pairs, positive pairs for the
    Poisson and logarithmic losses, {-1, 1} for the hinge, {0, 1} for the focal loss, one-hot
    classes for the categorical ones."""
    rng = np.random.default_rng(6)
    x = rng.normal(size=(SAMPLES, 6)).astype("float32")
    real = rng.normal(size=(SAMPLES, 2)).astype("float32")
    positive = np.abs(real) + 0.1
    binary = rng.integers(0, 2, size=(SAMPLES, 1)).astype("float32")
    one_hot = np.eye(3, dtype="float32")[rng.integers(0, 3, size=SAMPLES)]
    by_kind = {"huber": real, "log_cosh": real, "poisson": positive, "cosine_similarity": real,
               "msle": positive, "hinge": 2 * binary - 1, "binary_focal": binary,
               "categorical_smoothed": one_hot, "kl_divergence": one_hot,
               "categorical_hinge": one_hot}
    return x, [by_kind[kind] for _, _, kind in _LOSS_HEADS]


def _losses():
    import keras

    losses = keras.losses
    factories = {
        "huber": lambda: losses.Huber(delta=0.5), "log_cosh": losses.LogCosh,
        "poisson": losses.Poisson, "cosine_similarity": losses.CosineSimilarity,
        "msle": losses.MeanSquaredLogarithmicError, "hinge": losses.Hinge,
        "binary_focal": lambda: losses.BinaryFocalCrossentropy(from_logits=True),
        "categorical_smoothed": lambda: losses.CategoricalCrossentropy(from_logits=True,
                                                                       label_smoothing=0.1),
        "kl_divergence": losses.KLDivergence, "categorical_hinge": losses.CategoricalHinge}
    return [factories[kind]() for _, _, kind in _LOSS_HEADS]


def _cnn():
    import keras
    from keras import layers

    return keras.Sequential([keras.Input((12, 12, 3)),
                             layers.Conv2D(8, 3, padding="same", activation="relu"),
                             layers.BatchNormalization(), layers.MaxPooling2D(),
                             layers.Conv2D(8, 3, activation="relu"), layers.Flatten(),
                             layers.Dropout(0.3), layers.Dense(3)])


MODELS = {m.name: m for m in [
    ZooModel("lstm", _lstm, _sequences),
    ZooModel("gru", _gru, _sequences),
    ZooModel("bidirectional_lstm_masked", _bidirectional_lstm_masked, _tokens),
    ZooModel("simple_rnn", _simple_rnn, _sequences),
    ZooModel("conv1d_text", _conv1d_text, _tokens),
    ZooModel("transformer_block", _transformer_block, _tokens),
    ZooModel("conv3d_pool3d", _conv3d, _images((6, 6, 6, 2))),
    ZooModel("grouped_conv2d", _grouped_conv2d, _images((8, 8, 4))),
    ZooModel("every_activation", _every_activation, _vectors),
    ZooModel("group_normalization", _group_normalization, _images((8, 8, 4))),
    ZooModel("separable_depthwise", _separable_depthwise, _images((8, 8, 3))),
    ZooModel("transpose_upsampling", _transpose_upsampling, _images((6, 6, 3))),
    ZooModel("augmentation", _augmentation, _images((12, 12, 3))),
    ZooModel("unet", _unet, _images((12, 12, 3))),
    ZooModel("color_and_crop_preprocessing", _color_and_crop_preprocessing,
             _images((14, 14, 3))),
    ZooModel("resampling_1d", _resampling_1d, _sequences),
    ZooModel("resampling_3d", _resampling_3d, _images((4, 4, 4, 2))),
    ZooModel("attention_layers", _attention_layers, _sequences),
    ZooModel("merges_and_parametric_activations", _merges_and_parametric_activations, _vectors),
    ZooModel("masked_lstm", _masked_lstm, _padded_sequences),
    ZooModel("conv_lstm", _conv_lstm, _images((4, 6, 2))),
    ZooModel("loss_functions", _loss_heads, _loss_targets, loss=_losses),
    ZooModel("cnn_mixed_float16", _cnn, _images((12, 12, 3)), policy="mixed_float16"),
    ZooModel("lstm_mixed_float16", _lstm, _sequences, policy="mixed_float16"),
    ZooModel("transformer_mixed_float16", _transformer_block, _tokens, policy="mixed_float16"),
]}


def optimizer(name: str):
    import keras

    factories = {
        "sgd_momentum": lambda: keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True),
        "adam": lambda: keras.optimizers.Adam(0.01),
        "adamw": lambda: keras.optimizers.AdamW(0.01, weight_decay=0.05),
        "rmsprop": lambda: keras.optimizers.RMSprop(0.01, momentum=0.5, centered=True),
        "adagrad": lambda: keras.optimizers.Adagrad(0.05),
        "nadam": lambda: keras.optimizers.Nadam(0.01),
        "adamax": lambda: keras.optimizers.Adamax(0.01),
        "lion": lambda: keras.optimizers.Lion(0.003),
    }
    return factories[name]()


OPTIMIZERS = ["sgd_momentum", "adam", "adamw", "rmsprop", "adagrad", "nadam", "adamax", "lion"]


def initial_weights(model: ZooModel):
    """The weights every device starts from (built once on the CPU, seeded)."""
    import keras
    import tensorflow as tf

    with _policy(model.policy), tf.device("/CPU:0"):
        keras.utils.set_random_seed(11)
        return model.build().get_weights()


class _policy:
    """Sets the global Keras dtype policy for a block (mixed precision is process-wide)."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        import keras

        self.previous = keras.mixed_precision.global_policy().name
        keras.mixed_precision.set_global_policy(self.name)

    def __exit__(self, *exc):
        import keras

        keras.mixed_precision.set_global_policy(self.previous)


def _loss(model: ZooModel):
    import keras

    if model.loss is not None:
        return model.loss()
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def train(model: ZooModel, optimizer_name: str, device: str, weights, epochs: int = 1):
    """Trains `model` from `weights` on `device` (steps of BATCH samples, no shuffling, no XLA)
    and returns (losses per epoch, final weights as numpy arrays)."""
    import keras
    import tensorflow as tf

    x, y = model.data()
    with _policy(model.policy), tf.device(device):
        keras.utils.set_random_seed(5)
        net = model.build()
        net.set_weights(weights)
        net.compile(optimizer=optimizer(optimizer_name), jit_compile=False, loss=_loss(model))
        history = net.fit(x, y, batch_size=BATCH, epochs=epochs, shuffle=False, verbose=0)
        return history.history["loss"], [np.asarray(w) for w in net.get_weights()]


def placement_main(names: list[str], optimizer_name: str) -> None:
    """Child-process entry: trains each model on GPU:0 with TensorFlow's placement log on,
    writing '@@zoo-model NAME' to stderr before each, and printing one JSON line after each
    (losses, and the dtypes of the nodes of the functions it traced)."""
    import tensorflow as tf

    import placement

    tf.debugging.set_log_device_placement(True)
    seen_functions = set()
    for name in names:
        model = MODELS[name]
        sys.stderr.write(f"@@zoo-model {name}\n")
        sys.stderr.flush()
        losses, _ = train(model, optimizer_name, "/GPU:0", initial_weights(model))
        sys.stderr.flush()
        print(json.dumps({"model": name, "losses": losses,
                          "node_dtypes": placement.traced_node_dtypes(seen_functions)}),
              flush=True)
    sys.stderr.write("@@zoo-end\n")
    sys.stderr.flush()


def descriptor_main(name: str) -> None:
    """Child-process entry: trains `name` on GPU:0 for two epochs and prints one JSON line with
    the descriptor calls forwarded to the executor and answered locally in each step."""
    import keras
    import tensorflow as tf
    import training_probe

    model = MODELS[name]
    x, y = model.data()
    callback = training_probe.per_step_counters(
        ("descriptor_calls_forwarded", "descriptor_calls_local", "launches"))
    with tf.device("/GPU:0"):
        keras.utils.set_random_seed(5)
        net = model.build()
        net.compile(optimizer="adam", jit_compile=False, loss=_loss(model))
        net.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                callbacks=[callback])
    print("ZOO " + json.dumps({"steps": callback.steps}), flush=True)


if __name__ == "__main__":
    # python keras_zoo.py placement OPTIMIZER MODEL[,MODEL...] | descriptors MODEL
    if sys.argv[1] == "placement":
        placement_main(sys.argv[3].split(","), sys.argv[2])
    else:
        descriptor_main(sys.argv[2])
