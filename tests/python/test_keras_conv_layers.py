"""Keras layers of the convolution family train on the virtual GPU as on TensorFlow's CPU, with
every heavy op of their train step on the device: Conv1D, Conv2D(groups=2), Conv3D,
Conv2DTranspose, Conv3DTranspose, SeparableConv2D, DepthwiseConv2D and MultiHeadAttention
(keras_layers_probe.py trains them in child processes, one on each device)."""
import numpy as np
import pytest

from placement import ops_on, run_child

MODELS = ["conv1d", "conv2d_groups", "conv3d", "conv2d_transpose", "conv3d_transpose",
          "separable_conv2d", "depthwise_conv2d", "multi_head_attention"]

PROBE = "import keras_layers_probe\nkeras_layers_probe.main(*{args!r})"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Runs the probe on the CPU, then on the virtual GPU (placement log on) from the same
    initial weights; returns (cpu results, gpu results, the GPU child's run)."""
    tmp = tmp_path_factory.mktemp("keras_layers")
    cpu_path, gpu_path = str(tmp / "cpu.npz"), str(tmp / "gpu.npz")
    env = {"VGPU_DEVICE_COUNT": "1"}
    run_child(PROBE.format(args=("cpu", cpu_path)), env=env, timeout=600, log_placement=False)
    gpu = run_child(PROBE.format(args=("gpu", gpu_path, cpu_path)), env=env, timeout=600)
    return np.load(cpu_path), np.load(gpu_path), gpu


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
    _, _, run = trained
    on_cpu = run.off_device()
    assert not on_cpu, "ops of the train step placed on the CPU:\n" + "\n".join(on_cpu)
    on_gpu = ops_on(run.train_step(), "GPU")
    assert {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", "Conv3D",
            "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2", "DepthwiseConv2dNative",
            "DepthwiseConv2dNativeBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
            "Einsum"} <= on_gpu
