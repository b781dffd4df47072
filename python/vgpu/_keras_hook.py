"""Makes unmodified Keras 3 training, and tf.function code written for CUDA GPUs, work on the
virtual GPU.

XLA has no compiler for a pluggable platform: a function compiled with XLA fails on the virtual
GPU with "Could not find compiler for platform VGPU". This hook, installed at interpreter start
by ``tensorflow_vgpu.pth``, waits for the modules it adapts to be imported and then:

* ``tf.function(jit_compile=True)`` (TensorFlow's polymorphic_function module): while a virtual
  GPU is visible, the function is traced and run without XLA, op by op on the device (the same
  results; a warning is logged once per process), where it would otherwise fail at its first
  call. Keras' ``compile(jit_compile=True)`` goes through it too;
* Keras' ``jit_compile="auto"`` resolves to False while a virtual GPU is visible (as Keras
  already does on CPU-only machines), so ``model.jit_compile`` says what happens.

It also waits for Keras' TensorFlow backend ops (``keras.src.backend.tensorflow.nn``): Keras
compiles grouped convolutions and channels-first 3-D ones with XLA there (TensorFlow's CPU
kernels lack them), which would fail the same way; the virtual GPU runs them natively, so
while one is visible they run as plain ``tf.nn.convolution``.

When Keras' TensorFlow RNN backend loads, the hook also adapts its cuDNN GRU path: Keras only
swaps its update/reset gate blocks ([z, r, h]) into cuDNN's order ([r, z, h]) on CUDA builds of
TensorFlow, but the virtual GPU's CudnnRNN ops have cuDNN's semantics on tensorflow-cpu too. While
a virtual GPU is visible (and TensorFlow is not a CUDA build), ``_cudnn_gru`` receives its kernel,
recurrent kernel and bias with gate blocks 0 and 1 swapped, so Keras GRU layers compute on the
virtual GPU what they compute on the CPU.

When Keras' Adam optimizer loads (``keras.src.optimizers.adam``; AdamW inherits its step), the
hook gives it a fused update step for a float32 or float64 variable on the virtual GPU outside
a distribution strategy: Keras computes the step size as always, and the plugin's
``_VgpuApplyKerasAdam`` op updates the moments and the variable in one launch, each operation
rounded as Keras' own twelve element-wise ops and three assignments round it (results equal to
the unfused step's bit for bit). ``VGPU_FUSED_ADAM=0`` keeps Keras' own step.

It never imports TensorFlow or Keras itself and does nothing until they are imported. Set
``VGPU_KERAS_HOOK=0`` to switch it off.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import weakref

_TRAINER_MODULE = "keras.src.trainers.trainer"
_RNN_MODULE = "keras.src.backend.tensorflow.rnn"
_BACKEND_NN_MODULE = "keras.src.backend.tensorflow.nn"
_ADAM_MODULE = "keras.src.optimizers.adam"

_TF_FUNCTION_MODULE = "tensorflow.python.eager.polymorphic_function.polymorphic_function"

JIT_WARNING = (
    "tensorflow-vgpu: jit_compile=True is ignored while a virtual GPU is visible (XLA has no "
    "compiler for the VGPU platform): the function runs op by op, with the same results."
)


def virtual_gpu_visible() -> bool:
    """True when TensorFlow has a visible virtual GPU (imports nothing new: only asked once
    Keras, and so TensorFlow, are already loaded)."""
    try:
        import vgpu  # noqa: PLC0415
        import tensorflow as tf  # noqa: PLC0415

        if not vgpu.is_available():
            return False
        device_type = vgpu.info()["device_type"]
        return bool(tf.config.get_visible_devices(device_type))
    except Exception:  # noqa: BLE001 - the hook must never break Keras
        return False


def patch_trainer(trainer_module) -> None:
    """Wraps Trainer's auto-jit resolution (idempotent)."""
    trainer = trainer_module.Trainer
    if getattr(trainer, "_vgpu_patched", False):
        return
    original_resolve = trainer._resolve_auto_jit_compile

    def _resolve_auto_jit_compile(self):
        if virtual_gpu_visible():
            return False
        return original_resolve(self)

    trainer._resolve_auto_jit_compile = _resolve_auto_jit_compile
    trainer._vgpu_patched = True


_jit_warned = False


def patch_tf_function(module) -> None:
    """Wraps polymorphic_function.Function so that jit_compile=True is dropped (with one
    warning per process) while a virtual GPU is visible (idempotent)."""
    function_class = module.Function
    if getattr(function_class, "_vgpu_patched", False):
        return
    import inspect  # noqa: PLC0415

    original_init = function_class.__init__
    signature = inspect.signature(original_init)

    original_call = function_class.__call__

    def __init__(self, *args, **kwargs):
        bound = signature.bind(self, *args, **kwargs)
        if bound.arguments.get("jit_compile") and virtual_gpu_visible():
            bound.arguments["jit_compile"] = None
            self._vgpu_jit_dropped = True
        original_init(*bound.args, **bound.kwargs)

    def __call__(self, *args, **kwargs):
        # Warned at the first call, not at creation: Keras creates jit-compiled helpers it
        # only calls in some cases (its grouped convolution), on every call of the layer.
        global _jit_warned
        if not _jit_warned and getattr(self, "_vgpu_jit_dropped", False):
            _jit_warned = True
            print(JIT_WARNING, file=sys.stderr)
        return original_call(self, *args, **kwargs)

    function_class.__init__ = __init__
    function_class.__call__ = __call__
    function_class._vgpu_patched = True


