#include "kube/client.h"

#include <curl/curl.h>
#include <sys/stat.h>

#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

namespace pillar::kube {
namespace {

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

size_t Collect(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

curl_blob Blob(const std::string& s) {
  curl_blob b{};
  b.data = const_cast<char*>(s.data());
  b.len = s.size();
  b.flags = CURL_BLOB_COPY;
  return b;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ')) s.pop_back();
  return s;
}

// The state of one watch transfer, shared with libcurl's callbacks.
struct WatchTransfer {
  CURL* curl = nullptr;
  const WatchLineHandler* on_event = nullptr;
  const std::atomic<bool>* cancel = nullptr;
  std::string pending;     // bytes of a line not yet complete
  std::string error_body;  // the body of a non-2xx answer
  bool stopped = false;    // the handler asked to end the stream
  std::optional<Status> failure;

  static size_t Write(char* data, size_t size, size_t n, void* self) {
    auto* t = static_cast<WatchTransfer*>(self);
    const size_t len = size * n;
    long code = 0;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
    if (code < 200 || code >= 300) {
      t->error_body.append(data, len);
      return len;
    }
    t->pending.append(data, len);
    size_t start = 0;
    while (true) {
      size_t nl = t->pending.find('\n', start);
      if (nl == std::string::npos) break;
      std::string_view line(t->pending.data() + start, nl - start);
      start = nl + 1;
      if (line.empty() || line == "\r") continue;
      nlohmann::json event = nlohmann::json::parse(line, nullptr, false);
      if (event.is_discarded() || !event.is_object()) {
        t->failure = Internal("watch stream: a line that is not a JSON object: \"" +
                              std::string(line.substr(0, 80)) + "\"");
        return 0;  // ends the transfer
      }
      if (!(*t->on_event)(event)) {
        t->stopped = true;
        return 0;
      }
    }
    t->pending.erase(0, start);
    return len;
  }

  static int Progress(void* self, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
    auto* t = static_cast<WatchTransfer*>(self);
    return t->cancel != nullptr && t->cancel->load() ? 1 : 0;
  }
};

}  // namespace

Status StatusFromHttp(long http_code, const std::string& method, const std::string& path,
                      const std::string& body) {
  std::string message;
  std::string reason;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object()) {
    if (j.contains("message") && j["message"].is_string()) message = j["message"];
    if (j.contains("reason") && j["reason"].is_string()) reason = j["reason"];
  }
  if (message.empty()) message = Trim(body.substr(0, 200));
  const std::string what = method + " " + path + ": HTTP " + std::to_string(http_code) +
                           (reason.empty() ? "" : " " + reason) +
                           (message.empty() ? "" : ": " + message);
  switch (http_code) {
    case 400:
    case 422:
      return InvalidArgument(what);
    case 401:
      return Status(Code::kUnauthenticated, what);
    case 403:
      return PermissionDenied(what);
    case 404:
      return NotFound(what);
    case 409:
      return reason == "AlreadyExists" ? AlreadyExists(what) : Aborted(what);
    case 410:
      return OutOfRange(what);
    default:
      break;
  }
  if (http_code == 429 || http_code >= 500) return Unavailable(what);
  return Internal(what);
}

struct Client::Impl {
  Config config;
  std::mutex mu;
  std::vector<CURL*> idle;  // easy handles kept for their connections
  std::atomic<uint64_t> requests{0};
  RequestObserver observer;

