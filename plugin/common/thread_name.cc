// NameCurrentThread (see thread_name.h).
#include "plugin/common/thread_name.h"

#include <pthread.h>

#include <string>

namespace vgpu {

void NameCurrentThread(std::string_view name) {
  constexpr size_t kLinuxNameLimit = 15;  // 16 bytes with the terminating NUL
  const std::string cut(name.substr(0, kLinuxNameLimit));
#if defined(__linux__)
  pthread_setname_np(pthread_self(), cut.c_str());
#endif
}

}  // namespace vgpu
