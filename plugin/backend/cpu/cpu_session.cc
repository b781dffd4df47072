// A client's session on the CPU backing executor (see cpu_session.h).
#include "plugin/backend/cpu/cpu_session.h"

#define EIGEN_USE_THREADS
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "plugin/backend/cpu/kernel_registry.h"
#include "unsupported/Eigen/CXX11/Tensor"

namespace vgpu {
namespace {

Reply ErrorReply(absl::Status status) {
  Reply reply;
  reply.status = std::move(status);
  return reply;
}

std::string Hex(uint64_t value) { return absl::StrCat("0x", absl::Hex(value)); }

}  // namespace

CpuSession::CpuSession(CpuExecutor* executor, uint64_t session_id, CompletionSink* sink,
                       uint64_t quota_bytes)
    : executor_(executor), session_id_(session_id), sink_(sink), quota_bytes_(quota_bytes) {}

uint64_t CpuSession::BytesInUse() const {
  std::lock_guard<std::mutex> lock(memory_mu_);
  return bytes_in_use_;
}

CpuSession::~CpuSession() {
  absl::flat_hash_map<uint64_t, std::shared_ptr<CpuStream>> streams;
  {
    std::lock_guard<std::mutex> lock(mu_);
    streams.swap(streams_);
    events_.clear();
  }
  streams.clear();  // each stream drains its queue before it stops
  for (int d = 0; d < executor_->device_count(); ++d) {
    executor_->arena(static_cast<uint32_t>(d)).FreeAllOwnedBy(session_id_);
  }
}

absl::Status CpuSession::CheckDevice(uint32_t device) const {
  if (device >= static_cast<uint32_t>(executor_->device_count())) {
    return absl::InvalidArgumentError(absl::StrCat("no device ", device, " on this executor (it has ",
                                                   executor_->device_count(), ")"));
  }
  return absl::OkStatus();
}

std::shared_ptr<CpuStream> CpuSession::FindStream(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : it->second;
}

absl::StatusOr<uint8_t*> CpuSession::Translate(uint64_t address, uint64_t size) {
  DeviceArena* arena = executor_->ArenaForAddress(address);
  if (arena == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(Hex(address), " is not a device address of this executor"));
  }
  return arena->Translate(address, size, session_id_);
}

