// The Kubernetes store's watch against a scripted HTTP server on loopback
// (real sockets, real libcurl): a stream cut in the middle of an event, an
// event whose object is malformed and a server that ends the request are all
// survived; the watch resumes from the last version it delivered, and only a
// 410 Gone ends it (OUT_OF_RANGE: relist). The real API server runs the
// whole conformance suite in tests/k8s/suites/k8s-store.sh.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "store/kube/kube_store.h"

namespace pillar::store {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Answers each request with the next scripted body (HTTP/1.0 style: the
// body ends when the connection closes, which is how a cut stream looks).
class ScriptedServer {
 public:
  ScriptedServer() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(fd_, 8), 0);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~ScriptedServer() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }

  // Each entry: {status line code, body}.
  void Script(std::vector<std::pair<int, std::string>> answers) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& a : answers) answers_.push_back(std::move(a));
  }
  std::vector<std::string> Requests() {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  int port() const { return port_; }

 private:
  void Serve() {
    while (true) {
      int c = accept(fd_, nullptr, nullptr);
      if (c < 0) return;
      std::string req;
      char buf[4096];
      while (req.find("\r\n\r\n") == std::string::npos) {
        ssize_t n = read(c, buf, sizeof(buf));
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
      }
      std::pair<int, std::string> answer{503, R"({"kind":"Status","message":"no script"})"};
      {
        std::lock_guard<std::mutex> lock(mu_);
        requests_.push_back(req.substr(0, req.find("\r\n")));
        if (!answers_.empty()) {
          answer = std::move(answers_.front());
          answers_.pop_front();
        }
      }
      std::string head = "HTTP/1.0 " + std::to_string(answer.first) +
                         " X\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
      std::string out = head + answer.second;
      ssize_t ignored = write(c, out.data(), out.size());
      (void)ignored;
      close(c);
    }
  }

  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::deque<std::pair<int, std::string>> answers_;
  std::vector<std::string> requests_;
};

std::string Event(const std::string& type, const std::string& name, const std::string& rv) {
  return R"({"type":")" + type + R"(","object":{"apiVersion":"t.pillar/v1","kind":"PillarNode",)" +
         R"("metadata":{"name":")" + name + R"(","uid":"uid-)" + name + R"(","resourceVersion":")" +
         rv + R"("},"spec":{"nodeID":")" + name + "\"}}}\n";
}

class KubeWatchTest : public ::testing::Test {
 protected:
  std::unique_ptr<KubeStore> Store() {
    kube::Config config;
    config.server = "http://127.0.0.1:" + std::to_string(server_.port());
    auto client = kube::Client::Create(config);
    EXPECT_TRUE(client.ok()) << client.status().ToString();
    KubeStoreOptions o;
    o.kinds["PillarNode"] = {"t.pillar", "v1", "pillarnodes"};
    o.retry_base = std::chrono::milliseconds(10);
    o.retry_max = std::chrono::milliseconds(50);
    return std::make_unique<KubeStore>(std::shared_ptr<kube::Client>(std::move(client).value()), o);
  }

  // Waits until `n` events arrived or the watch failed.
  bool WaitFor(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(30),
                        [&] { return seen_.size() >= n || error_.has_value(); });
  }
  EventHandler OnEvent() {
    return [this](const store::Event& e) {
      std::lock_guard<std::mutex> lock(mu_);
      seen_.push_back(std::string(EventTypeName(e.type)) + " " + e.object.name + "@" +
                      e.object.resource_version);
      cv_.notify_all();
    };
  }
  ErrorHandler OnError() {
    return [this](const Status& s) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = s;
      cv_.notify_all();
    };
  }

  ScriptedServer server_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> seen_;
  std::optional<Status> error_;
};

TEST_F(KubeWatchTest, ACutStreamAndAMalformedObjectAreSurvivedAndTheWatchResumes) {
  const std::string second = Event("MODIFIED", "node-b", "12");
  server_.Script({
      // One good event, a malformed one (no uid), then half of an event: cut.
      {200, Event("ADDED", "node-a", "11") +
                R"({"type":"ADDED","object":{"metadata":{"name":"bad","resourceVersion":"11"}}})" +
                "\n" + second.substr(0, second.size() / 2)},
      // The resumed request: the whole event, then the server ends the request.
      {200, second},
      // Resumed again: a bookmark moves the version on, then the history is gone.
      {200,
       std::string(
           R"j({"type":"BOOKMARK","object":{"kind":"PillarNode","metadata":{"resourceVersion":"40"}}})j") +
           "\n" +
           R"j({"type":"ERROR","object":{"kind":"Status","code":410,"message":"too old resource version: 40 (45)"}})j" +
           "\n"},
  });
  auto store = Store();
  auto watch = store->Watch("PillarNode", "10", OnEvent(), OnError());
  ASSERT_TRUE(watch.ok()) << watch.status().ToString();
  ASSERT_TRUE(WaitFor(2));
  {
    std::unique_lock<std::mutex> lock(mu_);
    ASSERT_TRUE(cv_.wait_for(lock, std::chrono::seconds(30), [&] { return error_.has_value(); }));
  }
  EXPECT_THAT(seen_, ElementsAre("ADDED node-a@11", "MODIFIED node-b@12"))
      << "the malformed object skipped, the cut event delivered once, whole";
  EXPECT_EQ(error_->code(), Code::kOutOfRange) << error_->ToString();
  EXPECT_THAT(error_->message(), HasSubstr("relist"));
  auto requests = server_.Requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_THAT(requests[0], HasSubstr("resourceVersion=10&"));
  EXPECT_THAT(requests[0], HasSubstr("watch=1"));
  EXPECT_THAT(requests[0], HasSubstr("allowWatchBookmarks=true"));
  EXPECT_THAT(requests[1], HasSubstr("resourceVersion=11&"))
      << "resumed after the last event delivered";
  EXPECT_THAT(requests[2], HasSubstr("resourceVersion=12&"));
}

TEST_F(KubeWatchTest, AServerThatIsAwayIsRetriedNotFatal) {
  server_.Script({{503, R"({"kind":"Status","code":503,"message":"etcd unavailable"})"},
                  {500, "not even json"},
                  {200, Event("ADDED", "node-a", "21")}});
  auto store = Store();
  auto watch = store->Watch("PillarNode", "20", OnEvent(), OnError());
  ASSERT_TRUE(watch.ok());
  ASSERT_TRUE(WaitFor(1));
  EXPECT_FALSE(error_.has_value()) << error_->ToString();
  EXPECT_THAT(seen_, ElementsAre("ADDED node-a@21"));
}

}  // namespace
}  // namespace pillar::store
