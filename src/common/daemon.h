// The bootstrap every pillar daemon (agent, controller, node) shares: logging,
// SIGTERM/SIGINT, building and starting gRPC servers, graceful shutdown. A
// main wires its own objects between these calls:
//
//   GrpcDaemon daemon("controller", log_level);  // first: before any thread
//   ... open stores, start loops; on error: return daemon.Fail(status);
//   Status s = daemon.Serve({{csi_endpoint, grpc::InsecureServerCredentials()}},
//                           {&identity, &controller});
//   if (!s.ok()) return daemon.Fail(s);
//   return daemon.WaitAndShutdown(std::chrono::seconds(1), [&] { loop.Stop(); });
//
// Services passed to Serve must outlive the daemon's servers: declare them
// before calling Serve, and return through Fail or WaitAndShutdown, which
// stop the servers while the services still exist.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/grpc_metrics.h"
#include "common/grpc_tls.h"
#include "common/signals.h"
#include "common/status.h"

namespace pillar {

struct GrpcListener {
  // "unix:///path/to.sock" or "host:port" (port 0: the kernel picks one).
  std::string address;
  std::shared_ptr<grpc::ServerCredentials> credentials;
  // When set, receives the port actually bound (TCP listeners).
  int* bound_port = nullptr;
};

// Plaintext when `insecure` (demos; logged as a warning naming `what`), else
// mutual TLS from `tls`, every call admitted by `policy` first.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> ListenerCredentials(const std::string& what,
                                                                       const TlsFiles& tls,
                                                                       bool insecure,
                                                                       RpcPolicy policy);

// What every pillar server does against whoever reaches its port: a
// connection that has not finished its handshake within kHandshakeTimeout is
// closed, and one idle for kMaxConnectionIdle, so sockets opened and left
// silent cannot pile up until the process runs out of file descriptors.
inline constexpr std::chrono::seconds kHandshakeTimeout{10};
inline constexpr std::chrono::minutes kMaxConnectionIdle{10};
void HardenServer(grpc::ServerBuilder& builder);
// Raises this process's open-file limit to its hard limit (logged); what
// is left of a flood of connections then meets a far higher ceiling.
void RaiseFileLimit();

// Logs a loud warning when a CSI endpoint is not a unix socket: the CSI API
// has no authentication of its own, so on TCP anyone who reaches the port
// may create, publish and delete volumes.
void WarnIfCsiOnTcp(const std::string& endpoint);

class GrpcDaemon {
 public:
  // Starts logging as `component` at `log_level`, sets the TLS 1.3 floor
  // (RequireTls13) and blocks SIGTERM/SIGINT
  // (threads inherit the mask, so construct it before any thread starts).
  // `title` names the daemon in its start/stop messages (default: component).
  GrpcDaemon(const std::string& component, const std::string& log_level,
             const std::string& title = "");
  // Stops, without grace, any server still running.
  ~GrpcDaemon();
  GrpcDaemon(const GrpcDaemon&) = delete;
  GrpcDaemon& operator=(const GrpcDaemon&) = delete;

  // Logs "<title> cannot start" with `s`, stops any server already started
  // and returns the exit code for main (2).
  int Fail(const Status& s);

  // Builds and starts one server serving `services` on every listener. A
  // unix socket's directory is created and a stale socket file removed
  // first. Call once per set of services that share listeners (a server
  // reachable over TCP must not carry services meant for a local socket).
  Status Serve(const std::vector<GrpcListener>& listeners,
               const std::vector<grpc::Service*>& services);

  // Every call the servers Serve starts from now on answer is timed into
  // `calls` (see common/grpc_metrics.h).
  void TimeCalls(metrics::CallMetrics calls) { call_metrics_ = std::move(calls); }

  // Blocks until SIGTERM or SIGINT; logs "<title> stopping", runs
  // `before_shutdown` (the daemon's own loops), then shuts every server down,
  // cancelling calls still running after `grace`. Returns main's exit code (0).
  int WaitAndShutdown(std::chrono::milliseconds grace,
                      const std::function<void()>& before_shutdown = {});

 private:
  void ShutdownServers(std::chrono::system_clock::time_point deadline);

  std::string title_;
  Status tls_policy_;  // RequireTls13's; Serve fails unless OK
  TerminationSignals signals_;
  std::vector<std::unique_ptr<grpc::Server>> servers_;
  std::optional<metrics::CallMetrics> call_metrics_;
};

}  // namespace pillar
