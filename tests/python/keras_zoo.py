"""The Keras model zoo of the breadth tests: one small model per family of layers a user trains
(recurrent, text, attention, 3-D convolution, grouped/separable/transposed convolution, every
activation, group normalization, augmentation layers, a U-Net, mixed precision), the optimizers Keras offers, and a trainer
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
        net.compile(optimizer=optimizer(optimizer_name), jit_compile=False,
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
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
        net.compile(optimizer="adam", jit_compile=False,
                    loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        net.fit(x, y, batch_size=BATCH, epochs=2, shuffle=False, verbose=0,
                callbacks=[callback])
    print("ZOO " + json.dumps({"steps": callback.steps}), flush=True)


if __name__ == "__main__":
    # python keras_zoo.py placement OPTIMIZER MODEL[,MODEL...] | descriptors MODEL
    if sys.argv[1] == "placement":
        placement_main(sys.argv[3].split(","), sys.argv[2])
    else:
        descriptor_main(sys.argv[2])