Reply CpuSession::Handle(Command command) {
  Reply reply;
  switch (command.kind) {
    case CommandKind::kAllocate: {
      if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
      std::lock_guard<std::mutex> memory_lock(memory_mu_);
      if (quota_bytes_ > 0 && (command.size > quota_bytes_ ||
                               bytes_in_use_ > quota_bytes_ - command.size)) {
        return ErrorReply(absl::ResourceExhaustedError(absl::StrCat(
            "allocation of ", command.size, " bytes exceeds this client's quota (",
            bytes_in_use_, " of ", quota_bytes_, " bytes in use)")));
      }
      absl::StatusOr<uint64_t> address =
          executor_->arena(command.device).Allocate(command.size, session_id_);
      if (!address.ok()) return ErrorReply(address.status());
      allocation_sizes_[*address] = command.size;
      bytes_in_use_ += command.size;
      reply.value = *address;
      return reply;
    }
    case CommandKind::kFree: {
      DeviceArena* arena = executor_->ArenaForAddress(command.dst);
      if (arena == nullptr) {
        return ErrorReply(absl::InvalidArgumentError(
            absl::StrCat("free of ", Hex(command.dst), ", which is not a device address")));
      }
      reply.status = arena->Free(command.dst, session_id_);
      if (reply.status.ok()) {
        std::lock_guard<std::mutex> memory_lock(memory_mu_);
        auto it = allocation_sizes_.find(command.dst);
        if (it != allocation_sizes_.end()) {
          bytes_in_use_ -= it->second;
          allocation_sizes_.erase(it);
        }
      }
      return reply;
    }
    case CommandKind::kMemoryInfo: {
      if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
      reply.memory = executor_->arena(command.device).Info();
      if (quota_bytes_ > 0) {  // what this client may still use
        std::lock_guard<std::mutex> memory_lock(memory_mu_);
        reply.memory.limit_bytes = std::min(reply.memory.limit_bytes, quota_bytes_);
        reply.memory.bytes_in_use = bytes_in_use_;
        reply.memory.largest_free_block =
            std::min(reply.memory.largest_free_block, quota_bytes_ - bytes_in_use_);
      }
      return reply;
    }
    case CommandKind::kCreateStream: {
      if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
      std::lock_guard<std::mutex> lock(mu_);
      if (command.stream == 0 || streams_.contains(command.stream)) {
        return ErrorReply(absl::AlreadyExistsError(
            absl::StrCat("stream id ", command.stream, " is zero or already in use")));
      }
      streams_.emplace(command.stream,
                       std::make_shared<CpuStream>(
                           command.stream, command.device,
                           [this](Command& c, const absl::Status& s) { return Execute(c, s); }));
      return reply;
    }
    case CommandKind::kDestroyStream: {
      std::shared_ptr<CpuStream> stream;
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = streams_.find(command.stream);
        if (it == streams_.end()) {
          return ErrorReply(absl::NotFoundError(absl::StrCat("no stream ", command.stream)));
        }
        stream = std::move(it->second);
        streams_.erase(it);
      }
      stream->WaitUntilCompleted(stream->enqueued());
      return reply;
    }
    case CommandKind::kSynchronizeStream:
    case CommandKind::kStreamStatus: {
      std::shared_ptr<CpuStream> stream = FindStream(command.stream);
      if (stream == nullptr) {
        return ErrorReply(absl::NotFoundError(absl::StrCat("no stream ", command.stream)));
      }
      if (command.kind == CommandKind::kSynchronizeStream) {
        stream->WaitUntilCompleted(stream->enqueued());
        reply.status = stream->TakeStatus();  // reported once
      } else {
        reply.status = stream->status();
      }
      return reply;
    }
    case CommandKind::kSynchronizeDevice: {
      if (absl::Status s = CheckDevice(command.device); !s.ok()) return ErrorReply(s);
      std::vector<std::shared_ptr<CpuStream>> streams;
      {
        std::lock_guard<std::mutex> lock(mu_);
        for (auto& [id, stream] : streams_) {
          if (stream->device() == command.device) streams.push_back(stream);
        }
      }
      for (auto& stream : streams) {
        stream->WaitUntilCompleted(stream->enqueued());
        absl::Status status = stream->TakeStatus();  // reported once
        if (reply.status.ok()) reply.status = status;
      }
      return reply;
    }
    case CommandKind::kMemcpyNow:
      reply.status = Copy(command);
      return reply;
    case CommandKind::kDestroyEvent: {
      std::lock_guard<std::mutex> lock(mu_);
      events_.erase(command.object);
      return reply;
    }
    case CommandKind::kDescriptorCreate: {
      if (command.params.size() != 1 || command.params[0] < 1 ||
          command.params[0] > kNumDescriptorKinds) {
        return ErrorReply(absl::InvalidArgumentError("descriptor_create: bad descriptor kind"));
      }
      std::lock_guard<std::mutex> lock(mu_);
      if (!descriptors_.try_emplace(command.object, StoredDescriptor{command.params[0], {}})
               .second) {
        return ErrorReply(absl::AlreadyExistsError(
            absl::StrCat("descriptor id ", command.object, " already exists")));
      }
      return reply;
    }
    case CommandKind::kDescriptorSet: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = descriptors_.find(command.object);
      if (it == descriptors_.end()) {
        return ErrorReply(absl::NotFoundError(absl::StrCat("no descriptor ", command.object)));
      }
      if (command.params.empty() || command.params.size() > kMaxDescriptorSettingsSize) {
        return ErrorReply(absl::InvalidArgumentError("descriptor_set: bad settings size"));
      }
      it->second.settings.assign(command.params.begin(), command.params.end());
      return reply;
    }
    case CommandKind::kDescriptorDestroy: {
      std::lock_guard<std::mutex> lock(mu_);
      if (descriptors_.erase(command.object) == 0) {
        return ErrorReply(absl::NotFoundError(absl::StrCat("no descriptor ", command.object)));
      }
      return reply;
    }
    case CommandKind::kRecordEvent:
    case CommandKind::kWaitEvent:
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemset:
    case CommandKind::kLaunch:
    case CommandKind::kNotify: {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = streams_.find(command.stream);
      if (it == streams_.end()) {
        return ErrorReply(absl::NotFoundError(absl::StrCat(
            CommandKindName(command.kind), " names stream ", command.stream,
            ", which does not exist")));
      }
      CpuStream& stream = *it->second;
      if (command.kind == CommandKind::kLaunch && !command.descriptors.empty()) {
        if (absl::Status s = ResolveDescriptorReferencesLocked(command); !s.ok()) {
          return ErrorReply(s);
        }
      }
      if (command.kind == CommandKind::kWaitEvent) {
        auto event = events_.find(command.object);
        if (event == events_.end()) return reply;  // never recorded: nothing to wait for
        if (event->second.stream_id == command.stream) return reply;  // FIFO already orders it
        command.dst = event->second.stream_id;
        command.src = event->second.position;
      }
      const uint64_t event_id = command.object;
      const bool is_record = command.kind == CommandKind::kRecordEvent;
      const uint64_t position = stream.Enqueue(std::move(command));
      if (is_record) events_[event_id] = EventMark{stream.id(), position};
      return reply;
    }
    case CommandKind::kNumKinds:
      break;
  }
  return ErrorReply(absl::InvalidArgumentError(
      absl::StrCat("unknown command kind ", static_cast<int>(command.kind))));
}

