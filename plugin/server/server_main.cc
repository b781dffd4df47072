// vgpu-server: the `vgpu server` executable. Hosts a backing executor (server.h) for many
// TensorFlow processes, with the flags and defaults of `vgpu server` (python/vgpu/server.py runs
// this binary). It links no TensorFlow library, so it can be copied alone to a machine that has
// no TensorFlow. SIGTERM and SIGINT stop it cleanly: every client is disconnected and its memory
// released. `vgpu-server trace replay|stats ...` is `vgpu trace` (trace/trace_replay.h), so that
// a GPU machine without TensorFlow can replay traces recorded elsewhere.
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "plugin/backend/executor_registry.h"
#include "plugin/common/config.h"
#include "plugin/common/status_macros.h"
#include "plugin/server/server.h"
#include "plugin/trace/trace_replay.h"

namespace vgpu {
namespace {

constexpr char kUsage[] =
    "usage: vgpu-server --listen unix:///path/to.sock|tcp://host:port [flags]\n"
    "Hosts a vgpu backing executor for many TensorFlow processes; clients set VGPU_BACKEND to\n"
    "the same address (and VGPU_TOKEN_FILE when a token is configured).\n"
    "       vgpu-server trace replay|stats FILE [flags]   (vgpu trace; --help there)\n";

// Exit codes: a flag that cannot be used, and the server failing (or refusing its settings).
constexpr int kExitUsage = 2;
constexpr int kExitFailure = 1;

// The values of the command line, as given (parsed into Server::Options by BuildOptions).
struct CommandLine {
  std::string listen;
  std::string executor{kDefaultExecutorName};
  std::string memory_limit = "1GiB";
  std::string client_quota;  // empty: no quota
  std::string tenant_quota;  // name=SIZE,... ; empty: none
  std::string token_file;
  std::string operator_token_file;
  int parent_pid = 0;  // 0: none to watch
  int device_count = 1;
  int compute_threads = 0;
  std::string ready_file;
  int max_streams_per_client = SessionLimits::kDefaultMaxStreams;
  int max_streams = Server::kDefaultMaxStreams;
  std::string max_staging_bytes = "256MiB";
  std::string max_receiving_bytes = "512MiB";
  double handshake_timeout = Server::kDefaultHandshakeTimeoutMs / 1000.0;
  double frame_timeout = Server::kDefaultFrameTimeoutMs / 1000.0;
  bool fair_scheduling = true;
  bool shared_memory = true;
  std::string max_shm_bytes = "256MiB";
  std::string max_template_bytes = "4MiB";
  int max_connections = Server::kDefaultMaxConnections;
  int max_connections_per_peer = Server::kDefaultMaxConnectionsPerPeer;
  int max_handshakes = Server::kDefaultMaxHandshakes;
  std::string min_receive_rate = "1MiB";
  int max_allocations_per_client = SessionLimits::kDefaultMaxAllocations;
  double shutdown_timeout = 10;
  bool help = false;
  bool list_executors = false;
};

// One command-line flag: its name, what it is for, its default as text, and how a value is
// stored (an error message for a value it cannot take).
struct Flag {
  const char* name;
  const char* help;
  std::string default_text;
  bool is_bool;
  std::function<absl::Status(absl::string_view value)> set;
};

absl::Status BadValue(absl::string_view flag, absl::string_view value, absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, " is not valid: ", what));
}

Flag StringFlag(const char* name, const char* help, std::string* target) {
  return {name, help, *target, false, [target](absl::string_view value) {
            *target = std::string(value);
            return absl::OkStatus();
          }};
}

Flag IntFlag(const char* name, const char* help, int* target, int lower_bound) {
  return {name, help, std::to_string(*target), false,
          [name, target, lower_bound](absl::string_view value) {
            int parsed = 0;
            if (!absl::SimpleAtoi(value, &parsed)) return BadValue(name, value, "not an integer");
            if (parsed < lower_bound) {
              return BadValue(name, value, absl::StrCat("must be at least ", lower_bound));
            }
            *target = parsed;
            return absl::OkStatus();
          }};
}

Flag SecondsFlag(const char* name, const char* help, double* target) {
  std::ostringstream default_text;
  default_text << *target;
  return {name, help, default_text.str(), false, [name, target](absl::string_view value) {
            double parsed = 0;
            if (!absl::SimpleAtod(value, &parsed) || !(parsed > 0)) {
              return BadValue(name, value, "must be a positive number of seconds");
            }
            *target = parsed;
            return absl::OkStatus();
          }};
}

