"""The graph optimizer's Cast rewrite (docs/graph_fusions.md): a Cast on the virtual GPU whose
input is an int32 or int64 computed on the host (a shape's product, an element count, an int32
argument) becomes _VgpuCastFromHost, which reads its input from host memory instead of through
a host-to-device copy between the function's parts. Its results must be Cast's bit for bit, on
every destination type, for scalars and vectors; a Cast of an integer computed on the device is
left alone. The functions take inputs of unknown shape, as a Keras step's batch dimension
is: with static shapes Grappler folds such casts into constants. Below them: tensors made on the
host (a dataset's batches) get one copy in front of their device readers, and a Cast of one
reads it from the host."""
import keras
import numpy as np
import pytest
import tensorflow as tf

import vgpu


def casts_from_host():
    return vgpu.stats()["graph_fusions"]["cast_from_host"]


def run_on(device, function, *args):
    with tf.device(device):
        return [t.numpy() for t in tf.nest.flatten(function(*args))]


@pytest.mark.parametrize("destination", [tf.float32, tf.float16, tf.bfloat16, tf.float64,
                                         tf.int64, tf.uint8, tf.bool])
def test_a_cast_of_a_shape_product_is_rewritten_and_gives_casts_values(destination):
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def scaled(x):
        count = tf.reduce_prod(tf.shape(x))  # int32, computed on the host
        shape = tf.shape(x) * 3 - 7  # a vector with a negative entry
        return tf.cast(count, destination), tf.cast(shape, destination), x * tf.cast(count,
                                                                                     x.dtype)

    x = tf.constant(np.arange(-6, 18, dtype=np.float32).reshape(2, 3, 4))
    before = casts_from_host()
    on_gpu = run_on("/GPU:0", scaled, x)
    assert casts_from_host() >= before + 2  # the function's casts of host integers
    on_cpu = run_on("/CPU:0", scaled, x)
    for gpu_value, cpu_value in zip(on_gpu, on_cpu):
        assert gpu_value.dtype == cpu_value.dtype
        np.testing.assert_array_equal(gpu_value, cpu_value)


def test_int64_counts_and_int32_arguments_are_read_from_the_host():
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float64),
                                  tf.TensorSpec([], tf.int32)])
    def mean_like(x, n):
        size = tf.size(x, out_type=tf.int64)  # int64 on the host
        return tf.reduce_sum(x) / tf.cast(size, tf.float64), x * tf.cast(n, tf.float64)

    x = tf.constant(np.linspace(-3, 5, 35).reshape(5, 7))
    n = tf.constant(2**31 - 1, tf.int32)  # not exact in float32: the cast must be float64's
    before = casts_from_host()
    on_gpu = run_on("/GPU:0", mean_like, x, n)
    assert casts_from_host() >= before + 2
    on_cpu = run_on("/CPU:0", mean_like, x, n)
    for gpu_value, cpu_value in zip(on_gpu, on_cpu):
        np.testing.assert_array_equal(gpu_value, cpu_value)


def test_a_cast_of_an_integer_computed_on_the_device_is_left_alone():
    @tf.function(input_signature=[tf.TensorSpec([None, 9], tf.float32)])
    def positions(x):
        return tf.cast(tf.math.argmax(x, axis=1, output_type=tf.int32), tf.float32)

    x = tf.constant(np.random.default_rng(3).normal(size=(16, 9)).astype(np.float32))
    run_on("/GPU:0", positions, x)  # traced and optimised once
    before = casts_from_host()
    on_gpu = run_on("/GPU:0", positions, tf.constant(x.numpy() * 2))
    assert casts_from_host() == before
    np.testing.assert_array_equal(on_gpu[0], np.argmax(x.numpy(), axis=1).astype(np.float32))