def patch_backend_convolution(nn_module) -> None:
    """Wraps the TensorFlow backend's conv so that the convolutions Keras would compile with
    XLA (grouped, channels-first 3-D) run uncompiled while a virtual GPU is visible
    (idempotent)."""
    if getattr(nn_module, "_vgpu_patched", False):
        return
    original_conv = nn_module.conv

    def conv(inputs, kernel, strides=1, padding="valid", data_format=None, dilation_rate=1):
        data_format = nn_module.backend.standardize_data_format(data_format)
        channels = inputs.shape[-1] if data_format == "channels_last" else inputs.shape[1]
        needs_xla = (data_format == "channels_first" and len(inputs.shape) == 5) or (
            channels != kernel.shape[-2])
        if not needs_xla or not virtual_gpu_visible():
            return original_conv(inputs, kernel, strides, padding, data_format, dilation_rate)
        return nn_module.tf.nn.convolution(
            inputs, kernel, strides, padding.upper(),
            data_format=nn_module._convert_data_format(data_format, len(inputs.shape)),
            dilations=dilation_rate)

    nn_module.conv = conv
    nn_module._vgpu_patched = True


def swap_gate_blocks(tensor):
    """`tensor` with blocks 0 and 1 of its last axis (three equal gate blocks) swapped: Keras'
    GRU order [z, r, h] becomes cuDNN's [r, z, h] (and back)."""
    import tensorflow as tf  # noqa: PLC0415 - Keras is loaded, so TensorFlow is

    first, second, third = tf.split(tensor, 3, axis=-1)
    return tf.concat([second, first, third], axis=-1)


_IS_CUDA_BUILD = None


def _keras_orders_gru_gates_itself() -> bool:
    """True when Keras already swaps the GRU gates for cuDNN (a CUDA build of TensorFlow)."""
    global _IS_CUDA_BUILD
    if _IS_CUDA_BUILD is None:
        import tensorflow as tf  # noqa: PLC0415

        _IS_CUDA_BUILD = bool(tf.sysconfig.get_build_info().get("is_cuda_build", False))
    return _IS_CUDA_BUILD


def patch_cudnn_gru(rnn_module) -> None:
    """Wraps the module's `_cudnn_gru` so that its weights arrive in cuDNN's gate order while a
    virtual GPU is visible (idempotent). Gradients flow back through the swap."""
    original = rnn_module._cudnn_gru
    if getattr(original, "_vgpu_patched", False):
        return

    def _cudnn_gru(inputs, initial_state, kernel, recurrent_kernel, bias, *args, **kwargs):
        if virtual_gpu_visible() and not _keras_orders_gru_gates_itself():
            kernel = swap_gate_blocks(kernel)
            recurrent_kernel = swap_gate_blocks(recurrent_kernel)
            bias = swap_gate_blocks(bias)
        return original(inputs, initial_state, kernel, recurrent_kernel, bias, *args, **kwargs)

    _cudnn_gru._vgpu_patched = True
    _cudnn_gru.__wrapped__ = original
    rnn_module._cudnn_gru = _cudnn_gru


def _on_virtual_gpu(device: str) -> bool:
    """Whether a variable placed on `device` (a TensorFlow device string) is on a virtual GPU."""
    if not device:
        return False
    import tensorflow as tf  # noqa: PLC0415 - Keras is loaded, so TensorFlow is
    import vgpu  # noqa: PLC0415

    try:
        device_type = tf.DeviceSpec.from_string(device).device_type
        return device_type == vgpu.info()["device_type"] and virtual_gpu_visible()
    except Exception:  # noqa: BLE001 - undecidable: Keras' own step
        return False


def fused_adam_applies(optimizer, gradient, variable) -> bool:
    """Whether Adam's update of `variable` by `gradient` can be the fused op: the TensorFlow
    backend, no AMSGrad, a dense gradient, a float32 or float64 tf.Variable on a virtual GPU,
    no distribution strategy (its variables update per replica through Keras' own path), and
    VGPU_FUSED_ADAM not 0."""
    if os.environ.get("VGPU_FUSED_ADAM", "1") == "0" or optimizer.amsgrad:
        return False
    import tensorflow as tf  # noqa: PLC0415
    from keras.src import backend  # noqa: PLC0415

    if backend.backend() != "tensorflow" or tf.distribute.has_strategy():
        return False
    if not isinstance(variable, tf.Variable) or not isinstance(gradient, tf.Tensor):
        return False
    if tf.as_dtype(variable.dtype) not in (tf.float32, tf.float64):
        return False
    return _on_virtual_gpu(variable.device)