Flag BoolFlag(const char* name, const char* help, bool* target) {
  return {name, help, *target ? "true" : "false", true,
          [name, target](absl::string_view value) {
            std::string lower = absl::AsciiStrToLower(value);
            if (lower == "true" || lower == "1" || lower == "yes") {
              *target = true;
            } else if (lower == "false" || lower == "0" || lower == "no") {
              *target = false;
            } else {
              return BadValue(name, value, "not true or false");
            }
            return absl::OkStatus();
          }};
}

// The flags of `vgpu server` (python/vgpu/server.py defines the same ones).
std::vector<Flag> ServerFlags(CommandLine* line) {
  return {
      StringFlag("listen", "unix:///path/to.sock or tcp://host:port (port 0: any). Required.",
                 &line->listen),
      StringFlag("executor", "The backing executor to host (the executors of this build are "
                 "listed when an unknown one is asked for).", &line->executor),
      StringFlag("memory_limit", "Device memory per device, e.g. 4GiB.", &line->memory_limit),
      StringFlag("client_quota", "Device memory one client may hold (default: no quota).",
                 &line->client_quota),
      StringFlag("tenant_quota",
                 "Device memory the connections of a tenant (VGPU_TENANT) may hold together: "
                 "name=SIZE,name=SIZE,... (e.g. team-a=2GiB,team-b=512MiB).",
                 &line->tenant_quota),
      StringFlag("token_file", "File holding the token clients must present.",
                 &line->token_file),
      StringFlag("operator_token_file",
                 "File holding the operator's token: an observer presenting it sees every "
                 "connection and tenant (`vgpu stats`, the metrics process); holders of the "
                 "--token_file token see only their own tenant (docs/security.md).",
                 &line->operator_token_file),
      IntFlag("parent_pid",
              "Stop when process N, this server's parent, exits (the metrics process of `vgpu "
              "server --metrics_address` passes its own; 0: none).",
              &line->parent_pid, 0),
      IntFlag("device_count", "Number of devices the server offers.", &line->device_count, 1),
      IntFlag("compute_threads", "Compute threads (0: one per core).", &line->compute_threads,
              0),
      StringFlag("ready_file", "Write the bound address to this file once listening.",
                 &line->ready_file),
      IntFlag("max_streams_per_client",
              "Streams one client may have at once (each is a server thread).",
              &line->max_streams_per_client, 1),
      IntFlag("max_streams",
              "Streams of all clients together (each is a server thread); past it a new "
              "stream is refused.",
              &line->max_streams, 1),
      StringFlag("max_staging_bytes",
                 "Host memory one client may hold in flight (device-to-host data not yet taken, "
                 "host-to-device data not yet executed); past it the server reads no more of its "
                 "commands until earlier ones are done.",
                 &line->max_staging_bytes),
      StringFlag("max_receiving_bytes", "Bytes of partially received frames over all clients.",
                 &line->max_receiving_bytes),
      SecondsFlag("handshake_timeout",
                  "Seconds a new connection has to complete its Hello before it is closed.",
                  &line->handshake_timeout),
      SecondsFlag("frame_timeout",
                  "Seconds a frame may stall (bytes stop arriving, or the client stops taking "
                  "its data) before the connection is closed.",
                  &line->frame_timeout),
      BoolFlag("fair_scheduling",
               "Share the compute pool fairly among clients (--nofair_scheduling: Eigen's pool, "
               "for one trusted client).",
               &line->fair_scheduling),
      BoolFlag("shared_memory",
               "Accept a Unix-socket client's shared-memory staging region for bulk copies "
               "(--noshared_memory: every byte through the socket).",
               &line->shared_memory),
      StringFlag("max_shm_bytes",
                 "Largest shared-memory region one client may attach (also at most half of "
                 "--max_staging_bytes, whose budget it is charged to).",
                 &line->max_shm_bytes),
      StringFlag("max_template_bytes",
                 "Launch templates one client connection may keep on the server (repeated "
                 "launches then cross as a template id and the buffers that changed); at most "
                 "an eighth of --max_staging_bytes, whose budget it is charged to. 0: none.",
                 &line->max_template_bytes),
      IntFlag("max_connections", "Open connections in all.", &line->max_connections, 1),
      IntFlag("max_connections_per_peer",
              "Open connections from one peer (IP address over TCP, uid over a Unix socket).",
              &line->max_connections_per_peer, 1),
      IntFlag("max_handshakes",
              "Connections that have not completed their Hello at once; a new one past it "
              "closes the oldest, so that idle handshakes cannot lock clients out.",
              &line->max_handshakes, 1),
      StringFlag("min_receive_rate",
                 "Bytes per second a frame must arrive at, measured over windows of a few "
                 "seconds (a client holding receive budget with a trickle is closed).",
                 &line->min_receive_rate),
      IntFlag("max_allocations_per_client",
              "Device allocations one client may hold at once (each costs host bookkeeping).",
              &line->max_allocations_per_client, 1),
      SecondsFlag("shutdown_timeout",
                  "Seconds SIGTERM/SIGINT may take to disconnect every client (kernels running "
                  "are waited for) before the process exits anyway; a second signal exits at "
                  "once.",
                  &line->shutdown_timeout),
      BoolFlag("list_executors",
               "Print the executors this build offers (name, a tab, a description; the default "
               "first) and exit.",
               &line->list_executors),
      BoolFlag("help", "Show this help and exit.", &line->help),
  };
}