def test_a_rewritten_cast_feeds_a_gradient_like_cpus():
    """A Keras mean loss divides by a host-computed count: the gradient through it matches."""
    w = tf.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4))

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def gradient(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_sum(tf.square(x @ w)) / tf.cast(tf.shape(x)[0], tf.float32)
        return tape.gradient(loss, w)

    x = tf.constant(np.random.default_rng(4).normal(size=(8, 3)).astype(np.float32))
    np.testing.assert_allclose(run_on("/GPU:0", gradient, x)[0], run_on("/CPU:0", gradient, x)[0],
                               rtol=1e-6, atol=1e-6)


# The int32 ops the graph optimizer takes to read and make int32 in host memory on the virtual
# GPU (graph_fusions.cc's IsHostInt32Op): TensorFlow's host kernels where the plugin has no int32
# kernel of its own, or the plugin's int32 kernels that compute on the host.
HOST_INT32_OPS = ["Prod", "Sum", "Max", "Min", "Mul", "AddV2", "Add", "Sub", "FloorDiv",
                  "FloorMod", "Maximum", "Minimum", "Neg", "StridedSlice", "Pack", "ConcatV2",
                  "Slice", "Unpack", "GatherV2", "Gather", "DynamicStitch", "SelectV2", "Reshape",
                  "ExpandDims", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal",
                  "NotEqual"]


def test_the_ops_taken_as_host_int32_ops_have_no_int32_kernel_in_device_memory():
    catalog = {entry["op"]: entry for entry in vgpu.ops()}
    for op in HOST_INT32_OPS:
        if op in catalog and "int32" in catalog[op]["dtypes"]:
            # The plugin's own int32 kernel of a shape op computes on the host.
            assert {"output", "merged"} & set(catalog[op]["host_memory"]), op
    # The shape ops are TensorFlow's own on every device, their outputs in host memory.
    assert not {"Shape", "Size", "Rank"} & catalog.keys()


# Tensors made on the host (a dataset's batches, CPU-placed ops) and read on the device: the
# optimizer gives their device readers one copy each (_VgpuCastFromHost with SrcT = DstT), and
# a Cast of one reads it from the host directly.


def copies_from_host():
    return vgpu.stats()["graph_fusions"]["copy_from_host"]


def batches(dtype, shape, count=3, seed=5):
    """A dataset's batches of `dtype` (the iterator runs on the CPU; the batch size unknown)."""
    rng = np.random.default_rng(seed)
    if dtype == tf.bool:
        data = rng.random((count * shape[0],) + shape[1:]) > 0.5
    elif dtype == tf.uint8:
        data = rng.integers(0, 256, (count * shape[0],) + shape[1:]).astype(np.uint8)
    else:
        data = rng.normal(size=(count * shape[0],) + shape[1:]).astype(dtype.as_numpy_dtype)
    return tf.data.Dataset.from_tensor_slices(data).batch(shape[0])


def run_over_batches(device, step, dataset):
    with tf.device(device):
        iterator = iter(dataset)
        return [[t.numpy() for t in tf.nest.flatten(step(iterator))] for _ in range(3)]


@pytest.mark.parametrize("dtype", [tf.float32, tf.float16, tf.bfloat16, tf.float64])
def test_a_batch_read_by_two_device_ops_gets_one_copy_and_the_cpus_results(dtype):
    w = tf.constant(np.linspace(-1, 1, 20).reshape(5, 4), dtype)

    @tf.function
    def step(iterator):
        x = next(iterator)
        return tf.matmul(x, w), x * 3

    before = copies_from_host()
    on_gpu = run_over_batches("/GPU:0", step, batches(dtype, (6, 5)))
    assert copies_from_host() == before + 1  # one copy, both readers share it
    on_cpu = run_over_batches("/CPU:0", step, batches(dtype, (6, 5)))
    for gpu_step, cpu_step in zip(on_gpu, on_cpu):
        for gpu_value, cpu_value in zip(gpu_step, cpu_step):
            assert gpu_value.dtype == cpu_value.dtype
            np.testing.assert_array_equal(gpu_value, cpu_value)


@pytest.mark.parametrize("dtype", [tf.uint8, tf.bool])
def test_a_cast_of_a_host_batch_of_bytes_or_booleans_reads_it_from_the_host(dtype):
    @tf.function
    def step(iterator):
        x = next(iterator)
        as_float = tf.cast(x, tf.float32)  # read from the host: no copy first
        return as_float * 0.5, tf.logical_not(x) if dtype == tf.bool else x > 100

    casts, copies = casts_from_host(), copies_from_host()
    on_gpu = run_over_batches("/GPU:0", step, batches(dtype, (4, 7)))
    assert casts_from_host() == casts + 1
    assert copies_from_host() == copies + 1  # the second reader's
    on_cpu = run_over_batches("/CPU:0", step, batches(dtype, (4, 7)))
    for gpu_step, cpu_step in zip(on_gpu, on_cpu):
        for gpu_value, cpu_value in zip(gpu_step, cpu_step):
            np.testing.assert_array_equal(gpu_value, cpu_value)


def test_an_integer_batch_is_copied_only_for_a_device_kernel_that_reads_it_in_device_memory():
    """A gather's indices are read in device memory: one copy. int32 arithmetic and shapes run
    on the host (TensorFlow's host kernels): no copy. Device tensors: no copy."""
    @tf.function
    def step(iterator, y):
        ids = next(iterator)
        return tf.gather(y, ids), ids * 2, tf.shape(ids), y * 2

    y = tf.constant(np.arange(10, dtype=np.float32))
    ids = tf.data.Dataset.from_tensor_slices((np.arange(12) % 10).astype(np.int32)).batch(4)
    with tf.device("/GPU:0"):
        y_on_device = tf.identity(y)
        iterator = iter(ids)
        before = copies_from_host()
        step(iterator, y_on_device)  # traced and optimised once
        assert copies_from_host() == before + 1  # the gather's indices only
        vgpu.reset_stats()
        gathered, doubled_ids, shape, doubled = step(iterator, y_on_device)
        commands = dict(vgpu.stats()["commands"])
    assert commands["record_event"] == 0 and commands["memcpy_dtoh"] == 0, commands
    np.testing.assert_array_equal(gathered.numpy(), [4, 5, 6, 7])
    np.testing.assert_array_equal(doubled_ids.numpy(), [8, 10, 12, 14])
    np.testing.assert_array_equal(shape.numpy(), [4])
    np.testing.assert_array_equal(doubled.numpy(), y.numpy() * 2)


def embedding_step(table):
    """A Keras Embedding's lookup of a batch of int32 ids and the table's gradient."""
    @tf.function
    def step(iterator):
        ids = next(iterator)
        with tf.GradientTape() as tape:
            rows = keras.ops.take(table, ids, axis=0)  # where(ids < 0, ids + n, ids), gather
            loss = tf.reduce_sum(rows * rows)
        gradient = tape.gradient(loss, table)  # IndexedSlices: a segment sum by the ids
        return loss, tf.convert_to_tensor(gradient)
    return step


def test_keras_take_of_host_ids_and_its_gradient_send_no_index_back_and_forth():
    """Keras' take wraps negative ids with int32 ops TensorFlow runs on the host; the select
    joins them there, and the gather and the gradient's segment sum get one copy each of the
    ids: nothing goes down from the device mid-step, and no TensorFlow copy (its events)."""
    ids = np.array([[3, 0, -1], [9, 9, 2], [1, -10, 5], [4, 4, 4], [7, 8, 6]], np.int32)
    data = tf.data.Dataset.from_tensor_slices(ids).batch(2)  # the last batch smaller
    values = np.linspace(-2, 2, 30, dtype=np.float32).reshape(10, 3)
    results = {}
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device):
            step = embedding_step(tf.Variable(values))
            iterator = iter(data)
            results[device] = [[t.numpy() for t in step(iterator)]]
            vgpu.reset_stats()
            outputs = step(iterator)  # results read back below, after the count
            commands = dict(vgpu.stats()["commands"])
            results[device].append([t.numpy() for t in outputs])
            results[device].append([t.numpy() for t in step(iterator)])
        if device == "/GPU:0":
            assert commands["memcpy_dtoh"] == 0 and commands["record_event"] == 0, commands
    for gpu_step, cpu_step in zip(results["/GPU:0"], results["/CPU:0"]):
        for gpu_value, cpu_value in zip(gpu_step, cpu_step):
            np.testing.assert_allclose(gpu_value, cpu_value, rtol=1e-6, atol=1e-6)


