// Kernel ids and launch layouts of the element-wise family (ids 200-299): the op-tensor kernels
// (cudnnOpTensor-like binary and unary operations with numpy-style broadcasting), select, cast,
// add-n, fill and set-tensor.
//
// Broadcasting: a kernel that broadcasts receives one tensor descriptor per input and one for
// the output. Every input's rank is at most the output's; an input of lower rank is aligned to
// the output's trailing dimensions (numpy rules), and each of its dimensions equals the output's
// or is 1. The client usually sends shapes with adjacent dimensions already merged where every
// input broadcasts alike, but the kernel accepts any such shapes. All buffers are dense,
// row-major, with the descriptors' element counts.
#ifndef VGPU_PROTOCOL_KERNELS_ELEMENTWISE_H_
#define VGPU_PROTOCOL_KERNELS_ELEMENTWISE_H_

#include <cstdint>

#include "plugin/protocol/kernel_ids.h"

namespace vgpu::elementwise {

// descriptors: [op-tensor, tensor a, tensor b, tensor out]; buffers: [a, b, out]; params: none.
// out = a <op> b for a binary ElementwiseOp, with broadcasting. a and b have the op-tensor's
// dtype; out has it too, except for comparisons (kEqual ... kLessEqual), whose out is bool.
// The logical ops take and give bool. out may alias an input of the output's element count.
// Gradient helpers take TensorFlow's order: kRsqrtGrad/kSqrtGrad/kReciprocalGrad: a = y, b = dy.
// Floating-only ops: kAtan2 (a = y, b = x), kXlogy, kXdivy, kXlog1py (0 wherever a == 0).
// Integer kDiv/kFloorDiv/kFloorMod fail with InvalidArgument "Integer division by zero" when
// any divisor is 0, integer kPow with "Integers to negative integer powers are not allowed"
// when any exponent is negative (the output is then unspecified, the process unharmed).
inline constexpr KernelId kBinary = KernelId{200};

// descriptors: [op-tensor, tensor (x and y share it)]; buffers: [x, y]; params: none.
// y = <op>(x) for a unary ElementwiseOp (kNeg ... kSignBit); kLogicalNot takes and gives bool;
// kIsFinite, kIsNan, kIsInf and kSignBit take a floating x and give a bool y of x's element
// count. The
// math functions from kErf on take floating dtypes only.
inline constexpr KernelId kUnary = KernelId{201};

// descriptors: [tensor condition (bool), tensor then, tensor else, tensor out];
// buffers: [condition, then, else, out]; params: none.
// out = condition ? then : else, element-wise with broadcasting of all three (SelectV2).
inline constexpr KernelId kSelect = KernelId{202};

// descriptors: [tensor x, tensor y] (same element count; x's dtype is the source type, y's the
// destination type); buffers: [x, y]; params: uint8 truncate.
// y = cast(x) with TensorFlow's CPU conversions: floating to integer truncates toward zero,
// anything to bool is x != 0, bool to anything is 0 or 1. With truncate != 0 the conversions
// float64->float32, float64->float16, float32->float16 and float32->bfloat16 first zero the
// source mantissa bits the destination lacks (TensorFlow's Cast attribute Truncate).
inline constexpr KernelId kCast = KernelId{203};

// descriptors: [tensor] (every input and the output have its shape and dtype);
// buffers: [input 0, ..., input n-1, out] with n >= 2; params: none.
// out = input 0 + ... + input n-1, summed in TensorFlow's AddN order so that floating results
// round exactly as TensorFlow's CPU kernel does. out may alias input 0.
inline constexpr KernelId kAddN = KernelId{204};

// descriptors: [tensor out]; buffers: [value (one element of out's dtype), out]; params: none.
// Every element of out = value (TensorFlow's Fill; the value stays in device memory).
inline constexpr KernelId kFill = KernelId{205};

// descriptors: [tensor out]; buffers: [out]; params: float64 value.
// Every element of out = value converted to out's dtype (cudnnSetTensor; ZerosLike/OnesLike).
inline constexpr KernelId kSetTensor = KernelId{206};

// descriptors: [tensor out (rank 1)]; buffers: [out]; params: uint64 start, uint64 delta (each
// holds the value's bytes of out's dtype in its low DTypeSize bytes; floating dtypes, int32,
// int64). out[i] = start + T(i) * delta, evaluated in out's dtype T as TensorFlow's CPU kernel
// does (Range).
inline constexpr KernelId kRange = KernelId{207};

}  // namespace vgpu::elementwise

#endif  // VGPU_PROTOCOL_KERNELS_ELEMENTWISE_H_
