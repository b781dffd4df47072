// The zero-cost transport: hands commands to a backing-executor session in the same process.
// Posting and calling differ only in whether the caller looks at the reply, so in-process runs
// count commands and round trips exactly as a remote run would.
#ifndef VGPU_TRANSPORT_INPROC_TRANSPORT_H_
#define VGPU_TRANSPORT_INPROC_TRANSPORT_H_

#include <memory>

#include "plugin/backend/executor_session.h"
#include "plugin/transport/transport.h"

namespace vgpu {

class InprocTransport final : public Transport {
 public:
  explicit InprocTransport(std::unique_ptr<ExecutorSession> session)
      : session_(std::move(session)) {}

  absl::Status Post(Command command) override { return session_->Handle(std::move(command)).status; }
  Reply Call(Command command) override { return session_->Handle(std::move(command)); }
  std::string Describe() const override { return "inproc"; }

 private:
  std::unique_ptr<ExecutorSession> session_;
};

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_INPROC_TRANSPORT_H_
