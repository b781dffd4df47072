"""The CudnnRNN ops on the virtual GPU. TensorFlow's CPU has no CudnnRNN kernel, so the reference
is built from TensorFlow CPU ops (MatMul, Sigmoid, Tanh, ...) in a Python loop over time steps,
following cuDNN's equations and weight layout (protocol/kernels/rnn.h). Values and gradients
(input, input_h, input_c, params) are compared for lstm / gru / rnn_tanh / rnn_relu, uni- and
bidirectional, one and two layers, time- and batch-major, with and without sequence lengths,
float32 / float64 / float16 / bfloat16, CudnnRNN v1 / v2 / v3; plus the LSTM projection, dropout
between layers, CudnnRNNParamsSize, the canonical conversions, empty sizes and bad inputs."""
import numpy as np
import pytest
import tensorflow as tf

import vgpu

GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}
TOL = {
    np.float64: dict(rtol=1e-10, atol=1e-10),
    np.float32: dict(rtol=2e-5, atol=2e-5),
    np.float16: dict(rtol=2e-2, atol=2e-2),
    tf.bfloat16.as_numpy_dtype: dict(rtol=6e-2, atol=6e-2),
}


def params_size(mode, layers, dirs, input_size, units, proj=0):
    g, c = GATES[mode], units
    h = proj or units
    size = 0
    for layer in range(layers):
        width = input_size if layer == 0 else dirs * h
        size += dirs * (g * c * width + g * c * h + (h * c if proj else 0) + 2 * g * c)
    return size


def split_params(params, mode, layers, dirs, input_size, units, proj=0):
    """Per pseudo-layer (W, R, P, bW, bR) views of the weight space: all weights (pseudo-layers in
    order, each W [G*C, in], R [G*C, H], P [H, C]), then all biases (bW, bR: [G*C] each)."""
    g, c = GATES[mode], units
    h = proj or units
    at = 0

    def take(count, shape):
        nonlocal at
        piece = tf.reshape(params[at:at + count], shape)
        at += count
        return piece

    weights = []
    for layer in range(layers):
        width = input_size if layer == 0 else dirs * h
        for _ in range(dirs):
            w = take(g * c * width, [g * c, width])
            r = take(g * c * h, [g * c, h])
            p = take(h * c, [h, c]) if proj else None
            weights.append((w, r, p))
    biases = [(take(g * c, [g * c]), take(g * c, [g * c])) for _ in range(layers * dirs)]
    assert at == params.shape[0]
    return [w + b for w, b in zip(weights, biases)]


def reference_rnn(mode, x, h0, c0, params, layers, dirs, lengths=None, proj=0):
    """cuDNN's RNN in TensorFlow ops, time-major: x [T, B, I], h0 [L*D, B, H], c0 [L*D, B, C].
    Returns y [T, B, D*H], h [L*D, B, H], c [L*D, B, C] (c: None unless lstm)."""
    steps, batch, input_size = x.shape
    units = c0.shape[-1] if mode == "lstm" else h0.shape[-1]
    pieces = split_params(params, mode, layers, dirs, input_size, units, proj)
    lengths = tf.fill([batch], steps) if lengths is None else tf.constant(lengths)
    layer_input, final_h, final_c = x, [], []
    for layer in range(layers):
        outputs = []
        for d in range(dirs):
            p = layer * dirs + d
            w, r, proj_w, bw, br = pieces[p]
            h, c = h0[p], c0[p] if mode == "lstm" else None
            ys = [None] * steps
            for t in (range(steps) if d == 0 else reversed(range(steps))):
                active = tf.expand_dims(t < lengths, 1)
                gx = tf.matmul(layer_input[t], w, transpose_b=True) + bw
                gh = tf.matmul(h, r, transpose_b=True) + br
                if mode == "lstm":
                    gi, gf, gc, go = tf.split(gx + gh, 4, axis=1)
                    c_new = tf.sigmoid(gf) * c + tf.sigmoid(gi) * tf.tanh(gc)
                    h_new = tf.sigmoid(go) * tf.tanh(c_new)
                    if proj:
                        h_new = tf.matmul(h_new, proj_w, transpose_b=True)
                    c = tf.where(active, c_new, c)
                elif mode == "gru":
                    xr, xz, xn = tf.split(gx, 3, axis=1)
                    hr, hz, hn = tf.split(gh, 3, axis=1)
                    reset, update = tf.sigmoid(xr + hr), tf.sigmoid(xz + hz)
                    candidate = tf.tanh(xn + reset * hn)
                    h_new = (1 - update) * candidate + update * h
                elif mode == "rnn_tanh":
                    h_new = tf.tanh(gx + gh)
                else:
                    h_new = tf.nn.relu(gx + gh)
                h = tf.where(active, h_new, h)
                ys[t] = tf.where(active, h_new, tf.zeros_like(h_new))
            outputs.append(tf.stack(ys))
            final_h.append(h)
            final_c.append(c)
        layer_input = tf.concat(outputs, axis=2)
    return layer_input, tf.stack(final_h), tf.stack(final_c) if mode == "lstm" else None


