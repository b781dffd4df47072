// The client runtime's view of one virtual device: everything the stream executor and the op
// kernels ask of the device becomes commands sent over the device's transport. Calls that need
// an answer (allocation, synchronisation) are round trips; everything stream-ordered is posted
// and returns at once. Event queries and host callbacks are answered locally from the backing
// executor's notifications, so polling an event never costs a round trip.
//
// Device addresses: TensorFlow sees this device's "client addresses" — the backend's addresses
// (backend/device_address.h) with the device field set to the device's ordinal — so that the
// addresses of devices on different backends (several servers, or in-process and a server)
// never alias. Commands carry the backend's own addresses. A copy between devices of different
// backends is staged through this process (CopyDeviceToDevice, CopyNow).
#ifndef VGPU_CLIENT_DEVICE_CLIENT_H_
#define VGPU_CLIENT_DEVICE_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "plugin/client/counters.h"
#include "plugin/client/dnn_api.h"
#include "plugin/client/notification_hub.h"
#include "plugin/client/staging_pool.h"
#include "plugin/protocol/command.h"
#include "plugin/protocol/kernel_ids.h"
#include "plugin/transport/transport.h"

namespace vgpu {

class DeviceClient;

// A stream of one device. Created by DeviceClient::CreateStream; destroy it with
// DeviceClient::DestroyStream (which drains it). Its device must outlive it. Thread-safe.
class ClientStream {
 public:
  ClientStream(DeviceClient* device, uint64_t id) : device_(device), id_(id) {}
  // Leaves its device's list of streams (if DestroyStream did not already).
  ~ClientStream();
  ClientStream(const ClientStream&) = delete;
  ClientStream& operator=(const ClientStream&) = delete;
  DeviceClient& device() const { return *device_; }
  uint64_t id() const { return id_; }

  // Completion tracking (remote backends, or where events complete early; see
  // DeviceClient::SynchronizeDevice and RecordEvent): how many stream-ordered commands were
  // posted on this stream, and how many of the first of them are known to have completed
  // without error. Non-blocking.
  uint64_t posted() const { return posted_.load(std::memory_order_acquire); }
  uint64_t settled() const { return settled_.load(std::memory_order_acquire); }

 private:
  friend class DeviceClient;
  // The `position`-th command posted on the stream completed and the stream had no error then:
  // so did every command before it (a stream runs its commands in order). Non-blocking.
  void Settle(uint64_t position);

  DeviceClient* const device_;
  const uint64_t id_;
  // Host callbacks posted on this stream and those that have finished running.
  std::mutex mu_;
  std::condition_variable cv_;
  uint64_t callbacks_posted_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t callbacks_done_ ABSL_GUARDED_BY(mu_) = 0;
  // Held while a command is posted on the stream (only where completion is tracked), so that
  // posted_ counts the commands in the order the backend receives them.
  std::mutex post_mu_;
  std::atomic<uint64_t> posted_{0};
  std::atomic<uint64_t> settled_{0};
  // The position of the last command posted with a notification, and the last position whose
  // notification came back, OK or not (DeviceClient::AwaitNotifications).
  std::atomic<uint64_t> notification_posted_{0};
  std::atomic<uint64_t> notification_returned_{0};
  // A device of another backend posted on this stream: its synchronisations always go to the
  // backend.
  std::atomic<bool> untracked_{false};
  // Early event completion (DeviceClient::RecordEvent): the position of the last command posted
  // whose completion the host can observe beyond device memory (anything but a host-to-device
  // copy, an event wait or an event recording), and the device's fence sequence up to which
  // this stream's later work is already ordered after the fences of other streams.
  uint64_t last_host_visible_ ABSL_GUARDED_BY(post_mu_) = 0;
  uint64_t fences_ordered_ ABSL_GUARDED_BY(post_mu_) = 0;
};

// An event: recorded on a stream, completes when the stream reaches the recording.
class ClientEvent {
 public:
  enum class State { kComplete, kPending };
  explicit ClientEvent(uint64_t id) : id_(id) {}
  uint64_t id() const { return id_; }
  // Non-blocking; an event never recorded counts as complete. A reached event is complete even
  // if its stream failed (Wait returns the error).
  State Query();
  // Blocks until the last recording (at the time of the call) is reached.
  absl::Status Wait();
  // The device that last recorded it (null if never recorded).
  DeviceClient* recorder() const;

