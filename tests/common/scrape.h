// Test helpers for /metrics: a free TCP port to serve on, a plain HTTP GET
// of the endpoint, and a sample's value out of the Prometheus text format.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <optional>
#include <sstream>
#include <string>

namespace pillar::testing {

// A port the kernel just handed out on 127.0.0.1 and took back: free unless
// another process takes it in between (rare enough for a test).
inline int FreeTcpPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = -1;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// The body of GET http://127.0.0.1:PORT/metrics, or nullopt when the
// endpoint did not answer 200.
inline std::optional<std::string> ScrapeMetrics(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return std::nullopt;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return std::nullopt;
  }
  const std::string req = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return std::nullopt;
  }
  std::string resp;
  char buf[16384];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  if (resp.rfind("HTTP/1.", 0) != 0 || resp.find(" 200 ") == std::string::npos) return std::nullopt;
  size_t body = resp.find("\r\n\r\n");
  return body == std::string::npos ? std::string() : resp.substr(body + 4);
}

// The value of the sample `name` whose labels include every pair of
// `labels` (in any order); nullopt when no such sample is exposed.
inline std::optional<double> Sample(const std::string& text, const std::string& name,
                                    const std::map<std::string, std::string>& labels = {}) {
  std::istringstream lines(text);
  for (std::string l; std::getline(lines, l);) {
    if (l.empty() || l[0] == '#') continue;
    size_t end = l.find_first_of("{ ");
    if (end == std::string::npos || l.substr(0, end) != name) continue;
    std::string label_part;
    size_t value_at = end;
    if (l[end] == '{') {
      size_t close = l.find('}', end);
      if (close == std::string::npos) continue;
      label_part = l.substr(end, close - end + 1);
      value_at = close + 1;
    }
    bool all = true;
    for (const auto& [k, v] : labels) {
      if (label_part.find(k + "=\"" + v + "\"") == std::string::npos) all = false;
    }
    if (!all) continue;
    try {
      return std::stod(l.substr(value_at));
    } catch (...) {
      return std::nullopt;
    }
  }
  return std::nullopt;
}

}  // namespace pillar::testing