def apply_keras_adam(var, m, v, alpha, one_minus_beta1, one_minus_beta2, epsilon, grad):
    """Runs the plugin's _VgpuApplyKerasAdam op (eagerly or into the current graph)."""
    import tensorflow as tf  # noqa: PLC0415
    from tensorflow.python.eager import context, execute  # noqa: PLC0415
    from tensorflow.python.framework import op_def_library  # noqa: PLC0415

    scalars = (alpha, one_minus_beta1, one_minus_beta2, epsilon, grad)
    if tf.executing_eagerly():
        execute.execute(b"_VgpuApplyKerasAdam", 0, inputs=[var, m, v, *scalars],
                        attrs=("T", grad.dtype.as_datatype_enum, "use_locking", False),
                        ctx=context.context())
        return None
    return op_def_library._apply_op_helper(  # noqa: SLF001 - how ops without a wrapper are made
        "_VgpuApplyKerasAdam", var=var, m=m, v=v, alpha=alpha, one_minus_beta1=one_minus_beta1,
        one_minus_beta2=one_minus_beta2, epsilon=epsilon, grad=grad, use_locking=False)


# Per traced graph (dropped with it): {(id(optimizer), dtype): (learning_rate, step size)}.
_ADAM_STEP_SIZES = weakref.WeakKeyDictionary()


def patch_adam(adam_module) -> None:
    """Gives Keras' Adam (and so AdamW) the fused update step where fused_adam_applies
    (idempotent)."""
    adam = adam_module.Adam
    if getattr(adam, "_vgpu_patched", False):
        return
    original_update_step = adam.update_step
    ops = adam_module.ops

    def update_step(self, gradient, variable, learning_rate):
        if not fused_adam_applies(self, gradient, variable):
            return original_update_step(self, gradient, variable, learning_rate)
        dtype = variable.dtype
        gradient = ops.cast(gradient, dtype)
        index = self._get_variable_index(variable)
        apply_keras_adam(
            variable.handle, self._momentums[index].value.handle,
            self._velocities[index].value.handle, _adam_step_size(self, learning_rate, dtype),
            # Keras' element-wise ops convert these Python floats straight to the dtype.
            ops.convert_to_tensor(1 - self.beta_1, dtype),
            ops.convert_to_tensor(1 - self.beta_2, dtype),
            ops.convert_to_tensor(self.epsilon, dtype), gradient)
        return None

    def _adam_step_size(self, learning_rate, dtype):
        """Keras' step size, lr * sqrt(1 - beta_2^t) / (1 - beta_1^t), op for op as Keras computes
        it. Keras computes it again for every variable of a step (seven scalar launches each);
        in a traced step it is the same value for every variable of one dtype (one learning-rate
        tensor, one read of the iteration count before apply() increments it), so it is made
        once per graph, optimizer, dtype and learning-rate tensor."""
        import tensorflow as tf  # noqa: PLC0415

        cache = None
        if not tf.executing_eagerly():
            cache = _ADAM_STEP_SIZES.setdefault(tf.compat.v1.get_default_graph(), {})
            cached = cache.get((id(self), dtype))
            if cached is not None and cached[0] is learning_rate:
                return cached[1]
        lr = ops.cast(learning_rate, dtype)
        local_step = ops.cast(self.iterations + 1, dtype)
        beta_1_power = ops.power(ops.cast(self.beta_1, dtype), local_step)
        beta_2_power = ops.power(ops.cast(self.beta_2, dtype), local_step)
        alpha = lr * ops.sqrt(1 - beta_2_power) / (1 - beta_1_power)
        if cache is not None:
            cache[(id(self), dtype)] = (learning_rate, alpha)
        return alpha

    update_step.__wrapped__ = original_update_step
    adam.update_step = update_step
    adam._vgpu_patched = True


# The modules the hook adapts, and how.
_PATCHES = {
    _TF_FUNCTION_MODULE: patch_tf_function,
    _TRAINER_MODULE: patch_trainer,
    _BACKEND_NN_MODULE: patch_backend_convolution,
    _RNN_MODULE: patch_cudnn_gru,
    _ADAM_MODULE: patch_adam,
}


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, wrapped, patch):
        self._wrapped = wrapped
        self._patch = patch

    def create_module(self, spec):
        return self._wrapped.create_module(spec)

    def exec_module(self, module):
        self._wrapped.exec_module(module)
        try:
            self._patch(module)
        except Exception as error:  # noqa: BLE001 - never break Keras' import
            print(f"vgpu warning: could not adapt Keras for the virtual GPU: {error}",
                  file=sys.stderr)


class _KerasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, patch)
        return spec


def install() -> None:
    """Installs the import hook (called from tensorflow_vgpu.pth at interpreter start)."""
    if os.environ.get("VGPU_KERAS_HOOK", "1") == "0":
        return
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    if all(name in sys.modules for name in _PATCHES):
        return
    if not any(isinstance(f, _KerasFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _KerasFinder())
