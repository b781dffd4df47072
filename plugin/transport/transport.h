// How the client runtime reaches a backing executor. A transport carries protocol/command.h
// commands; it does not interpret them. Implementations: in-process (transport/inproc_transport.h);
// remote transports serialise the same commands.
#ifndef VGPU_TRANSPORT_TRANSPORT_H_
#define VGPU_TRANSPORT_TRANSPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "plugin/protocol/command.h"

namespace vgpu {

class Transport {
 public:
  virtual ~Transport() = default;

  // Sends an asynchronous command (IsAsynchronous). Does not wait for its execution; returns an
  // error only if the command could not be accepted (unknown stream, dead connection).
  // Thread-safe; commands posted from one thread arrive in order.
  virtual absl::Status Post(Command command) = 0;

  // Sends a call and blocks until its reply arrives: one round trip. Thread-safe.
  virtual Reply Call(Command command) = 0;

  // "inproc", "unix:///path", ... for logs and `vgpu info`.
  virtual std::string Describe() const = 0;

  // Frames written to a remote backend so far (0 in process, where there are none).
  // Thread-safe.
  virtual uint64_t frames_sent() const { return 0; }

  // True when notifications reach the CompletionSink on the backing executor's stream worker
  // (in-process: a handler run inline occupies the stream). False when they arrive on a
  // transport's reader thread, where a handler that waits for a reply would deadlock the reader:
  // host callbacks must then run on the hub's callback thread.
  virtual bool DeliversNotificationsInline() const { return true; }
};

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_TRANSPORT_H_
