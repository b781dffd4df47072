// The scan, top-k and in-top-k launches of the reduction family (protocol/kernels/reduction.h:
// Cumsum/Cumprod, TopKV2, InTopKV2), read once for every executor: descriptors, parameters and
// buffer sizes, validated as a hostile client could send them, in the order the CPU executor's
// kernels always checked them.
#ifndef VGPU_BACKEND_LAUNCH_SCAN_TOPK_LAUNCH_H_
#define VGPU_BACKEND_LAUNCH_SCAN_TOPK_LAUNCH_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "plugin/backend/launch/host_device.h"
#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/descriptors.h"

namespace vgpu::scan_topk_launch {

// reduction::kScan: descriptors [reduce (kSum or kProd), tensor [outer, n, inner]], buffers
// [x, y], params ScanParams. dtype: floating, int32 or int64 (DispatchSigned).
struct ScanLaunch {
  DType dtype = DType::kFloat32;
  int64_t outer = 0, n = 0, inner = 0, count = 0;
  bool product = false, exclusive = false, reverse = false;

  // Scan line `line` (0 <= line < outer * inner) visits n elements `inner` apart: its visit
  // `step` (0 <= step < n, in scan order: last element first when reverse) is the element at
  // ElementAt(LineStart(line), step). Both executors' scans walk their lines so.
  VGPU_HOST_DEVICE int64_t LineStart(int64_t line) const {
    return line / inner * n * inner + line % inner;
  }
  VGPU_HOST_DEVICE int64_t ElementAt(int64_t line_start, int64_t step) const {
    return line_start + (reverse ? n - 1 - step : step) * inner;
  }
};
absl::StatusOr<ScanLaunch> ReadScanLaunch(const LaunchView& launch);

// reduction::kTopK: descriptors [x [rows, cols], indices [rows, k]], buffers [x, values [rows,
// k], indices]. dtype: floating, int32 or int64 (DispatchSigned); index_dtype: int32 or int64
// (DTypeDispatch::Index).
struct TopKLaunch {
  DType dtype = DType::kFloat32, index_dtype = DType::kInt32;
  int64_t rows = 0, cols = 0, k = 0;
  int64_t x_count = 0, out_count = 0;  // out_count: values' and indices' elements
};
absl::StatusOr<TopKLaunch> ReadTopKLaunch(const LaunchView& launch);

// reduction::kInTopK: descriptors [predictions [batch, classes] (float32), targets [batch]],
// buffers [predictions, targets, out [batch] (bool)], params int64 k. target_dtype: int32 or
// int64 (DTypeDispatch::Index); targets are not range-checked (one outside [0, classes) gives
// false).
struct InTopKLaunch {
  DType target_dtype = DType::kInt32;
  int64_t batch = 0, classes = 0, count = 0, k = 0;
};
absl::StatusOr<InTopKLaunch> ReadInTopKLaunch(const LaunchView& launch);

}  // namespace vgpu::scan_topk_launch

#endif  // VGPU_BACKEND_LAUNCH_SCAN_TOPK_LAUNCH_H_
