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

// What a remote transport wrote, counted where it writes.
struct WireCounters {
  uint64_t frames = 0;           // frames written after the handshake (a batch counts once)
  uint64_t bytes = 0;            // their bytes, headers included
  uint64_t host_data_bytes = 0;  // of which host-to-device data carried in the frames
  uint64_t templates_created = 0;     // launch templates defined (wire_format.h)
  uint64_t launches_by_template = 0;  // launches sent as a template id plus bindings

  WireCounters& operator+=(const WireCounters& other) {
    frames += other.frames;
    bytes += other.bytes;
    host_data_bytes += other.host_data_bytes;
    templates_created += other.templates_created;
    launches_by_template += other.launches_by_template;
    return *this;
  }
  WireCounters& operator-=(const WireCounters& other) {
    frames -= other.frames;
    bytes -= other.bytes;
    host_data_bytes -= other.host_data_bytes;
    templates_created -= other.templates_created;
    launches_by_template -= other.launches_by_template;
    return *this;
  }
};

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

  // What went over the wire to a remote backend so far (all zero in process, where nothing
  // does). Thread-safe.
  virtual WireCounters wire_counters() const { return {}; }

  // True when notifications reach the CompletionSink on the backing executor's stream worker
  // (in-process: a handler run inline occupies the stream). False when they arrive on a
  // transport's reader thread, where a handler that waits for a reply would deadlock the reader:
  // host callbacks must then run on the hub's callback thread.
  virtual bool DeliversNotificationsInline() const { return true; }
  // True while the connection to the backend is lost and no new session replaced it: the
  // loss must then be reported by synchronisations, which go to the transport for it
  // (DeviceClient answers a synchronisation locally only while this is false). Thread-safe.
  virtual bool Lost() const { return false; }
  // True when Post has taken a host-to-device copy's bytes by the time it returns (written to
  // the socket or to shared memory), so that the source may be reused at once. False in
  // process, where the stream reads the source when it reaches the copy.
  virtual bool CapturesHostDataWhenPosted() const { return false; }
};

}  // namespace vgpu

#endif  // VGPU_TRANSPORT_TRANSPORT_H_