void PrintHelp(const std::vector<Flag>& flags) {
  std::cout << kUsage << "\nflags:\n";
  for (const Flag& flag : flags) {
    std::cout << "  --" << (flag.is_bool ? "[no]" : "") << flag.name << ": " << flag.help;
    if (!flag.default_text.empty() && !(flag.is_bool && flag.default_text == "false")) {
      std::cout << "\n    (default: '" << flag.default_text << "')";
    }
    std::cout << "\n";
  }
}

// Parses argv into `line`: --name=value, --name value, -name=value, and for booleans --name,
// --noname, --name=true|false. InvalidArgument for an unknown flag, a missing or bad value, or
// a positional argument.
absl::Status ParseCommandLine(int argc, char** argv, const std::vector<Flag>& flags) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", argv[i], "'"));
    }
    if (arg == "h") arg = "help";
    absl::string_view name = arg;
    absl::string_view value;
    bool has_value = false;
    if (size_t equals = arg.find('='); equals != absl::string_view::npos) {
      name = arg.substr(0, equals);
      value = arg.substr(equals + 1);
      has_value = true;
    }
    const Flag* found = nullptr;
    bool negated = false;
    for (const Flag& flag : flags) {
      if (name == flag.name) {
        found = &flag;
      } else if (flag.is_bool && !has_value && name == absl::StrCat("no", flag.name)) {
        found = &flag;
        negated = true;
      }
    }
    if (found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    }
    if (found->is_bool && !has_value) {
      value = negated ? "false" : "true";
    } else if (!has_value) {
      if (i + 1 >= argc) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      value = argv[++i];
    }
    if (absl::Status status = found->set(value); !status.ok()) return status;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ByteSizeFlag(absl::string_view flag, absl::string_view text) {
  absl::StatusOr<uint64_t> bytes = ParseByteSize(text);
  if (!bytes.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", bytes.status().message()));
  }
  return bytes;
}

int Milliseconds(double seconds) {
  double ms = seconds * 1000;
  if (ms >= std::numeric_limits<int>::max()) return std::numeric_limits<int>::max();
  return ms < 1 ? 1 : static_cast<int>(ms);
}

// The token in `path` (the value of --`flag`), without surrounding whitespace ("" for no path).
// A file that holds no token (empty, or only whitespace) is an error: taken as "no token", it
// would silently turn authentication off on a server its operator meant to protect.
absl::StatusOr<std::string> ReadToken(absl::string_view flag, const std::string& path) {
  if (path.empty()) return std::string();
  std::ifstream file(path);
  if (!file) {
    return absl::NotFoundError(
        absl::StrCat("cannot read --", flag, " ", path, ": ", std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << file.rdbuf();
  std::string token(absl::StripAsciiWhitespace(contents.str()));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " ", path, " holds no token (it is empty or only whitespace); write a token "
        "into it, or leave --", flag, " out"));
  }
  return token;
}

// Server::Options from the command line; InvalidArgument naming the flag at fault.
// --tenant_quota name=SIZE,name=SIZE,...
absl::StatusOr<std::vector<std::pair<std::string, uint64_t>>> ParseTenantQuotas(
    absl::string_view text) {
  std::vector<std::pair<std::string, uint64_t>> quotas;
  for (absl::string_view entry : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    std::pair<absl::string_view, absl::string_view> parts =
        absl::StrSplit(entry, absl::MaxSplits('=', 1));
    const absl::string_view name = absl::StripAsciiWhitespace(parts.first);
    if (absl::Status valid = ValidateTenantName(name); !valid.ok() || parts.second.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tenant_quota: '", entry, "' is not name=SIZE",
          valid.ok() ? "" : absl::StrCat(" (", valid.message(), ")")));
    }
    absl::StatusOr<uint64_t> bytes = ByteSizeFlag("tenant_quota", parts.second);
    if (!bytes.ok()) return bytes.status();
    quotas.emplace_back(std::string(name), *bytes);
  }
  if (quotas.empty()) return absl::InvalidArgumentError("--tenant_quota names no tenant");
  return quotas;
}