def make_case(mode, layers, dirs, steps=5, batch=3, input_size=4, units=3, proj=0,
              dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed)
    h = proj or units
    x = rng.uniform(-1, 1, (steps, batch, input_size))
    h0 = rng.uniform(-1, 1, (layers * dirs, batch, h))
    c0 = rng.uniform(-1, 1, (layers * dirs, batch, units))
    params = rng.uniform(-0.6, 0.6, params_size(mode, layers, dirs, input_size, units, proj))
    return [a.astype(dtype) for a in (x, h0, c0, params)]


def to_batch_major(x, h0, c0):
    """The batch-major op's tensors for time-major x / states. TensorFlow's GPU kernel hands the
    [batch, layers*dirs, units] state memory to cuDNN as [layers*dirs, batch, units]: the same
    bytes, so the reference's states are a reshape (not a transpose) of the op's."""
    states, batch = h0.shape[0], h0.shape[1]
    return (np.transpose(x, (1, 0, 2)), h0.reshape(batch, states, h0.shape[2]),
            c0.reshape(batch, states, c0.shape[2]))


def cudnn_v3(mode, dirs, time_major=True, lengths=None, proj=0, training=True, **attrs):
    direction = "bidirectional" if dirs == 2 else "unidirectional"

    def run(x, h0, c0, params):
        batch = x.shape[1] if time_major else x.shape[0]
        steps = x.shape[0] if time_major else x.shape[1]
        seq = lengths if lengths is not None else [steps] * batch
        y, h, c, _, _ = tf.raw_ops.CudnnRNNV3(
            input=x, input_h=h0, input_c=c0, params=params, sequence_lengths=seq,
            rnn_mode=mode, direction=direction, time_major=time_major, num_proj=proj,
            is_training=training, **attrs)
        return y, h, c

    return run


def upstream_weights(x, h0, c0, mode, dirs, seed=7):
    """Random upstream gradients for y [T, B, D*H], h and c (time-major, cuDNN state order)."""
    rng = np.random.default_rng(seed)
    steps, batch = x.shape[:2]
    shapes = [(steps, batch, dirs * h0.shape[2]), h0.shape, c0.shape]
    return [rng.uniform(-1, 1, s) for s in shapes[:3 if mode == "lstm" else 2]]


def outputs_and_gradients(fn, args, weights):
    """fn(*args) and d(sum(out * weights))/d(args) over its outputs (y, h, and c for lstm)."""
    tensors = [tf.constant(a) for a in args]
    with tf.GradientTape() as tape:
        for t in tensors:
            tape.watch(t)
        outs = list(fn(*tensors))[:len(weights)]
        loss = tf.add_n([tf.reduce_sum(tf.cast(o, tf.float64) * w)
                         for o, w in zip(outs, weights)])
    grads = tape.gradient(loss, tensors)
    if len(weights) == 2:
        grads[2] = None  # input_c is not an input of the model
    return outs, grads