absl::Status CpuSession::ResolveDescriptorReferencesLocked(Command& command) {
  const auto& section = command.descriptors;
  bool has_reference = false;
  // Walk the section once to see whether anything needs resolving (reuse mode: nothing does).
  ParamReader scan(section);
  absl::StatusOr<uint8_t> count = scan.Get<uint8_t>();
  if (!count.ok()) return count.status();
  for (int i = 0; i < *count; ++i) {
    absl::StatusOr<uint8_t> kind = scan.Get<uint8_t>();
    absl::StatusOr<uint16_t> size = kind.ok() ? scan.Get<uint16_t>() : kind.status();
    if (!size.ok()) return size.status();
    if (*kind & kDescriptorReference) has_reference = true;
    if (!scan.GetBytes(*size).ok()) return absl::InvalidArgumentError("truncated descriptors");
  }
  if (!has_reference) return absl::OkStatus();
  ParamBlock resolved;
  ParamWriter writer(&resolved);
  ParamReader reader(section);
  writer.Put(*reader.Get<uint8_t>());
  for (int i = 0; i < *count; ++i) {
    uint8_t kind = *reader.Get<uint8_t>();
    uint16_t size = *reader.Get<uint16_t>();
    absl::Span<const uint8_t> bytes = *reader.GetBytes(size);
    if ((kind & kDescriptorReference) == 0) {
      writer.Put(kind).Put(size).PutBytes(bytes.data(), bytes.size());
      continue;
    }
    uint64_t id = 0;
    if (size != sizeof(id)) return absl::InvalidArgumentError("bad descriptor reference");
    std::memcpy(&id, bytes.data(), sizeof(id));
    auto it = descriptors_.find(id);
    if (it == descriptors_.end() || it->second.settings.empty() ||
        it->second.kind != (kind & ~kDescriptorReference)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "launch names descriptor ", id, ", which does not exist or was never set"));
    }
    writer.Put(it->second.kind)
        .Put(static_cast<uint16_t>(it->second.settings.size()))
        .PutBytes(it->second.settings.data(), it->second.settings.size());
  }
  command.descriptors.assign(resolved.begin(), resolved.end());
  return absl::OkStatus();
}