 private:
  friend class DeviceClient;
  const uint64_t id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  uint64_t recorded_ ABSL_GUARDED_BY(mu_) = 0;  // recordings posted
  uint64_t reached_ ABSL_GUARDED_BY(mu_) = 0;   // recordings the stream has reached
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  DeviceClient* recorder_ ABSL_GUARDED_BY(mu_) = nullptr;
};

// An interval timer measured in stream order on the host clock.
class ClientTimer {
 public:
  uint64_t ElapsedNanoseconds() const;

 private:
  friend class DeviceClient;
  std::atomic<uint64_t> start_ns_{0};
  std::atomic<uint64_t> stop_ns_{0};
};

class DeviceClient {
 public:
  // `transport` and `hub` must outlive the client; `backend_device` is the device's index on
  // the backing executor. Thread-safe.
  DeviceClient(int ordinal, uint32_t backend_device, Transport* transport, NotificationHub* hub,
               DescriptorMode descriptor_mode = DescriptorMode::kReuse);

  int ordinal() const { return ordinal_; }
  std::string backend_name() const { return transport_->Describe(); }
  ClientCounters& counters() { return counters_; }
  // The virtual DNN/BLAS API of this device (descriptors; kernels launch through it).
  DnnApi& dnn() { return dnn_; }

  // Memory (round trips).
  absl::StatusOr<uint64_t> Allocate(uint64_t size);
  absl::Status Free(uint64_t address, uint64_t size);
  absl::StatusOr<MemoryInfo> QueryMemory();

  // Streams. CreateStream and DestroyStream are round trips; DestroyStream drains the stream.
  absl::StatusOr<std::unique_ptr<ClientStream>> CreateStream();
  absl::Status DestroyStream(std::unique_ptr<ClientStream> stream);

  // The devices of this process, by ordinal (this one included), so that addresses of other
  // devices can be told apart and copies to them staged. Call once, before any work; the
  // clients must outlive this one. Without it only this device's addresses are known.
  void SetPeers(std::vector<DeviceClient*> peers);

  // Stream-ordered work: posted, never waits for execution. Host memory must stay valid until
  // the stream reaches the command. CopyDeviceToDevice to a device of another backend is the
  // exception: it blocks until the bytes have reached that device (read into host memory on
  // `stream`, then written there), so whatever is queued on `stream` after it follows the data.
  absl::Status CopyHostToDevice(ClientStream& stream, uint64_t dst, const void* src, uint64_t size);
  // The same for a source that `owner` keeps alive: the copy holds `owner` until it has run, so
  // the caller need not wait for the stream (an op kernel's host-memory input, held by a
  // reference on its tensor). The bytes must not change meanwhile.
  absl::Status CopyHostToDevice(ClientStream& stream, uint64_t dst, const void* src, uint64_t size,
                                std::shared_ptr<const void> owner);
  absl::Status CopyDeviceToHost(ClientStream& stream, void* dst, uint64_t src, uint64_t size);
  absl::Status CopyDeviceToDevice(ClientStream& stream, uint64_t dst, uint64_t src, uint64_t size);
  absl::Status Memset(ClientStream& stream, uint64_t dst, uint32_t pattern, uint8_t pattern_bytes,
                      uint64_t size);
  // Kernel launches go through dnn().Launch (op kernels: kernels/kernel_launch.h), which
  // encodes the descriptor section and posts it with PostLaunch.

  // Synchronous copies outside any stream (round trips). Exactly one of host_dst/dst and one
  // of host_src/src is set; device addresses may belong to any device of the process.
  absl::Status CopyNow(void* host_dst, uint64_t dst, const void* host_src, uint64_t src,
                       uint64_t size);