def assert_close(actual, expected, dtype, what):
    tol = TOL[np.dtype(dtype).type]
    np.testing.assert_allclose(np.asarray(actual, np.float64), np.asarray(expected, np.float64),
                               err_msg=what, **tol)


def compare(mode, layers, dirs, *, time_major=True, lengths=None, proj=0, dtype=np.float32,
            op=None, steps=5, batch=3):
    x, h0, c0, params = make_case(mode, layers, dirs, steps=steps, batch=batch, proj=proj,
                                  dtype=dtype)
    compute = np.float64 if dtype == np.float64 else np.float32

    def reference(x, h0, c0, params):
        cast = [tf.cast(a, compute) for a in (x, h0, c0, params)]
        y, h, c = reference_rnn(mode, *cast, layers, dirs, lengths, proj)
        return y, h, c

    weights = upstream_weights(x, h0, c0, mode, dirs)
    with tf.device("/CPU:0"):
        expected, expected_grads = outputs_and_gradients(reference, (x, h0, c0, params), weights)
    op = op or cudnn_v3(mode, dirs, time_major=time_major, lengths=lengths, proj=proj)
    args = (x, h0, c0, params)
    if not time_major:
        args = (*to_batch_major(x, h0, c0), params)
        weights = [np.transpose(weights[0], (1, 0, 2))] + [
            w.reshape(a.shape) for w, a in zip(weights[1:], args[1:3])]
    vgpu.reset_stats()
    with tf.device("/GPU:0"):
        actual, actual_grads = outputs_and_gradients(op, args, weights)
    assert vgpu.stats()["launches"] >= 2, "the op and its gradient were not launched"
    for out in actual:
        assert out.device.endswith("GPU:0"), out.device
    if not time_major:  # back to the reference's time-major layout and state order
        actual[0] = tf.transpose(actual[0], (1, 0, 2))
        actual[1:] = [tf.reshape(s, e.shape) for s, e in zip(actual[1:], expected[1:])]
        actual_grads[0] = tf.transpose(actual_grads[0], (1, 0, 2))
        actual_grads[1:3] = [None if g is None else tf.reshape(g, a.shape)
                             for g, a in zip(actual_grads[1:3], (h0, c0))]
    for name, a, e in zip(("output", "output_h", "output_c"), actual, expected):
        assert a.dtype == dtype
        assert_close(a, e, dtype, name)
    for name, a, e in zip(("input", "input_h", "input_c", "params"), actual_grads,
                          expected_grads):
        if e is None:
            continue
        assert_close(a, e, dtype, f"gradient of {name}")