def test_an_empty_host_batch_is_copied_as_empty():
    @tf.function
    def step(iterator):
        return next(iterator) + 1.0

    data = tf.data.Dataset.from_tensors(np.zeros((0, 3), np.float32)).repeat(3)
    before = copies_from_host()
    on_gpu = run_over_batches("/GPU:0", step, data)
    assert copies_from_host() == before + 1
    assert on_gpu[0][0].shape == (0, 3)


def test_a_device_op_ordered_after_a_host_batch_waits_on_its_copy_not_on_a_dummy_copy():
    """A control input from a host node on a device node is sent by TensorFlow as a dummy
    tensor copied into device memory (Grappler's constant folding leaves such inputs on the
    constants it makes from a batch's shape); the batch's copy, which runs after the batch, takes
    its place: one copy up a step, the batch's."""
    v = tf.Variable(np.arange(4, dtype=np.float32))

    @tf.function
    def step(iterator):
        x = next(iterator)
        with tf.control_dependencies([x]):
            w = v.read_value()  # on the device, ordered after the batch
        return x * 2.0 + w

    data = batches(tf.float32, (3, 4), count=4)
    with tf.device("/GPU:0"):
        iterator = iter(data)
        first = step(iterator)  # traced and optimised
        vgpu.reset_stats()
        second = step(iterator)
        commands = dict(vgpu.stats()["commands"])
    assert commands["memcpy_htod"] == 1, commands  # the batch's
    # TensorFlow's transfer of the dummy recorded two events and waited on one.
    assert commands["record_event"] == 0 and commands["wait_event"] == 0, commands
    on_cpu = run_over_batches("/CPU:0", step, data)
    np.testing.assert_array_equal(first.numpy(), on_cpu[0][0])
    np.testing.assert_array_equal(second.numpy(), on_cpu[1][0])