  // Events and stream dependencies. Each command goes to the device of the stream it names
  // (TensorFlow may pass another device's stream); an event recorded on another backend is
  // waited for on the host before the waiting stream's later work is posted.
  //
  // Early completion (VGPU_LOCAL_EVENTS not "0", no other device of the process on the same
  // backend): an event recorded on a stream whose unfinished commands are only host-to-device
  // copies, event waits and recordings is complete as soon as it is recorded. Nothing of those
  // commands is visible to the host: the source bytes are already taken (by a remote transport
  // when it posts them; in process CopyHostToDevice takes them), and what they do to device
  // memory is ordered by a fence instead — until the backend reports the recording reached,
  // every command this device posts on another stream is preceded by a wait for it, and calls
  // that touch device memory outside the streams (CopyNow, Free) wait for the report.
  // TensorFlow waits for an input copy's event before it issues the ops that read the input,
  // and the copy waits on the backend for the compute stream's earlier work: without this, the
  // next step is not issued until the device has finished the last one (in process as through
  // a server). A failed copy is then reported by the next synchronisation, as a kernel's error
  // is.
  std::shared_ptr<ClientEvent> CreateEvent();
  absl::Status DestroyEvent(const ClientEvent& event);
  absl::Status RecordEvent(ClientStream& stream, const std::shared_ptr<ClientEvent>& event);
  absl::Status WaitForEvent(ClientStream& stream, const ClientEvent& event);
  // `dependent` does not start its later work until `other` finished what it has queued.
  absl::Status CreateStreamDependency(ClientStream& dependent, ClientStream& other);

  // Runs `callback` on the host once the stream reaches this point; the stream's later work
  // waits until it returns (it occupies the stream, as on a real GPU). It receives the stream's
  // first error so far. A callback must not synchronise its own stream (that returns
  // FailedPrecondition instead of hanging).
  absl::Status HostCallback(ClientStream& stream, std::function<void(const absl::Status&)> callback);

  // Timers.
  absl::Status StartTimer(ClientStream& stream, const std::shared_ptr<ClientTimer>& timer);
  absl::Status StopTimer(ClientStream& stream, const std::shared_ptr<ClientTimer>& timer);

  // Synchronisation (round trips). SynchronizeStream also waits for the stream's host callbacks
  // posted before it.
  //
  // On a remote backend, a synchronisation whose streams are all settled is answered here,
  // without a round trip: every command posted on them is known to have completed without error,
  // because a later notification of the same stream (an event recording, a host callback) came
  // back with an OK status, and a stream runs its commands in order. Device-to-host bytes are in
  // place by then (their data frames precede the notification). TensorFlow synchronises the whole
  // device before each read-back of an eager tensor, usually right after the event that made the
  // tensor ready; the answer is the backend's (OK), one round trip sooner. Streams left unsettled
  // only by early-completed events (RecordEvent) are settled by waiting for those events'
  // notifications, which are already on their way, before deciding.
  absl::Status SynchronizeStream(ClientStream& stream);
  absl::Status StreamStatus(ClientStream& stream);
  absl::Status SynchronizeDevice();

  // Whether synchronisations may be answered locally (see above): a backend reached through a
  // transport whose notifications arrive on its own thread. Thread-safe.
  bool tracks_completion() const { return tracks_completion_; }
  // Where synchronisations may be answered locally, posts on `stream` a notification that
  // settles it up to here when it comes back (see above); nothing otherwise. For an op kernel
  // whose result the host reads next and whose commands otherwise end the stream's work with
  // nothing that comes back (a memset), so that the read's synchronisation is answered without
  // a round trip. Never blocks. Thread-safe.
  absl::Status PostSettlingNotification(ClientStream& stream);
  // Whether events may complete early (see RecordEvent). Thread-safe after SetPeers.
  bool completes_events_early() const { return completes_events_early_; }

