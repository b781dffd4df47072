// A launch for the tests of the launch layer's readers (backend/launch/*_launch.h): a number of
// buffers with nothing behind them (readers only count buffers; taking them is the executors'
// part) and the parameter block the test writes.
//
//   ParamOnlyLaunch launch(2);
//   launch.Params().Put<uint32_t>(4).PutArray<int64_t>(dims);
//   absl::StatusOr<BufferCopy> copy = ReadTransposeLaunch(launch.View());
#ifndef VGPU_TESTS_CPP_PARAM_ONLY_LAUNCH_H_
#define VGPU_TESTS_CPP_PARAM_ONLY_LAUNCH_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "plugin/backend/launch/launch_view.h"
#include "plugin/protocol/launch_params.h"

namespace vgpu {

class ParamOnlyLaunch {
 public:
  explicit ParamOnlyLaunch(size_t buffer_count)
      : pointers_(buffer_count, nullptr), sizes_(buffer_count, 0) {}
  // A launch of `buffer_count` buffers whose parameter block is `params`.
  ParamOnlyLaunch(size_t buffer_count, ParamBlock params) : ParamOnlyLaunch(buffer_count) {
    params_ = std::move(params);
  }

  // A launch of `buffer_count` buffers whose parameter block holds `params` (one kernel's
  // parameter struct).
  template <typename Params>
  static ParamOnlyLaunch Of(size_t buffer_count, const Params& params) {
    ParamOnlyLaunch launch(buffer_count);
    launch.Params().Put(params);
    return launch;
  }

  // What `read` (a launch reader, e.g. ReadGatherLaunch) makes of a launch of `buffer_count`
  // buffers whose parameter block holds `params`.
  template <typename Reader, typename Params>
  static auto Read(Reader read, size_t buffer_count, const Params& params) {
    return read(Of(buffer_count, params).View());
  }

  // A writer appending to the launch's parameter block.
  ParamWriter Params() { return ParamWriter(&params_); }

  // The launch as a reader sees it; borrows this object.
  LaunchView View() const { return LaunchView{pointers_, sizes_, params_}; }

 private:
  std::vector<uint8_t*> pointers_;
  std::vector<uint64_t> sizes_;
  ParamBlock params_;
};

}  // namespace vgpu

#endif  // VGPU_TESTS_CPP_PARAM_ONLY_LAUNCH_H_