# A Cast to int32 of a host tensor whose readers take the result in host memory runs on the host.


def casts_to_int32_on_host():
    return vgpu.stats()["graph_fusions"]["cast_to_int32_on_host"]


def float_id_embedding_step(table, through_float):
    """An Embedding behind a float Input: Keras casts the batch's ids to the Input's float32
    (through_float: a batch of int32 ids) and the Embedding casts them to int32 for its take."""
    @tf.function
    def step(iterator):
        ids = next(iterator)
        if through_float:
            ids = tf.cast(ids, tf.float32)
        with tf.GradientTape() as tape:
            rows = keras.ops.take(table, tf.cast(ids, tf.int32), axis=0)
            loss = tf.reduce_sum(rows * rows)
        return loss, tf.convert_to_tensor(tape.gradient(loss, table))
    return step


@pytest.mark.parametrize("through_float", [False, True], ids=["float_batch", "int_batch_as_float"])
def test_an_embeddings_cast_of_host_ids_runs_on_the_host_and_nothing_comes_down(through_float):
    """The ids' Cast to int32 is read by take's int32 ops (TensorFlow's host kernels) and, after
    the select, by the gather and the gradient's segment sum (copied up): computed on the
    device, the ids went down mid-step; on the host nothing comes down and no event is
    recorded, and the results are the CPU's."""
    ids = np.array([[3, 0, -1], [9, 9, 2], [1, -10, 5], [4, 4, 4], [7, 8, 6]], np.float32)
    if through_float:
        ids = ids.astype(np.int32)
    data = tf.data.Dataset.from_tensor_slices(ids).batch(2)  # the last batch smaller
    values = np.linspace(-2, 2, 30, dtype=np.float32).reshape(10, 3)
    results = {}
    for device in ("/CPU:0", "/GPU:0"):
        with tf.device(device):
            step = float_id_embedding_step(tf.Variable(values), through_float)
            iterator = iter(data)
            before = casts_to_int32_on_host()
            results[device] = [[t.numpy() for t in step(iterator)]]
            moved = casts_to_int32_on_host() - before
            vgpu.reset_stats()
            outputs = step(iterator)
            commands = dict(vgpu.stats()["commands"])
            results[device].append([t.numpy() for t in outputs])
            results[device].append([t.numpy() for t in step(iterator)])
        if device == "/GPU:0":
            assert moved == 1
            assert commands["memcpy_dtoh"] == 0 and commands["record_event"] == 0, commands
    for gpu_step, cpu_step in zip(results["/GPU:0"], results["/CPU:0"]):
        for gpu_value, cpu_value in zip(gpu_step, cpu_step):
            np.testing.assert_allclose(gpu_value, cpu_value, rtol=1e-6, atol=1e-6)


