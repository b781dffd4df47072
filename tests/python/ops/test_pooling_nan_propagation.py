"""TF_ENABLE_MAXPOOL_NANPROP on the virtual GPU, both ways, as TensorFlow's GPU kernels read it
(once, when a kernel is built): unset, max pooling skips NaNs and a window of NaNs routes no
gradient (cuDNN's CUDNN_NOT_PROPAGATE_NAN); set, a NaN in a window is its maximum and takes the
gradient (MaxPool, MaxPoolV2, MaxPoolGrad, MaxPoolGradV2, MaxPoolWithArgmax). TensorFlow's 3-D
kernels never propagate NaNs, whatever the variable says. Each setting runs in a fresh process,
since kernels read the variable when they are built."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

PROBE = r"""
import json, os
import numpy as np
import tensorflow as tf

nan = np.nan
results = {}

def on(device, fn, *args):
    with tf.device(device):
        out = fn(*[tf.constant(a) for a in args])
    outs = out if isinstance(out, (list, tuple)) else [out]
    assert all(o.device.endswith(device[1:]) for o in outs), [o.device for o in outs]
    return [o.numpy().astype(np.float64).tolist() for o in outs]

def grad_of(pool):
    def gradient(t, w):
        with tf.GradientTape() as tape:
            tape.watch(t)
            y = pool(t)
        return tape.gradient(y, t, output_gradients=w)
    return gradient

attrs = dict(ksize=[1, 2, 2, 1], strides=[1, 1, 1, 1], padding="VALID")
all_nan = np.full((1, 4, 4, 1), nan, np.float32)
dy = np.array([11, 12, 13, 15, 16, 17, 19, 20, 21], np.float32).reshape(1, 3, 3, 1)
dy_nan = dy.copy()
dy_nan.ravel()[[0, 4, 8]] = nan
for name, grad in [("tf_nans_2_1", dy), ("tf_nans_2_2", dy_nan)]:
    results[name] = on("/GPU:0", lambda a, b, c: tf.raw_ops.MaxPoolGrad(
        orig_input=a, orig_output=b, grad=c, **attrs), all_nan, dy, grad)[0]
    results[name + "_v2"] = on("/GPU:0", lambda a, b, c: tf.raw_ops.MaxPoolGradV2(
        orig_input=a, orig_output=b, grad=c, ksize=tf.constant(attrs["ksize"]),
        strides=tf.constant(attrs["strides"]), padding="VALID"), all_nan, dy, grad)[0]

rng = np.random.default_rng(3)
x = rng.integers(-3, 4, size=(2, 7, 6, 3)).astype(np.float32)
x[rng.uniform(size=x.shape) < 0.2] = nan
x[0, :3, :3, 0] = nan  # some windows of NaNs only
w = rng.uniform(-2, 2, size=(2, 4, 3, 3)).astype(np.float32)
results["x"] = x.tolist()
results["w"] = w.tolist()
pool = lambda t: tf.nn.max_pool2d(t, 3, 2, "SAME")
pool_v2 = lambda t: tf.raw_ops.MaxPoolV2(input=t, ksize=tf.constant([1, 3, 3, 1]),
                                         strides=tf.constant([1, 2, 2, 1]), padding="SAME")
to_nchw = lambda a: np.transpose(a, (0, 3, 1, 2))
to_nhwc = lambda a: np.transpose(np.asarray(a), (0, 2, 3, 1)).tolist()
pool_nchw = lambda t: tf.nn.max_pool2d(t, 3, 2, "SAME", data_format="NCHW")
results["forward"] = on("/GPU:0", pool, x)[0]
results["forward_v2"] = on("/GPU:0", pool_v2, x)[0]
results["forward_nchw"] = to_nhwc(on("/GPU:0", pool_nchw, to_nchw(x))[0])
results["forward_cpu"] = on("/CPU:0", pool, x)[0]
results["gradient"] = on("/GPU:0", grad_of(pool), x, w)[0]
results["gradient_v2"] = on("/GPU:0", grad_of(pool_v2), x, w)[0]
results["gradient_nchw"] = to_nhwc(on("/GPU:0", grad_of(pool_nchw), to_nchw(x), to_nchw(w))[0])
with_argmax = lambda t: tf.nn.max_pool_with_argmax(t, 3, 2, "SAME")
results["argmax"] = on("/GPU:0", with_argmax, x)
results["argmax_cpu"] = on("/CPU:0", with_argmax, x)

