"""Keras layers of the convolution family train on the virtual GPU as on TensorFlow's CPU, with
every heavy op of their train step on the device: Conv1D, Conv2D(groups=2), Conv3D,
Conv2DTranspose, Conv3DTranspose, SeparableConv2D, DepthwiseConv2D and MultiHeadAttention
(keras_layers_probe.py trains them in child processes, one on each device)."""
import os
import re
import sys

import numpy as np
import pytest

PROBE = os.path.join(os.path.dirname(__file__), "keras_layers_probe.py")
MODELS = ["conv1d", "conv2d_groups", "conv3d", "conv2d_transpose", "conv3d_transpose",
          "separable_conv2d", "depthwise_conv2d", "multi_head_attention"]

# Ops the train step may leave on the CPU: constants, identities and int32 shape arithmetic.
ALLOWED_ON_CPU = {"Const", "Identity", "Prod", "Shape", "ShapeN", "NoOp"}


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Runs the probe on the CPU, then on the virtual GPU from the same initial weights;
    returns (cpu results, gpu results, the GPU child's log)."""
    import subprocess

    tmp = tmp_path_factory.mktemp("keras_layers")
    cpu_path, gpu_path = str(tmp / "cpu.npz"), str(tmp / "gpu.npz")
    env = {k: v for k, v in os.environ.items() if not k.startswith("VGPU_")}
    env.pop("TF_PLUGGABLE_DEVICE_LIBRARY_PATH", None)
    env.update(VGPU_DEVICE_COUNT="1", TF_CPP_MIN_LOG_LEVEL="0")
    runs = {}
    for device, args in (("cpu", [cpu_path]), ("gpu", [gpu_path, cpu_path])):
        result = subprocess.run([sys.executable, PROBE, device, *args], env=env,
                                capture_output=True, text=True, timeout=600, check=False)
        assert result.returncode == 0 and "PROBE DONE" in result.stdout, result.stderr[-3000:]
        runs[device] = result
    return np.load(cpu_path), np.load(gpu_path), runs["gpu"].stdout + runs["gpu"].stderr


@pytest.mark.parametrize("model", MODELS)
def test_keras_layer_trains_on_the_virtual_gpu_like_on_the_cpu(trained, model):
    cpu, gpu, _ = trained
    np.testing.assert_allclose(gpu[f"{model}/losses"], cpu[f"{model}/losses"], rtol=1e-4,
                               atol=1e-5)
    trained_keys = sorted(k for k in cpu.files if k.startswith(f"{model}/trained/"))
    assert trained_keys
    for key in trained_keys:
        np.testing.assert_allclose(gpu[key], cpu[key], rtol=1e-3, atol=1e-4, err_msg=key)


def test_train_steps_of_the_layers_run_their_heavy_ops_on_the_virtual_gpu(trained):
    _, _, log = trained
    # Placement lines of the train step: "<node>: (<Op>): /job:localhost/.../device:<D>:0".
    placed = re.findall(
        r"^(\S*StatefulPartitionedCall/\S*): \((\w+)\): /job:localhost/replica:0/task:0/"
        r"device:(\w+):\d", log, flags=re.MULTILINE)
    assert placed, "no placement log found"
    on_cpu = sorted({op for _, op, device in placed if device == "CPU"} - ALLOWED_ON_CPU)
    assert not on_cpu, f"ops of the train step placed on the CPU: {on_cpu}"
    on_gpu = {op for _, op, device in placed if device == "GPU"}
    assert {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
            "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "DepthwiseConv2dNative",
            "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
            "Einsum"} <= on_gpu
