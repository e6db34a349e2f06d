#include "common/daemon.h"

#include <sys/resource.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/grpc_metrics.h"
#include "common/log.h"

namespace pillar {
namespace {

// The file behind "unix:///path" / "unix:path"; empty for other schemes.
std::string UnixSocketPath(const std::string& address) {
  if (address.rfind("unix://", 0) == 0) return address.substr(7);
  if (address.rfind("unix:", 0) == 0) return address.substr(5);
  return "";
}

}  // namespace

StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenerCredentials(const std::string& what,
                                                                       const TlsFiles& tls,
                                                                       bool insecure,
                                                                       RpcPolicy policy) {
  if (insecure) {
    log::Warn("INSECURE: " + what + " is served without TLS: any caller may call any RPC");
    return grpc::InsecureServerCredentials();
  }
  return MutualTlsServerCredentials(tls, std::move(policy));
}

void WarnIfCsiOnTcp(const std::string& endpoint) {
  if (endpoint.rfind("unix:", 0) == 0) return;
  log::Warn("INSECURE: the CSI endpoint " + endpoint +
            " is not a unix socket: CSI is served plaintext and unauthenticated to anyone who "
            "reaches it (use unix:///path)");
}

GrpcDaemon::GrpcDaemon(const std::string& component, const std::string& log_level,
                       const std::string& title)
    : title_(title.empty() ? component : title) {
  log::Init(component, log_level);
  tls_policy_ = RequireTls13();
  RaiseFileLimit();
}

void HardenServer(grpc::ServerBuilder& builder) {
  builder.AddChannelArgument(
      GRPC_ARG_SERVER_HANDSHAKE_TIMEOUT_MS,
      static_cast<int>(std::chrono::milliseconds(kHandshakeTimeout).count()));
  builder.AddChannelArgument(
      GRPC_ARG_MAX_CONNECTION_IDLE_MS,
      static_cast<int>(std::chrono::milliseconds(kMaxConnectionIdle).count()));
}

void RaiseFileLimit() {
  struct rlimit lim {};
  if (getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= lim.rlim_max) return;
  rlim_t was = lim.rlim_cur;
  lim.rlim_cur = lim.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &lim) == 0) {
    log::Debug("open-file limit raised",
               {{"from", static_cast<uint64_t>(was)}, {"to", static_cast<uint64_t>(lim.rlim_max)}});
  }
}

GrpcDaemon::~GrpcDaemon() { ShutdownServers(std::chrono::system_clock::now()); }

int GrpcDaemon::Fail(const Status& s) {
  log::Error(title_ + " cannot start", {{"error", s.ToString()}});
  ShutdownServers(std::chrono::system_clock::now());
  return 2;
}

Status GrpcDaemon::Serve(const std::vector<GrpcListener>& listeners,
                         const std::vector<grpc::Service*>& services) {
  RETURN_IF_ERROR(tls_policy_);
  PosixFs fs;
  grpc::ServerBuilder builder;
  HardenServer(builder);
  std::string addresses;
  for (const auto& l : listeners) {
    if (std::string path = UnixSocketPath(l.address); !path.empty()) {
      if (size_t slash = path.rfind('/'); slash != std::string::npos && slash > 0) {
        RETURN_IF_ERROR(fs.MakeDirs(path.substr(0, slash)));
      }
      unlink(path.c_str());  // a stale socket from a previous run
    }
    builder.AddListeningPort(l.address, l.credentials, l.bound_port);
    addresses += (addresses.empty() ? "" : ", ") + l.address;
  }
  for (grpc::Service* s : services) builder.RegisterService(s);
  if (call_metrics_) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> timers;
    timers.push_back(metrics::CallMetricsInterceptor(*call_metrics_));
    builder.experimental().SetInterceptorCreators(std::move(timers));
  }
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server) return Unavailable("cannot listen on " + addresses);
  servers_.push_back(std::move(server));
  return Status::Ok();
}

int GrpcDaemon::WaitAndShutdown(std::chrono::milliseconds grace,
                                const std::function<void()>& before_shutdown) {
  int sig = signals_.Wait();
  log::Info(title_ + " stopping", {{"signal", sig}});
  if (before_shutdown) before_shutdown();
  ShutdownServers(std::chrono::system_clock::now() + grace);
  return 0;
}

void GrpcDaemon::ShutdownServers(std::chrono::system_clock::time_point deadline) {
  // One deadline for all: the grace period is the daemon's, not per server.
  for (auto& server : servers_) server->Shutdown(deadline);
  servers_.clear();  // waits for the servers' threads
}

}  // namespace pillar
