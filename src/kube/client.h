// The Kubernetes API over HTTPS (libcurl): where to connect and as whom
// (a kubeconfig or the in-cluster ServiceAccount files), one JSON request at
// a path, and watch streams. TLS is always verified against the cluster CA.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/status.h"
#include "kube/rest.h"

namespace pillar::kube {

struct Config {
  std::string server;           // "https://host:port", no trailing slash
  std::string ca_pem;           // the CA the server's certificate chains to (PEM)
  std::string client_cert_pem;  // client certificate (PEM), optional
  std::string client_key_pem;   // its key (PEM), required with the certificate
  std::string token;            // bearer token, optional
  // When set, the bearer token is read from this file and read again when it
  // changes (projected ServiceAccount tokens rotate).
  std::string token_file;
  std::string namespace_name = "default";  // the context's or the pod's namespace
};

// A kubeconfig file: the current context (or `context` when given), its
// cluster (server, certificate-authority[-data]) and user
// (client-certificate[-data], client-key[-data], token, tokenFile). Relative
// file paths are relative to the kubeconfig's folder. INVALID_ARGUMENT naming
// the missing or malformed field; NOT_FOUND when the file does not exist.
StatusOr<Config> LoadKubeconfig(const std::string& path, const std::string& context = "");

// In a pod: KUBERNETES_SERVICE_HOST/PORT and the files under `sa_dir`
// (token, ca.crt, namespace). FAILED_PRECONDITION when not in a pod.
StatusOr<Config> InClusterConfig(
    const std::string& sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

// "" = in-cluster; otherwise a kubeconfig path.
StatusOr<Config> LoadConfig(const std::string& kubeconfig);

// One line of a watch stream: {"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR,
// "object": {...}}. Return false to end the stream.
using WatchLineHandler = std::function<bool(const nlohmann::json& event)>;

class Client : public Rest {
 public:
  static StatusOr<std::unique_ptr<Client>> Create(Config config);
  ~Client() override;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // Rest: JSON in and out; PATCH is sent as application/merge-patch+json.
  // Safe to call from many threads at once (connections are reused).
  StatusOr<nlohmann::json> Call(const std::string& method, const std::string& path,
                                const std::optional<nlohmann::json>& body = {}) override;

  // A PATCH with an explicit content type: "application/json-patch+json",
  // "application/merge-patch+json" or "application/apply-patch+yaml".
  StatusOr<nlohmann::json> Patch(const std::string& path, const nlohmann::json& body,
                                 const std::string& content_type);

  // GET `path` (which carries watch=1 and its other parameters) and hand each
  // event line to `on_event` as it arrives, until the server ends the stream
  // (OK), `on_event` returns false (OK), `*cancel` becomes true (CANCELLED,
  // noticed within about a second), or the connection fails (UNAVAILABLE).
  // A non-2xx answer is mapped like Call's. A line that is not JSON is
  // INTERNAL naming the line's start, and ends the stream.
  Status Watch(const std::string& path, const WatchLineHandler& on_event,
               const std::atomic<bool>* cancel);

  // Requests sent so far (Call, Patch, Watch), for benchmarks.
  uint64_t requests() const;

  // Told of every finished Call and Patch (its verb, the code its answer
  // maps to, its seconds): the controller's store metrics. Set it before
  // the first request; watches are long by design and are not told.
  using RequestObserver = std::function<void(const std::string& verb, Code code, double seconds)>;
  void SetRequestObserver(RequestObserver observer);

  const Config& config() const;

 private:
  struct Impl;
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// HTTP status + Kubernetes Status body -> pillar Status, as Rest documents
// (409 with reason AlreadyExists -> ALREADY_EXISTS, other 409 -> ABORTED, 410
// -> OUT_OF_RANGE, 404 -> NOT_FOUND, 400/422 -> INVALID_ARGUMENT, 401 ->
// UNAUTHENTICATED, 403 -> PERMISSION_DENIED, 429/5xx -> UNAVAILABLE). The
// message carries the method, path and the server's own message.
Status StatusFromHttp(long http_code, const std::string& method, const std::string& path,
                      const std::string& body);

}  // namespace pillar::kube