absl::Status CpuSession::Execute(Command& command, const absl::Status& stream_status) {
  switch (command.kind) {
    case CommandKind::kMemcpyHtoD:
    case CommandKind::kMemcpyDtoH:
    case CommandKind::kMemcpyDtoD:
    case CommandKind::kMemset: {
      // Name the failing command: its error surfaces later, at a synchronisation.
      absl::Status status = command.kind == CommandKind::kMemset ? Memset(command) : Copy(command);
      if (status.ok()) return status;
      return absl::Status(status.code(),
                          absl::StrCat(CommandKindName(command.kind), ": ", status.message()));
    }
    case CommandKind::kLaunch:
      return Launch(command);
    case CommandKind::kRecordEvent:
    case CommandKind::kNotify:
      if (sink_ != nullptr) sink_->OnNotify(command.token, stream_status);
      return absl::OkStatus();
    case CommandKind::kWaitEvent: {
      // The stream that recorded the event; if it is gone, its work has all completed.
      std::shared_ptr<CpuStream> other = FindStream(command.dst);
      if (other != nullptr) other->WaitUntilCompleted(command.src);
      return absl::OkStatus();
    }
    default:
      return absl::InternalError(absl::StrCat(CommandKindName(command.kind),
                                              " cannot run on a stream"));
  }
}

absl::Status CpuSession::Copy(const Command& command) {
  if (command.size == 0) return absl::OkStatus();
  const uint8_t* source = static_cast<const uint8_t*>(command.host_src);
  uint8_t* destination = static_cast<uint8_t*>(command.host_dst);
  if (command.src != 0) {
    absl::StatusOr<uint8_t*> src = Translate(command.src, command.size);
    if (!src.ok()) return src.status();
    source = *src;
  }
  if (command.dst != 0) {
    absl::StatusOr<uint8_t*> dst = Translate(command.dst, command.size);
    if (!dst.ok()) return dst.status();
    destination = *dst;
  }
  if (source == nullptr || destination == nullptr) {
    return absl::InvalidArgumentError("copy without a source or a destination");
  }
  executor_->compute_device().memcpy(destination, source, command.size);
  return absl::OkStatus();
}

absl::Status CpuSession::Memset(const Command& command) {
  if (command.size == 0) return absl::OkStatus();  // empty tensors may have no memory at all
  absl::StatusOr<uint8_t*> dst = Translate(command.dst, command.size);
  if (!dst.ok()) return dst.status();
  if (command.pattern_bytes == 1) {
    std::memset(*dst, static_cast<int>(command.pattern & 0xFF), command.size);
    return absl::OkStatus();
  }
  if (command.pattern_bytes == 4) {
    if (command.size % 4 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("memset32 of ", command.size, " bytes, not a multiple of 4"));
    }
    uint32_t* words = reinterpret_cast<uint32_t*>(*dst);
    for (uint64_t i = 0; i < command.size / 4; ++i) words[i] = command.pattern;
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat("memset pattern of ", static_cast<int>(command.pattern_bytes), " bytes"));
}

absl::Status CpuSession::Launch(const Command& command) {
  const KernelInfo* kernel = Kernels().Find(static_cast<uint32_t>(command.object));
  if (kernel == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown kernel id ", command.object));
  }
  absl::InlinedVector<DescriptorView, 6> descriptors;
  if (absl::Status parsed = ParseLaunchDescriptors(command.descriptors, &descriptors); !parsed.ok()) {
    return absl::Status(parsed.code(), absl::StrCat(kernel->name, ": ", parsed.message()));
  }
  absl::InlinedVector<uint8_t*, 4> pointers;
  absl::InlinedVector<uint64_t, 4> sizes;
  for (const BufferArg& buffer : command.buffers) {
    if (buffer.size == 0) {  // empty tensors may have no memory at all
      pointers.push_back(nullptr);
      sizes.push_back(0);
      continue;
    }
    absl::StatusOr<uint8_t*> pointer = Translate(buffer.address, buffer.size);
    if (!pointer.ok()) {
      return absl::Status(pointer.status().code(),
                          absl::StrCat(kernel->name, ": ", pointer.status().message()));
    }
    pointers.push_back(*pointer);
    sizes.push_back(buffer.size);
  }
  KernelContext context{pointers, sizes, command.params, &executor_->compute_device(),
                        descriptors};
  absl::Status status = RunKernel(*kernel, context);
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat(kernel->name, ": ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace vgpu