absl::StatusOr<Server::Options> BuildOptions(const CommandLine& line) {
  Server::Options options;
  options.listen = line.listen;
  options.executor = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.executor));
  VGPU_ASSIGN_OR_RETURN(options.memory_limit, ByteSizeFlag("memory_limit", line.memory_limit));
  if (!line.tenant_quota.empty()) {
    VGPU_ASSIGN_OR_RETURN(options.tenant_quotas, ParseTenantQuotas(line.tenant_quota));
  }
  if (!line.client_quota.empty()) {
    VGPU_ASSIGN_OR_RETURN(options.client_quota, ByteSizeFlag("client_quota", line.client_quota));
  }
  VGPU_ASSIGN_OR_RETURN(options.token, ReadToken("token_file", line.token_file));
  VGPU_ASSIGN_OR_RETURN(options.operator_token,
                        ReadToken("operator_token_file", line.operator_token_file));
  if (!options.operator_token.empty() && options.operator_token == options.token) {
    return absl::InvalidArgumentError(
        "--operator_token_file holds the same token as --token_file: every tenant would be an "
        "operator");
  }
  options.device_count = line.device_count;
  options.compute_threads = line.compute_threads;
  options.max_streams_per_client = line.max_streams_per_client;
  options.max_streams = line.max_streams;
  VGPU_ASSIGN_OR_RETURN(options.max_staging_bytes,
                        ByteSizeFlag("max_staging_bytes", line.max_staging_bytes));
  VGPU_ASSIGN_OR_RETURN(options.max_receiving_bytes,
                        ByteSizeFlag("max_receiving_bytes", line.max_receiving_bytes));
  options.handshake_timeout_ms = Milliseconds(line.handshake_timeout);
  options.frame_timeout_ms = Milliseconds(line.frame_timeout);
  options.fair_scheduling = line.fair_scheduling;
  options.shared_memory = line.shared_memory;
  VGPU_ASSIGN_OR_RETURN(options.max_shm_bytes, ByteSizeFlag("max_shm_bytes", line.max_shm_bytes));
  if (line.max_template_bytes == "0") {  // no templates
    options.max_template_bytes = 0;
  } else {
    VGPU_ASSIGN_OR_RETURN(options.max_template_bytes,
                          ByteSizeFlag("max_template_bytes", line.max_template_bytes));
  }
  options.max_connections = line.max_connections;
  options.max_connections_per_peer = line.max_connections_per_peer;
  options.max_handshakes = line.max_handshakes;
  VGPU_ASSIGN_OR_RETURN(options.min_receive_rate,
                        ByteSizeFlag("min_receive_rate", line.min_receive_rate));
  options.max_allocations_per_client = line.max_allocations_per_client;
  return options;
}

