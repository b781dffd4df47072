// VGPU_HOST_DEVICE marks the small inline functions of the launch layer's geometry types that
// kernels call inside their loops: __host__ __device__ when CUDA compiles them, nothing for the
// host compiler. Such functions use no std:: algorithm (device code cannot call them).
#ifndef VGPU_BACKEND_LAUNCH_HOST_DEVICE_H_
#define VGPU_BACKEND_LAUNCH_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define VGPU_HOST_DEVICE __host__ __device__
#else
#define VGPU_HOST_DEVICE
#endif

#endif  // VGPU_BACKEND_LAUNCH_HOST_DEVICE_H_
