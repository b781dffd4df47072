/* The plugin's own small C API, exported beside SE_InitPlugin and TF_InitKernel so that the
 * Python package (vgpu._core) can read counters and configuration from the plugin instance
 * TensorFlow loaded. Strings are JSON; the caller provides the buffer. */
#ifndef VGPU_C_API_VGPU_C_API_H_
#define VGPU_C_API_VGPU_C_API_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a function's contract changes; vgpu._core refuses a plugin of another version. */
#define VGPU_C_API_VERSION 3
int VGPU_ApiVersion(void);

/* Each writes a NUL-terminated JSON document into `buffer` (truncated to `capacity` - 1 bytes)
 * and returns its full length without the NUL; call again with a larger buffer if the result is
 * >= capacity. Thread-safe. */
size_t VGPU_StatsJson(char* buffer, size_t capacity);
size_t VGPU_InfoJson(char* buffer, size_t capacity);
/* The op catalog: every op the plugin registered kernels for, with dtypes, host-memory
 * arguments, data formats and notes (plugin/kernels/op_catalog.h). */
size_t VGPU_OpCatalogJson(char* buffer, size_t capacity);

/* Zeroes the counters of every device (memory in use is kept). Thread-safe. */
void VGPU_ResetStats(void);

/* Marks the end of a training step on every device (descriptor reuse starts after the first
 * completed step). Thread-safe. */
void VGPU_MarkStep(void);

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif  /* VGPU_C_API_VGPU_C_API_H_ */