// Writes `address` to `path` atomically (a temporary file, then a rename), so that a reader
// never sees a partial address.
absl::Status WriteReadyFile(const std::string& path, const std::string& address) {
  std::string temporary = path + ".tmp";
  {
    std::ofstream file(temporary, std::ios::trunc);
    file << address;
    if (!file.flush()) {
      return absl::UnavailableError(
          absl::StrCat("cannot write --ready_file ", temporary, ": ", std::strerror(errno)));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot write --ready_file ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// SIGTERM and SIGINT, blocked in the calling thread and so in every thread it starts after
// (call before creating the server): StopOnSignal takes them with sigwait, so that stopping runs
// as ordinary code rather than in a signal handler.
sigset_t BlockStopSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

// Stops `server` on the first of `signals` (blocked by BlockStopSignals). Stopping disconnects
// every client; it waits only for the kernels running at that moment (queued work is
// abandoned), and at most `timeout` in all: past it, or on a second signal, the process exits
// at once (the system reclaims what is left). Destroy before the server, once Serve returned.
class StopOnSignal {
 public:
  StopOnSignal(sigset_t signals, Server* server, std::chrono::milliseconds timeout,
               std::string socket_path)
      : signals_(signals), socket_path_(std::move(socket_path)) {
    watcher_ = std::thread([this, server, timeout] {
      int signal_number = 0;
      sigwait(&signals_, &signal_number);
      if (done_.exchange(true)) return;  // woken by the destructor
      server->Stop();
      const auto deadline = std::chrono::steady_clock::now() + timeout;
      while (!finished_.load()) {
        if (std::chrono::steady_clock::now() >= deadline) {
          ExitNow("did not finish within --shutdown_timeout (a kernel still running)");
        }
        const timespec slice{0, 50'000'000};
        if (sigtimedwait(&signals_, nullptr, &slice) > 0 && !finished_.load()) {
          ExitNow("a second signal came");
        }
      }
    });
  }
  // Ends the watcher, waking it with a signal of its own if none came.
  ~StopOnSignal() {
    finished_.store(true);
    if (!done_.exchange(true)) pthread_kill(watcher_.native_handle(), SIGTERM);
    watcher_.join();
  }
  StopOnSignal(const StopOnSignal&) = delete;
  StopOnSignal& operator=(const StopOnSignal&) = delete;

 private:
  [[noreturn]] void ExitNow(const char* why) {
    std::cerr << "vgpu server: stopping " << why << "; exiting now" << std::endl;
    if (!socket_path_.empty()) ::unlink(socket_path_.c_str());
    std::_Exit(0);
  }

  const sigset_t signals_;
  const std::string socket_path_;  // a Unix socket's file, removed on a forced exit
  std::atomic<bool> done_{false};
  std::atomic<bool> finished_{false};
  std::thread watcher_;
};

int Run(int argc, char** argv) {
  if (argc >= 2 && absl::string_view(argv[1]) == "trace") {
    return trace::RunTraceTool(std::vector<std::string>(argv + 2, argv + argc), std::cout,
                               std::cerr);
  }
  CommandLine line;
  std::vector<Flag> flags = ServerFlags(&line);
  if (absl::Status status = ParseCommandLine(argc, argv, flags); !status.ok()) {
    std::cerr << "vgpu server: " << status.message() << " (--help lists the flags)\n";
    return kExitUsage;
  }
  if (line.help) {
    PrintHelp(flags);
    return 0;
  }
  if (line.list_executors) {
    for (const ExecutorRegistration& executor : RegisteredExecutors()) {
      std::cout << executor.name << "\t" << executor.description << "\n";
    }
    return 0;
  }
  if (line.listen.empty()) {
    std::cerr << "vgpu server: --listen unix:///path or tcp://host:port is required\n";
    return kExitUsage;
  }
  absl::StatusOr<Server::Options> options = BuildOptions(line);
  if (!options.ok()) {
    std::cerr << "vgpu server: " << options.status().message() << "\n";
    return kExitFailure;
  }
  sigset_t stop_signals = BlockStopSignals();  // before Create: the server's threads inherit it
  if (line.parent_pid != 0) {
    // Stop with the parent (--parent_pid): the kernel sends SIGTERM, handled below as any stop
    // signal, when the thread that started this process exits (the parent's main thread, for
    // the metrics process). Race-free: a parent that died before the prctl shows as another
    // parent process (init or a subreaper) afterwards.
    if (::prctl(PR_SET_PDEATHSIG, SIGTERM) != 0) {
      std::cerr << "vgpu server: --parent_pid: prctl(PR_SET_PDEATHSIG): " << std::strerror(errno)
                << "\n";
      return kExitFailure;
    }
    if (::getppid() != static_cast<pid_t>(line.parent_pid)) {
      std::cerr << "vgpu server: --parent_pid=" << line.parent_pid
                << " is not (or no longer) this process's parent; stopping\n";
      return kExitFailure;
    }
  }
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Create(*options);
  if (!server.ok()) {
    std::cerr << "vgpu server: " << server.status().message() << "\n";
    return kExitFailure;
  }
  std::cerr << "vgpu server: listening on " << (*server)->address() << std::endl;
  if (!line.ready_file.empty()) {
    if (absl::Status status = WriteReadyFile(line.ready_file, (*server)->address());
        !status.ok()) {
      std::cerr << "vgpu server: " << status.message() << "\n";
      return kExitFailure;
    }
  }
  std::string socket_path;
  if (absl::StartsWith((*server)->address(), "unix://")) {
    socket_path = (*server)->address().substr(std::strlen("unix://"));
  }
  StopOnSignal stop_on_signal(stop_signals, server->get(),
                              std::chrono::milliseconds(Milliseconds(line.shutdown_timeout)),
                              socket_path);
  absl::Status served = (*server)->Serve();
  if (!served.ok()) {
    std::cerr << "vgpu server: " << served.message() << "\n";
    return kExitFailure;
  }
  return 0;
}

}  // namespace
}  // namespace vgpu

int main(int argc, char** argv) { return vgpu::Run(argc, argv); }
