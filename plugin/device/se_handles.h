// The plugin's definitions of the opaque handles of TensorFlow's StreamExecutor C API. Op
// kernels reach the client runtime through them (TF_GetStream returns an SP_Stream).
#ifndef VGPU_DEVICE_SE_HANDLES_H_
#define VGPU_DEVICE_SE_HANDLES_H_

#include <memory>

#include "plugin/client/device_client.h"
#include "tensorflow/c/experimental/stream_executor/stream_executor.h"

struct SP_Stream_st {
  std::unique_ptr<vgpu::ClientStream> stream;
};

struct SP_Event_st {
  vgpu::DeviceClient* device;
  std::shared_ptr<vgpu::ClientEvent> event;
};

struct SP_Timer_st {
  std::shared_ptr<vgpu::ClientTimer> timer;
};

namespace vgpu {

// The device-memory address held in an SP_DeviceMemoryBase.
inline uint64_t DeviceAddress(const SP_DeviceMemoryBase* memory) {
  return reinterpret_cast<uint64_t>(memory->opaque);
}

}  // namespace vgpu

#endif  // VGPU_DEVICE_SE_HANDLES_H_