MODES = ["lstm", "gru", "rnn_tanh", "rnn_relu"]
LAYOUTS = [  # (time_major, lengths)
    (True, None),
    (False, None),
    (False, [5, 2, 4]),
    (True, [3, 5, 1]),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers,dirs", [(1, 1), (2, 1), (1, 2), (2, 2)])
@pytest.mark.parametrize("time_major,lengths", LAYOUTS)
def test_v3_matches_reference_values_and_gradients(mode, layers, dirs, time_major, lengths):
    compare(mode, layers, dirs, time_major=time_major, lengths=lengths)


@pytest.mark.parametrize("mode", MODES)
def test_zero_length_sequences_keep_their_initial_state(mode):
    compare(mode, 2, 2, time_major=False, lengths=[0, 5, 3])


@pytest.mark.parametrize("dtype", [np.float64, np.float16, tf.bfloat16.as_numpy_dtype])
@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_v3_other_dtypes_match_reference(dtype, mode):
    compare(mode, 2, 2, time_major=False, lengths=[5, 3, 4], dtype=dtype)


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
@pytest.mark.parametrize("version", [1, 2])
def test_cudnn_rnn_v1_and_v2_match_reference(mode, version):
    def op(x, h0, c0, params):
        fn = tf.raw_ops.CudnnRNN if version == 1 else tf.raw_ops.CudnnRNNV2
        outs = fn(input=x, input_h=h0, input_c=c0, params=params, rnn_mode=mode,
                  direction="bidirectional", is_training=True)
        return outs[0], outs[1], outs[2]

    compare(mode, 2, 2, op=op)


@pytest.mark.parametrize("time_major,lengths", LAYOUTS)
@pytest.mark.parametrize("layers,dirs", [(1, 1), (2, 2)])
def test_lstm_projection_matches_reference(time_major, lengths, layers, dirs):
    compare("lstm", layers, dirs, time_major=time_major, lengths=lengths, proj=2)


def test_longer_sequences_and_wider_batches_match_reference():
    compare("lstm", 1, 2, steps=23, batch=9, time_major=False, lengths=[23, 1, 7, 20, 23, 0, 5,
                                                                          11, 2])


def test_inference_outputs_equal_training_outputs_and_have_placeholder_outputs():
    x, h0, c0, params = make_case("gru", 2, 1)
    with tf.device("/GPU:0"):
        train = tf.raw_ops.CudnnRNNV3(input=x, input_h=h0, input_c=c0, params=params,
                                      sequence_lengths=[5, 5, 5], rnn_mode="gru",
                                      is_training=True)
        infer = tf.raw_ops.CudnnRNNV3(input=x, input_h=h0, input_c=c0, params=params,
                                      sequence_lengths=[5, 5, 5], rnn_mode="gru",
                                      is_training=False)
        v2 = tf.raw_ops.CudnnRNNV2(input=x, input_h=h0, input_c=c0, params=params,
                                   rnn_mode="gru", is_training=True)
    np.testing.assert_array_equal(train.output.numpy(), infer.output.numpy())
    np.testing.assert_array_equal(train.output_h.numpy(), infer.output_h.numpy())
    assert train.output_c.shape == () and train.output_c.numpy() == 0
    assert infer.reserve_space.shape == () and train.reserve_space.shape[0] > 1
    assert train.host_reserved.shape == ()
    assert v2.host_reserved.numpy().tolist() == [-1, 0]


def test_empty_sequences_and_batches():
    for steps, batch in [(0, 3), (4, 0)]:
        x, h0, c0, params = make_case("lstm", 2, 2, steps=steps, batch=batch)
        with tf.device("/GPU:0"):
            with tf.GradientTape() as tape:
                ts = [tf.constant(a) for a in (x, h0, c0, params)]
                for t in ts:
                    tape.watch(t)
                y, h, c = cudnn_v3("lstm", 2)(*ts)
                loss = tf.reduce_sum(y) + tf.reduce_sum(h * 2.0) + tf.reduce_sum(c)
            grads = tape.gradient(loss, ts)
        assert y.shape == (steps, batch, 6)
        np.testing.assert_array_equal(h.numpy(), h0)  # no step: the states pass through
        np.testing.assert_array_equal(c.numpy(), c0)
        np.testing.assert_array_equal(grads[1].numpy(), np.full(h0.shape, 2.0, np.float32))
        np.testing.assert_array_equal(grads[3].numpy(), np.zeros_like(params))


def dropout_rnn(dropout, seed, seed2, training=True):
    def run(x, h0, c0, params):
        return tf.raw_ops.CudnnRNNV3(
            input=x, input_h=h0, input_c=c0, params=params, sequence_lengths=[6, 4, 6],
            rnn_mode="lstm", dropout=dropout, seed=seed, seed2=seed2, is_training=training)[:3]

    return run


def test_dropout_between_layers_is_seeded_and_differentiable():
    x, h0, c0, params = [a.astype(np.float64) for a in make_case("lstm", 3, 1, steps=6)]
    args = [tf.constant(a) for a in (x, h0, c0, params)]
    with tf.device("/GPU:0"):
        plain = tf.function(dropout_rnn(0.0, 0, 0))(*args)
        inference = tf.function(dropout_rnn(0.5, 1, 2, training=False))(*args)
        first = tf.function(dropout_rnn(0.5, 1, 2))(*args)  # a new kernel: call 0
        again = tf.function(dropout_rnn(0.5, 1, 2))(*args)
        other_seed = tf.function(dropout_rnn(0.5, 3, 2))(*args)
        repeated = tf.function(dropout_rnn(0.5, 1, 2))
        calls = [repeated(*args)[0].numpy() for _ in range(2)]  # one kernel: calls 0 and 1
    np.testing.assert_array_equal(inference[0].numpy(), plain[0].numpy())
    np.testing.assert_array_equal(first[0].numpy(), again[0].numpy())
    np.testing.assert_array_equal(calls[0], first[0].numpy())
    assert not np.allclose(first[0].numpy(), plain[0].numpy())
    assert not np.allclose(first[0].numpy(), other_seed[0].numpy())
    assert not np.allclose(calls[0], calls[1])

    # The gradient is that of the masked network: a directional derivative of the loss, from
    # fresh kernels (the same masks), matches it.
    rng = np.random.default_rng(3)
    direction = rng.uniform(-1, 1, params.shape)
    weights = rng.uniform(-1, 1, first[0].shape)

    def loss(p):
        y = tf.function(dropout_rnn(0.5, 1, 2))(args[0], args[1], args[2], tf.constant(p))[0]
        return float(tf.reduce_sum(y * weights))

    with tf.device("/GPU:0"):
        p = tf.constant(params)
        with tf.GradientTape() as tape:
            tape.watch(p)
            y = tf.function(dropout_rnn(0.5, 1, 2))(args[0], args[1], args[2], p)[0]
            total = tf.reduce_sum(y * weights)
        gradient = tape.gradient(total, p).numpy()
        eps = 1e-6
        numeric = (loss(params + eps * direction) - loss(params - eps * direction)) / (2 * eps)
    np.testing.assert_allclose(np.dot(gradient, direction), numeric, rtol=1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("dirs", [1, 2])
def test_params_size_matches_the_weight_space(mode, dirs):
    direction = "bidirectional" if dirs == 2 else "unidirectional"
    with tf.device("/GPU:0"):
        for dtype in (tf.float32, tf.float16):
            size = tf.raw_ops.CudnnRNNParamsSize(num_layers=3, num_units=5, input_size=7, T=dtype,
                                                 S=tf.int32, rnn_mode=mode, direction=direction)
            assert size.numpy().tolist() == [params_size(mode, 3, dirs, 7, 5)]
        size = tf.raw_ops.CudnnRNNParamsSize(num_layers=2, num_units=5, input_size=7,
                                             T=tf.float32, S=tf.int64, rnn_mode="lstm",
                                             direction=direction, num_proj=3)
        assert size.dtype == tf.int64
        assert size.numpy().tolist() == [params_size("lstm", 2, dirs, 7, 5, proj=3)]


def test_params_size_matches_keras_lstm_weights():
    # One layer: Keras' kernel + recurrent kernel + bias, plus cuDNN's second bias.
    with tf.device("/GPU:0"):
        size = tf.raw_ops.CudnnRNNParamsSize(num_layers=1, num_units=8, input_size=5,
                                             T=tf.float32, S=tf.int32, rnn_mode="lstm")
    assert size.numpy()[0] == 5 * 32 + 8 * 32 + 32 + 32


@pytest.mark.parametrize("mode,dirs,proj", [("lstm", 2, 0), ("gru", 1, 0), ("rnn_relu", 2, 0),
                                            ("lstm", 2, 2)])
def test_canonical_conversions_round_trip_and_have_tensorflows_shapes(mode, dirs, proj):
    layers, units, input_size = 2, 3, 4
    direction = "bidirectional" if dirs == 2 else "unidirectional"
    size = params_size(mode, layers, dirs, input_size, units, proj)
    params = np.arange(size, dtype=np.float32)
    g = GATES[mode]
    n_weights = layers * dirs * (2 * g + (1 if proj else 0))
    n_biases = layers * dirs * 2 * g
    common = dict(num_layers=layers, num_units=units, input_size=input_size, rnn_mode=mode,
                  direction=direction)
    with tf.device("/GPU:0"):
        if proj:
            weights, biases = tf.raw_ops.CudnnRNNParamsToCanonicalV2(
                params=params, num_params_weights=n_weights, num_params_biases=n_biases,
                num_proj=proj, **common)
            back = tf.raw_ops.CudnnRNNCanonicalToParamsV2(weights=weights, biases=biases,
                                                          num_proj=proj, **common)
        else:
            weights, biases = tf.raw_ops.CudnnRNNParamsToCanonical(params=params,
                                                                   num_params=n_weights,
                                                                   **common)
            back = tf.raw_ops.CudnnRNNCanonicalToParams(weights=weights, biases=biases, **common)
    assert back.device.endswith("GPU:0")
    np.testing.assert_array_equal(back.numpy(), params)
    # The weight space is the canonical weights then biases, concatenated.
    flat = np.concatenate([w.numpy().ravel() for w in weights] + [b.numpy() for b in biases])
    np.testing.assert_array_equal(flat, params)
    h = proj or units
    per_layer = 2 * g + (1 if proj else 0)
    expected = []
    for layer in range(layers):
        width = input_size if layer == 0 else dirs * h
        for _ in range(dirs):
            expected += [(units, width)] * g + [(units, h)] * g + ([(h, units)] if proj else [])
    assert [tuple(w.shape) for w in weights] == expected
    assert len(weights) == layers * dirs * per_layer
    assert all(tuple(b.shape) == (units,) for b in biases)


def test_canonical_to_params_rejects_wrong_counts_and_sizes():
    common = dict(num_layers=1, num_units=2, input_size=3, rnn_mode="rnn_tanh")
    w = [np.zeros((2, 3), np.float32), np.zeros((2, 2), np.float32)]
    b = [np.zeros(2, np.float32)] * 2
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="Params size mismatch"):
            tf.raw_ops.CudnnRNNCanonicalToParams(weights=[w[0], w[0]], biases=b, **common)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Number of params mismatch"):
            tf.raw_ops.CudnnRNNCanonicalToParams(weights=w + w, biases=b + b, **common)
        with pytest.raises(tf.errors.InvalidArgumentError, match="Number of params mismatch"):
            tf.raw_ops.CudnnRNNParamsToCanonical(params=np.zeros(14, np.float32), num_params=4,
                                                 **common)


def v3(x, h0, c0, params, **attrs):
    attrs.setdefault("sequence_lengths", [x.shape[0]] * (x.shape[1] if len(x.shape) > 1 else 1))
    with tf.device("/GPU:0"):
        return tf.raw_ops.CudnnRNNV3(input=x, input_h=h0, input_c=c0, params=params, **attrs)


def test_bad_shapes_raise_tensorflows_errors():
    x, h0, c0, params = make_case("lstm", 1, 1)
    err = tf.errors.InvalidArgumentError
    with pytest.raises(err, match="RNN input must be a 3-D vector"):
        v3(x[0], h0, c0, params, sequence_lengths=[5, 5, 5])
    with pytest.raises(err, match="RNN input_h must be a 3-D vector"):
        v3(x, h0[0], c0, params)
    with pytest.raises(err, match="Invalid input_h shape"):
        v3(x, np.zeros((1, 2, 3), np.float32), c0, params)
    with pytest.raises(err, match="Invalid input_h shape"):  # bidirectional needs 2 states
        v3(x, h0, c0, params, direction="bidirectional")
    with pytest.raises(err, match="input_h and input_c must have the same shape"):
        v3(x, h0, c0[:, :2], params)
    with pytest.raises(err, match="Invalid params shape"):
        v3(x, h0, c0, params[:-1])
    with pytest.raises(err, match="Invalid sequence_lengths shape"):
        v3(x, h0, c0, params, sequence_lengths=[5, 5])
    with pytest.raises(err, match=r"sequence_lengths\[1\] = 6 is not in \[0, 5\]"):
        v3(x, h0, c0, params, sequence_lengths=[5, 6, 5])
    with pytest.raises(err, match="Invalid input_h and input_c w/ projection size"):
        v3(x, h0, c0, params, num_proj=2)
    with pytest.raises(err, match="dropout must be in"):
        v3(x, h0, c0, params, dropout=1.0)
    with pytest.raises(err, match="num_layers must be positive"):
        v3(x, h0[:0], c0[:0], params)


def test_unsupported_input_mode_is_unimplemented():
    x, h0, c0, params = make_case("lstm", 1, 1)
    with pytest.raises(tf.errors.UnimplementedError, match="skip_input"):
        v3(x, h0, c0, params, input_mode="skip_input")
    with pytest.raises(tf.errors.UnimplementedError, match="skip_input"):
        with tf.device("/GPU:0"):
            tf.raw_ops.CudnnRNNParamsSize(num_layers=1, num_units=4, input_size=4, T=tf.float32,
                                          S=tf.int32, input_mode="auto_select")
    with pytest.raises(tf.errors.UnimplementedError, match="lstm"):
        with tf.device("/GPU:0"):
            tf.raw_ops.CudnnRNNParamsSize(num_layers=1, num_units=4, input_size=3, T=tf.float32,
                                          S=tf.int32, rnn_mode="gru", num_proj=2)


def test_params_size_rejects_non_scalars_and_bad_sizes():
    with tf.device("/GPU:0"):
        with pytest.raises(tf.errors.InvalidArgumentError, match="num_units is not a scalar"):
            tf.raw_ops.CudnnRNNParamsSize(num_layers=1, num_units=[4], input_size=3,
                                          T=tf.float32, S=tf.int32)
        with pytest.raises(tf.errors.InvalidArgumentError, match="num_layers must be positive"):
            tf.raw_ops.CudnnRNNParamsSize(num_layers=0, num_units=4, input_size=3,
                                          T=tf.float32, S=tf.int32)


def backprop_v3(x, h0, c0, params, forward, **overrides):
    y, h, c, reserve, host = forward
    args = dict(input=x, input_h=h0, input_c=c0, params=params, sequence_lengths=[5, 5, 5],
                output=y, output_h=h, output_c=c, output_backprop=y, output_h_backprop=h,
                output_c_backprop=c, reserve_space=reserve, host_reserved=host)
    args.update(overrides)
    with tf.device("/GPU:0"):
        return tf.raw_ops.CudnnRNNBackpropV3(**args)


def test_backprop_checks_its_inputs():
    x, h0, c0, params = make_case("lstm", 1, 1)
    forward = v3(x, h0, c0, params)
    inference = v3(x, h0, c0, params, is_training=False)
    err = tf.errors.InvalidArgumentError
    backprop_v3(x, h0, c0, params, forward)  # well-formed
    with pytest.raises(err, match="Invalid output_backprop shape"):
        backprop_v3(x, h0, c0, params, forward, output_backprop=forward[0][:, :2])
    with pytest.raises(err, match="Invalid output_c shape"):
        backprop_v3(x, h0, c0, params, forward, output_c=forward[2][:, :2])
    with pytest.raises(err, match="Invalid reserve_space shape"):
        backprop_v3(x, h0, c0, params, forward, reserve_space=inference[3])
    # A reserve space of the right size from other sequence lengths: the kernel finds out (the
    # op cannot read device memory), and the error surfaces at the stream's next sync.
    other = v3(x, h0, c0, params, sequence_lengths=[5, 4, 5])
    with pytest.raises(tf.errors.InternalError):
        out = backprop_v3(x, h0, c0, params, forward, reserve_space=other[3])
        out[0].numpy()
    # The device stays usable.
    backprop_v3(x, h0, c0, params, forward)[0].numpy()
