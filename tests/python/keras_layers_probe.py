"""A child-process probe for test_keras_conv_layers.py: trains one tiny Keras model per layer of
the convolution family (Conv1D, grouped Conv2D, Conv3D, Conv2DTranspose, Conv3DTranspose,
SeparableConv2D, DepthwiseConv2D, MultiHeadAttention) for two steps and saves the losses and
weights to an .npz file: main("cpu" | "gpu", OUT.npz[, INITIAL.npz]), or run as
    python keras_layers_probe.py cpu|gpu OUT.npz [INITIAL.npz]
"cpu" hides the virtual GPU (TensorFlow's CPU kernels, and XLA where Keras asks for it); "gpu"
trains on GPU:0 and, when INITIAL.npz is given, starts from the weights saved there (run under
placement.run_child, TensorFlow logs where each op of the train step was placed)."""
import sys

import numpy as np


def build_models(keras):
    layers = keras.layers

    def sequential(shape, *body):
        return keras.Sequential([keras.Input(shape), *body, layers.Flatten(), layers.Dense(5)])

    inputs = keras.Input((6, 8))
    attention = layers.MultiHeadAttention(num_heads=2, key_dim=4)(inputs, inputs)
    mha = keras.Model(inputs, layers.Dense(5)(layers.Flatten()(attention)))
    return {
        "conv1d": sequential((16, 3), layers.Conv1D(4, 3, padding="same", activation="relu")),
        "conv2d_groups": sequential((8, 8, 4), layers.Conv2D(6, 3, groups=2, activation="relu")),
        "conv3d": sequential((6, 6, 6, 2), layers.Conv3D(3, 3, strides=(1, 2, 1),
                                                         padding="same", activation="relu")),
        "conv2d_transpose": sequential((6, 6, 3), layers.Conv2DTranspose(4, 3, strides=2,
                                                                         padding="same")),
        "conv3d_transpose": sequential((4, 4, 4, 2), layers.Conv3DTranspose(3, 3, strides=2,
                                                                            padding="same")),
        "separable_conv2d": sequential((8, 8, 3), layers.SeparableConv2D(4, 3,
                                                                         depth_multiplier=2)),
        "depthwise_conv2d": sequential((8, 8, 3), layers.DepthwiseConv2D(3, depth_multiplier=2)),
        "multi_head_attention": mha,
    }


def main(device, out_path, initial_path=None):
    import tensorflow as tf

    if device == "cpu":
        tf.config.set_visible_devices([], "GPU")
    import keras

    keras.utils.set_random_seed(3)
    models = build_models(keras)
    initial = np.load(initial_path) if initial_path else None
    results = {}
    rng = np.random.default_rng(4)
    for name, model in models.items():
        if initial is not None:
            count = sum(1 for key in initial.files if key.startswith(f"{name}/initial/"))
            model.set_weights([initial[f"{name}/initial/{i}"] for i in range(count)])
        for i, w in enumerate(model.get_weights()):
            results[f"{name}/initial/{i}"] = w
        x = rng.uniform(-1, 1, (16,) + tuple(model.input_shape[1:])).astype("float32")
        y = rng.integers(0, 5, 16).astype("int32")
        with tf.device("/GPU:0" if device == "gpu" else "/CPU:0"):
            model.compile(optimizer=keras.optimizers.SGD(0.1), jit_compile=False,
                          loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
            history = model.fit(x, y, epochs=2, batch_size=16, verbose=0, shuffle=False)
        results[f"{name}/losses"] = np.array(history.history["loss"])
        for i, w in enumerate(model.get_weights()):
            results[f"{name}/trained/{i}"] = w
    np.savez(out_path, **results)


if __name__ == "__main__":
    main(*sys.argv[1:])