x3 = rng.integers(-3, 4, size=(1, 4, 5, 4, 2)).astype(np.float32)
x3[rng.uniform(size=x3.shape) < 0.2] = nan
w3 = rng.uniform(-2, 2, size=(1, 2, 3, 2, 2)).astype(np.float32)
pool3 = lambda t: tf.nn.max_pool3d(t, 2, 2, "SAME")
results["forward_3d"] = on("/GPU:0", pool3, x3)[0]
results["forward_3d_cpu"] = on("/CPU:0", pool3, x3)[0]
results["gradient_3d"] = on("/GPU:0", grad_of(pool3), x3, w3)[0]

# A value TensorFlow cannot parse (its kernel would abort the process): the kernel built now
# (new attributes, so a new kernel) fails instead.
os.environ["TF_ENABLE_MAXPOOL_NANPROP"] = "maybe"
try:
    on("/GPU:0", lambda t: tf.nn.max_pool2d(t, [1, 5], 1, "VALID"), x)
    results["bad_value"] = "no error"
except tf.errors.OpError as e:
    results["bad_value"] = type(e).__name__ + ": " + e.message
print("RESULT " + json.dumps(results))
"""

LOWEST = float(np.finfo(np.float32).min)


def probe(value):
    """Runs PROBE in a fresh interpreter with TF_ENABLE_MAXPOOL_NANPROP set to `value` (None:
    unset) and returns its results."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("VGPU_") and k not in ("TF_PLUGGABLE_DEVICE_LIBRARY_PATH",
                                                      "TF_ENABLE_MAXPOOL_NANPROP")}
    if value is not None:
        env["TF_ENABLE_MAXPOOL_NANPROP"] = value
    result = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                            text=True, timeout=180, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    line = [l for l in result.stdout.splitlines() if l.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def results():
    # One child per setting, shared by this module's tests.
    return {"unset": probe(None), "0": probe("0"), "true": probe("TRUE")}


def windows(shape, k=3, s=2):
    """(b, oh, ow, c, [(h, w) of the window in row-major order]) of SAME pooling."""
    n, h, w, c = shape
    out_h, out_w = -(-h // s), -(-w // s)
    pad_h = max(0, (out_h - 1) * s + k - h) // 2
    pad_w = max(0, (out_w - 1) * s + k - w) // 2
    for b in range(n):
        for oh in range(out_h):
            for ow in range(out_w):
                cells = [(i, j) for i in range(oh * s - pad_h, oh * s - pad_h + k)
                         for j in range(ow * s - pad_w, ow * s - pad_w + k)
                         if 0 <= i < h and 0 <= j < w]
                for ch in range(c):
                    yield b, oh, ow, ch, cells


def reference(x, w, propagate):
    """Max pooling (3x3, stride 2, SAME) and its gradient with the virtual GPU's NaN rules."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    y = np.zeros(w.shape, np.float32)
    dx = np.zeros(x.shape, np.float32)  # float32 sums, in row-major output order
    for b, oh, ow, c, cells in windows(x.shape):
        values = [x[b, i, j, c] for i, j in cells]
        nans = [k for k, v in enumerate(values) if np.isnan(v)]
        finite = [k for k, v in enumerate(values) if not np.isnan(v)]
        if propagate and nans:
            y[b, oh, ow, c], target = np.nan, nans[0]
        elif finite:
            best = max(values[k] for k in finite)
            y[b, oh, ow, c] = max(best, LOWEST)
            target = next(k for k in finite if values[k] == best)
        else:
            y[b, oh, ow, c], target = LOWEST, None
        if target is not None:
            i, j = cells[target]
            dx[b, i, j, c] += w[b, oh, ow, c]
    return y, dx


TF_NANS_CPU = [11.0, 12.0, 13.0, 0.0, 15.0, 16.0, 17.0, 0.0, 19.0, 20.0, 21.0, 0.0,
               0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize("setting", ["unset", "0"])
def test_without_nan_propagation_a_window_of_nans_routes_no_gradient(results, setting):
    # TensorFlow's testMaxPoolGradDirectWithNans2_1 / 2_2, GPU with TF_ENABLE_MAXPOOL_NANPROP=0.
    for name in ("tf_nans_2_1", "tf_nans_2_1_v2", "tf_nans_2_2", "tf_nans_2_2_v2"):
        np.testing.assert_array_equal(np.ravel(results[setting][name]), np.zeros(16))


def test_with_nan_propagation_the_first_nan_of_a_window_takes_the_gradient(results):
    # TensorFlow's testMaxPoolGradDirectWithNans2_1 / 2_2, GPU with TF_ENABLE_MAXPOOL_NANPROP=1.
    r = results["true"]
    for name in ("tf_nans_2_1", "tf_nans_2_1_v2"):
        np.testing.assert_array_equal(np.ravel(r[name]), TF_NANS_CPU)
    expected = np.array(TF_NANS_CPU)
    expected[[0, 5, 10]] = np.nan
    for name in ("tf_nans_2_2", "tf_nans_2_2_v2"):
        np.testing.assert_array_equal(np.ravel(r[name]), expected)


@pytest.mark.parametrize("setting,propagate", [("unset", False), ("0", False), ("true", True)])
def test_max_pool_and_its_gradient_follow_the_nan_setting(results, setting, propagate):
    r = results[setting]
    y, dx = reference(r["x"], r["w"], propagate)
    for name in ("forward", "forward_v2", "forward_nchw"):
        np.testing.assert_array_equal(r[name], y, err_msg=name)
    for name in ("gradient", "gradient_v2", "gradient_nchw"):
        np.testing.assert_array_equal(r[name], dx, err_msg=name)
    if not propagate:  # then the forward pass is TensorFlow's CPU kernel's
        np.testing.assert_array_equal(r["forward"], r["forward_cpu"])


def test_max_pool_with_argmax_takes_the_first_nan_with_propagation(results):
    x = np.asarray(results["true"]["x"])
    y, argmax = (np.asarray(a) for a in results["true"]["argmax"])
    cpu_y, cpu_argmax = (np.asarray(a) for a in results["true"]["argmax_cpu"])
    checked = 0
    for b, oh, ow, c, cells in windows(x.shape):
        values = [x[b, i, j, c] for i, j in cells]
        if any(np.isnan(values)):
            i, j = cells[int(np.argmax(np.isnan(values)))]
            assert np.isnan(y[b, oh, ow, c])
            assert argmax[b, oh, ow, c] == (i * x.shape[2] + j) * x.shape[3] + c
            checked += 1
        else:
            assert y[b, oh, ow, c] == cpu_y[b, oh, ow, c]
            assert argmax[b, oh, ow, c] == cpu_argmax[b, oh, ow, c]
    assert checked > 10


@pytest.mark.parametrize("setting", ["unset", "0"])
def test_max_pool_with_argmax_without_propagation_is_the_cpus(results, setting):
    r = results[setting]
    np.testing.assert_array_equal(r["argmax"][0], r["argmax_cpu"][0])
    np.testing.assert_array_equal(r["argmax"][1], r["argmax_cpu"][1])


@pytest.mark.parametrize("setting", ["unset", "0", "true"])
def test_3d_max_pooling_never_propagates_nans(results, setting):
    r = results[setting]
    np.testing.assert_array_equal(r["forward_3d"], r["forward_3d_cpu"])
    assert not np.isnan(r["forward_3d"]).any()
    assert not np.isnan(r["gradient_3d"]).any()
    finite = results["unset"]["gradient_3d"]
    np.testing.assert_array_equal(r["gradient_3d"], finite)


def test_an_unparsable_setting_fails_the_kernel_instead_of_the_process(results):
    error = results["true"]["bad_value"]
    assert error.startswith("InvalidArgumentError: "), error
    assert "Failed to parse the env-var ${TF_ENABLE_MAXPOOL_NANPROP} into bool: maybe" in error
