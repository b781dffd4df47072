"""OptionalHasValue on the virtual GPU: the answer TensorFlow's CPU gives, made on the device
by the plugin's kernel (one memset, nothing copied up), for the Optionals Keras' `fit` asks
about each step, for empty ones (the end of a dataset), inside functions, and an error for a
variant that is not an Optional."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu


def commands():
    return dict(vgpu.stats()["commands"])


def optional_of_device_values(device):
    """An Optional made by a function on `device` of values computed there, as Keras' train
    function returns its logs."""
    @tf.function
    def make(x):
        return tf.experimental.Optional.from_value({"loss": tf.reduce_mean(x * x),
                                                    "sum": tf.reduce_sum(x)})

    with tf.device(device):
        return make(tf.constant(np.arange(6, dtype=np.float32).reshape(2, 3)))


def empty_optional(device):
    with tf.device(device):
        return tf.experimental.Optional.empty(tf.TensorSpec([], tf.float32))


@pytest.mark.parametrize("make, expected", [(optional_of_device_values, True),
                                            (empty_optional, False)])
def test_has_value_is_the_cpus_answer_made_on_the_device_without_a_copy_up(make, expected):
    on_cpu = make("/CPU:0").has_value()
    optional = make("/GPU:0")
    optional.has_value()  # the one-op function's first call builds it
    before = commands()
    has_value = optional.has_value()
    after = commands()
    assert has_value.device.endswith("GPU:0")
    assert bool(has_value) == bool(on_cpu) == expected
    assert has_value.dtype == tf.bool and has_value.shape == ()
    # The plugin's kernel: one memset on the device; TensorFlow's own GPU kernel would make the
    # bool in host memory and copy it up for the function's result.
    assert after.get("memset", 0) - before.get("memset", 0) == 1
    assert after.get("memcpy_htod", 0) == before.get("memcpy_htod", 0)


def test_has_value_inside_a_function_on_the_device_decides_a_cond():
    @tf.function
    def value_or_minus_one(optional):
        return tf.cond(optional.has_value(), lambda: optional.get_value()["loss"],
                       lambda: tf.constant(-1.0))

    @tf.function
    def empty_or_minus_one(optional):
        return tf.cond(optional.has_value(), lambda: optional.get_value(),
                       lambda: tf.constant(-1.0))

    with tf.device("/GPU:0"):
        full = value_or_minus_one(optional_of_device_values("/GPU:0"))
        empty = empty_or_minus_one(empty_optional("/GPU:0"))
    with tf.device("/CPU:0"):
        full_cpu = value_or_minus_one(optional_of_device_values("/CPU:0"))
    np.testing.assert_allclose(full.numpy(), full_cpu.numpy(), rtol=1e-6)
    assert float(empty) == -1.0


def test_has_value_of_a_variant_that_is_not_an_optional_is_an_invalid_argument():
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device):
            tensor_list = tf.raw_ops.EmptyTensorList(element_shape=tf.constant([], tf.int32),
                                                     max_num_elements=2,
                                                     element_dtype=tf.float32)
            with pytest.raises(tf.errors.InvalidArgumentError, match="OptionalVariant"):
                tf.raw_ops.OptionalHasValue(optional=tensor_list)


def test_fit_on_a_dataset_of_unknown_length_ends_each_epoch_when_the_data_ends():
    # Keras' `fit` learns that an epoch is over from has_value() turning False.
    import keras

    keras.utils.set_random_seed(3)
    rng = np.random.default_rng(3)
    x = rng.random((70, 4), dtype=np.float32)
    y = rng.random((70, 1), dtype=np.float32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).filter(lambda a, b: True).batch(16)
    assert dataset.cardinality() == tf.data.UNKNOWN_CARDINALITY

    class CountBatches(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.batches = 0

        def on_train_batch_end(self, batch, logs=None):
            self.batches += 1

    def train(device):
        keras.utils.set_random_seed(3)
        counter = CountBatches()
        with tf.device(device):
            model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
            model.compile(optimizer=keras.optimizers.SGD(0.05), loss="mse")
            history = model.fit(dataset, epochs=2, verbose=0, callbacks=[counter])
        return counter.batches, history.history["loss"], model.get_weights()

    batches, losses, weights = train("/GPU:0")
    batches_cpu, losses_cpu, weights_cpu = train("/CPU:0")
    assert batches == batches_cpu == 5  # 70 rows in batches of 16, each epoch
    np.testing.assert_allclose(losses, losses_cpu, rtol=1e-5)
    for w, w_cpu in zip(weights, weights_cpu):
        np.testing.assert_allclose(w, w_cpu, rtol=1e-5, atol=1e-6)