def test_a_cast_to_int32_that_a_device_kernel_reads_in_device_memory_stays_on_the_device():
    """Tile's int32 kernel reads its input in device memory: moving the Cast to the host would
    only add a copy up. Values beyond int32's exact float range and negative halves round as
    the CPU's Cast does."""
    @tf.function
    def step(iterator):
        return tf.tile(tf.cast(next(iterator), tf.int32), [2, 1])

    values = np.array([[2.5, -2.5, 16777217.0], [-0.5, 1e9, 7.9]], np.float32)
    data = tf.data.Dataset.from_tensor_slices(values).batch(2).repeat(3)
    before = casts_to_int32_on_host()
    on_gpu = run_over_batches("/GPU:0", step, data)
    assert casts_to_int32_on_host() == before
    on_cpu = run_over_batches("/CPU:0", step, data)
    for gpu_step, cpu_step in zip(on_gpu, on_cpu):
        np.testing.assert_array_equal(gpu_step[0], cpu_step[0])


@pytest.mark.parametrize("truncate", [(False, False), (False, True)], ids=["merged", "two_casts"])
def test_the_float_cast_of_host_ids_goes_from_the_device_when_only_int32_casts_read_it(truncate):
    """Two Embeddings behind one float Input: their int32 casts (one, where Grappler merges
    equal casts; two with different Truncate attributes, the same values) and the float cast
    before them run on the host, the float cast once for both, and the device runs the two
    gathers only."""
    tables = [tf.Variable(np.linspace(-1, 1, 20, dtype=np.float32).reshape(10, 2) * k)
              for k in (1, 2)]

    @tf.function
    def step(iterator):
        as_float = tf.cast(next(iterator), tf.float32)
        ids = [tf.raw_ops.Cast(x=as_float, DstT=tf.int32, Truncate=t) for t in truncate]
        return [keras.ops.take(table, i, axis=0) for table, i in zip(tables, ids)]

    data = tf.data.Dataset.from_tensor_slices(np.array([[1, 2], [3, -4], [9, 0]], np.int32))
    data = data.batch(2).repeat(2)
    before = casts_to_int32_on_host()
    with tf.device("/GPU:0"):
        iterator = iter(data)
        first = [t.numpy() for t in step(iterator)]
        assert casts_to_int32_on_host() == before + len(set(truncate))
        vgpu.reset_stats()
        second = [t.numpy() for t in step(iterator)]
        commands = dict(vgpu.stats()["commands"])
    assert commands["launch"] == 2, commands  # the two gathers: no float cast left on the device
    on_cpu = run_over_batches("/CPU:0", step, data)
    for gpu_value, cpu_value in zip(first + second, on_cpu[0] + on_cpu[1]):
        np.testing.assert_array_equal(gpu_value, cpu_value)