 private:
  friend class DnnApi;  // forwards descriptor calls in forward mode, posts launches
  friend class ClientStream;  // leaves streams_ when destroyed
  // A command of `kind` for this client's backend device; the second also names `stream`.
  Command MakeCommand(CommandKind kind) const;
  Command MakeCommand(CommandKind kind, const ClientStream& stream) const;
  // Posts a launch whose descriptor section (Command::descriptors) DnnApi::Launch encoded.
  absl::Status PostLaunch(ClientStream& stream, KernelId kernel,
                          absl::Span<const uint8_t> descriptor_section,
                          absl::Span<const BufferArg> buffers, absl::Span<const uint8_t> params);
  // Both translate the command's device addresses to the backend's first (TranslateAddresses).
  absl::Status Post(Command command);
  Reply Call(Command command);
  // The device whose client address `address` is (this one, or a peer), or null when it is not
  // a device address of this process.
  DeviceClient* OwnerOf(uint64_t address) const;
  // Whether `other` is served by the same backend session (its addresses can be passed on).
  bool SharesBackendWith(const DeviceClient& other) const { return other.transport_ == transport_; }
  // The backend's address for a client address of this device or of a device on the same
  // backend; InvalidArgument for an address of a device on another backend. Other values
  // (0: host memory, or not a device address at all) pass unchanged: the backend validates.
  absl::StatusOr<uint64_t> ToBackendAddress(uint64_t address) const;
  uint64_t ToClientAddress(uint64_t backend_address) const;
  absl::Status TranslateAddresses(Command& command) const;
  // Copies between this device and a device of another backend through host memory.
  absl::Status CopyToOtherBackend(ClientStream& stream, DeviceClient& destination, uint64_t dst,
                                  uint64_t src, uint64_t size);
  absl::Status CopyNowAcrossBackends(DeviceClient* destination, uint64_t dst,
                                     DeviceClient* source, uint64_t src, uint64_t size);
  // Posts a notification on `stream`; `handler` runs when the stream reaches it. Where
  // completion is tracked, an OK notification also settles the stream up to it.
  absl::Status PostNotify(ClientStream& stream, NotificationHub::Handler handler,
                          bool on_callback_thread);
  // Registers `handler` for `command` (an event recording or a notification of `stream`, its
  // token set here) and posts it; unregisters it if the post fails.
  // With `completed_early` set, the command (an event recording) may complete early: then
  // *completed_early is set true and a fence is opened until the notification arrives.
  absl::Status PostWithNotification(ClientStream& stream, Command command,
                                    NotificationHub::Handler handler, bool on_callback_thread,
                                    bool* completed_early = nullptr);
  // RecordEvent, with early completion allowed or not (CreateStreamDependency's marker).
  absl::Status Record(ClientStream& stream, const std::shared_ptr<ClientEvent>& event,
                      bool may_complete_early);
  // Fences of early completions (see RecordEvent). OrderAfterFences posts, on `stream` (its
  // post_mu_ held), a wait for each published fence of another stream that the stream is not
  // yet ordered after. OpenFence registers one (returning its id) before its recording is
  // posted; PublishFence makes it visible to OrderAfterFences once the recording is posted (a
  // wait posted earlier could reach the backend before the recording it names, and would then
  // wait for nothing); CloseFence retires it. AwaitFences blocks until none of those open at the
  // call (all, or those of one event), published or not, is, and says whether there was one to
  // wait for. A fence closes when its notification arrives, or fails with the connection.
  absl::Status OrderAfterFences(ClientStream& stream) ABSL_EXCLUSIVE_LOCKS_REQUIRED(stream.post_mu_);
  uint64_t OpenFence(const ClientStream& stream, uint64_t event_id);
  void PublishFence(uint64_t id);
  void CloseFence(uint64_t id);
  bool AwaitFences(uint64_t event_id = 0);
  // Where every unsettled stream of this device ends with a command whose notification is on
  // its way back (a host callback, an event recording), waits for those notifications instead
  // of asking the backend, which could only answer once it got there too; returns whether it
  // waited for them all (false: nothing to wait for, a stream whose last command sends nothing
  // back, a host callback pending or calling, or a lost connection: ask the backend). Blocks,
  // holding streams_mu_, only on notifications the transport's reader thread delivers (event
  // recordings, settling notifications), which never take it.
  bool AwaitNotifications();
  // Wakes AwaitNotifications after a notification of `stream` at `position` came back.
  void NotificationReturned(ClientStream& stream, uint64_t position);
  // Whether the host can observe `command`'s completion beyond device memory (early
  // completion: anything but a host-to-device copy whose bytes are taken, an event wait or an
  // event recording). Call before posting it.
  bool HostCanObserve(const Command& command) const;
  // In process, the largest host-to-device copy whose bytes CopyHostToDevice takes (a step's
  // input batch is smaller; larger copies, such as weights loaded at once, are not copied
  // twice), and how many bytes of buffers the staging pool keeps for reuse.
  static constexpr uint64_t kMaxTakenCopyBytes = 16ull << 20;
  static constexpr uint64_t kStagingKeptBytes = 64ull << 20;
  // False when VGPU_LOCAL_EVENTS is "0".
  static bool EarlyEventsFromEnvironment();
  // Posts a stream-ordered command on `stream` (Post) and counts it in the stream's order.
  absl::Status PostOnStream(ClientStream& stream, Command command);
  // Whether this device's posts on `stream` are counted in the stream's order (if not, and
  // either side tracks completion, the stream is marked untracked for good).
  bool TracksPostsOn(ClientStream& stream) const;
  // Whether every command posted on `stream` (or on every stream of this device) is known to
  // have completed without error, with no host callback of the stream pending or running, and
  // the backend is not lost. False wherever completion is not tracked.
  bool StreamSettled(ClientStream& stream);
  bool AllStreamsSettled();
  // The per-stream part of both: not marked untracked, settled up to every post, no host
  // callback pending or running.
  static bool NothingPendingOn(ClientStream& stream);
  // False when VGPU_LOCAL_SYNC is "0" (every synchronisation is a round trip).
  static bool LocalSynchronizationFromEnvironment();
  // Removes `stream` from streams_ (idempotent).
  void ForgetStream(const ClientStream* stream);