  StatusOr<nlohmann::json> Observed(const std::string& method, const std::string& path,
                                    const std::optional<nlohmann::json>& body,
                                    const std::string& content_type) {
    if (!observer) return Request(method, path, body, content_type);
    const auto start = std::chrono::steady_clock::now();
    auto r = Request(method, path, body, content_type);
    observer(method, r.status().code(),
             std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    return r;
  }
  std::string token;
  struct timespec token_mtime {};

  ~Impl() {
    for (CURL* c : idle) curl_easy_cleanup(c);
  }

  CURL* Take() {
    {
      std::lock_guard lock(mu);
      if (!idle.empty()) {
        CURL* c = idle.back();
        idle.pop_back();
        curl_easy_reset(c);
        return c;
      }
    }
    return curl_easy_init();
  }

  void Give(CURL* c) {
    std::lock_guard lock(mu);
    if (idle.size() < 16) {
      idle.push_back(c);
      return;
    }
    curl_easy_cleanup(c);
  }

  // The bearer token: the configured one, or the file's, read again when it
  // changes (projected ServiceAccount tokens rotate).
  StatusOr<std::string> Token() {
    std::lock_guard lock(mu);
    if (config.token_file.empty()) return config.token;
    struct stat st {};
    if (stat(config.token_file.c_str(), &st) != 0) {
      return Unavailable("token file " + config.token_file + " cannot be read");
    }
    if (token.empty() || st.st_mtim.tv_sec != token_mtime.tv_sec ||
        st.st_mtim.tv_nsec != token_mtime.tv_nsec) {
      std::ifstream in(config.token_file);
      std::ostringstream s;
      s << in.rdbuf();
      token = Trim(s.str());
      token_mtime = st.st_mtim;
    }
    return token;
  }

  // Everything a request needs but its method and body.
  StatusOr<curl_slist*> Prepare(CURL* c, const std::string& path, const std::string& content_type) {
    const std::string url = config.server + path;
    curl_easy_setopt(c, CURLOPT_URL, url.c_str());
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 30L);
    curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 10L);
    curl_easy_setopt(c, CURLOPT_SSLVERSION, static_cast<long>(CURL_SSLVERSION_TLSv1_2));
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!config.ca_pem.empty()) {
      curl_blob ca = Blob(config.ca_pem);
      curl_easy_setopt(c, CURLOPT_CAINFO_BLOB, &ca);
    }
    if (!config.client_cert_pem.empty()) {
      curl_blob cert = Blob(config.client_cert_pem);
      curl_blob key = Blob(config.client_key_pem);
      curl_easy_setopt(c, CURLOPT_SSLCERT_BLOB, &cert);
      curl_easy_setopt(c, CURLOPT_SSLCERTTYPE, "PEM");
      curl_easy_setopt(c, CURLOPT_SSLKEY_BLOB, &key);
      curl_easy_setopt(c, CURLOPT_SSLKEYTYPE, "PEM");
    }
    curl_slist* headers = curl_slist_append(nullptr, "Accept: application/json");
    headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
    auto bearer = Token();
    if (!bearer.ok()) {
      curl_slist_free_all(headers);
      return bearer.status();
    }
    if (!bearer->empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + *bearer).c_str());
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    return headers;
  }

  StatusOr<nlohmann::json> Request(const std::string& method, const std::string& path,
                                   const std::optional<nlohmann::json>& body,
                                   const std::string& content_type) {
    std::string payload;
    if (body) {
      try {
        payload = body->dump();
      } catch (const nlohmann::json::exception& e) {
        return InvalidArgument(method + " " + path + ": the body cannot be sent: " + e.what());
      }
    }
    CURL* c = Take();
    if (c == nullptr) return Internal("curl_easy_init failed");
    auto headers = Prepare(c, path, content_type);
    if (!headers.ok()) {
      Give(c);
      return headers.status();
    }
    std::string response;
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
    if (method == "GET") curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
    if (body) {
      curl_easy_setopt(c, CURLOPT_POSTFIELDS, payload.c_str());
      curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(payload.size()));
    }
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, Collect);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &response);
    requests++;
    CURLcode rc = curl_easy_perform(c);
    long code = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
    curl_slist_free_all(*headers);
    Give(c);
    if (rc != CURLE_OK) {
      return Unavailable(method + " " + path + " at " + config.server + ": " +
                         curl_easy_strerror(rc));
    }
    if (code < 200 || code >= 300) return StatusFromHttp(code, method, path, response);
    if (response.empty()) return nlohmann::json::object();
    nlohmann::json j = nlohmann::json::parse(response, nullptr, false);
    if (j.is_discarded()) {
      return Internal(method + " " + path + ": the answer is not JSON: \"" +
                      response.substr(0, 80) + "\"");
    }
    return j;
  }
};

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() = default;

StatusOr<std::unique_ptr<Client>> Client::Create(Config config) {
  if (config.server.rfind("https://", 0) != 0 && config.server.rfind("http://", 0) != 0) {
    return InvalidArgument("Kubernetes server \"" + config.server + "\" is not an http(s) URL");
  }
  if (config.client_cert_pem.empty() != config.client_key_pem.empty()) {
    return InvalidArgument("a client certificate needs its key, and a key its certificate");
  }
  GlobalInit();
  auto impl = std::make_unique<Impl>();
  impl->config = std::move(config);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

StatusOr<nlohmann::json> Client::Call(const std::string& method, const std::string& path,
                                      const std::optional<nlohmann::json>& body) {
  return impl_->Observed(method, path, body,
                         method == "PATCH" ? "application/merge-patch+json" : "application/json");
}

StatusOr<nlohmann::json> Client::Patch(const std::string& path, const nlohmann::json& body,
                                       const std::string& content_type) {
  return impl_->Observed("PATCH", path, body, content_type);
}

Status Client::Watch(const std::string& path, const WatchLineHandler& on_event,
                     const std::atomic<bool>* cancel) {
  CURL* c = curl_easy_init();
  if (c == nullptr) return Internal("curl_easy_init failed");
  auto headers = impl_->Prepare(c, path, "application/json");
  if (!headers.ok()) {
    curl_easy_cleanup(c);
    return headers.status();
  }
  WatchTransfer t;
  t.curl = c;
  t.on_event = &on_event;
  t.cancel = cancel;
  curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, WatchTransfer::Write);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, WatchTransfer::Progress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  impl_->requests++;
  CURLcode rc = curl_easy_perform(c);
  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  curl_slist_free_all(*headers);
  curl_easy_cleanup(c);
  if (t.stopped) return Status::Ok();
  if (t.failure) return *t.failure;
  if (rc == CURLE_ABORTED_BY_CALLBACK) return Status(Code::kCancelled, "watch cancelled");
  if (code != 0 && (code < 200 || code >= 300)) {
    return StatusFromHttp(code, "GET", path, t.error_body);
  }
  if (rc != CURLE_OK) {
    return Unavailable("watch " + path + " at " + impl_->config.server + ": " +
                       curl_easy_strerror(rc));
  }
  if (!Trim(t.pending).empty()) {
    return Internal("watch stream ended in the middle of an event (" +
                    std::to_string(t.pending.size()) + " bytes)");
  }
  return Status::Ok();
}

uint64_t Client::requests() const { return impl_->requests.load(); }

void Client::SetRequestObserver(RequestObserver observer) { impl_->observer = std::move(observer); }

const Config& Client::config() const { return impl_->config; }

}  // namespace pillar::kube