  const int ordinal_;
  const uint32_t backend_device_;
  Transport* const transport_;
  NotificationHub* const hub_;
  ClientCounters counters_;
  DnnApi dnn_;
  std::vector<DeviceClient*> peers_;  // by ordinal; set before any work, then read-only
  const bool tracks_completion_;
  // This device's live streams, for AllStreamsSettled.
  std::mutex streams_mu_;
  std::vector<ClientStream*> streams_ ABSL_GUARDED_BY(streams_mu_);
  // Early event completion (RecordEvent): enabled at construction, disabled by SetPeers when a
  // peer shares the backend (its streams could read this device's memory unfenced). In process
  // CopyHostToDevice takes the bytes itself (captures_host_data_). Posts are counted per stream
  // (tracks_posts_) where completion is tracked or events may complete early.
  bool completes_events_early_;
  bool captures_host_data_;
  bool tracks_posts_;
  // Buffers for the bytes CopyHostToDevice takes (null unless captures_host_data_).
  const std::shared_ptr<StagingPool> staging_;
  struct Fence {
    uint64_t id;        // in the order opened
    uint64_t sequence;  // in the order published; 0 until its recording is posted
    const ClientStream* stream;  // identity only
    uint64_t event_id;
  };
  std::mutex fence_mu_;
  std::condition_variable fence_cv_;
  // Signalled when a notification of a stream comes back (AwaitNotifications).
  std::mutex notification_mu_;
  std::condition_variable notification_cv_;
  std::vector<Fence> fences_ ABSL_GUARDED_BY(fence_mu_);  // open, by id
  uint64_t last_fence_id_ ABSL_GUARDED_BY(fence_mu_) = 0;  // the last opened
  std::atomic<uint64_t> fence_sequence_{0};                // the last published
};

}  // namespace vgpu

#endif  // VGPU_CLIENT_DEVICE_CLIENT_H_
