// The kernel's NVMe over Fabrics connect interface, /dev/nvme-fabrics: the
// new controller's options, comma-separated, in one write(2), and its
// "instance=N,cntlid=M" read back from the same open file. nvme-cli does the
// same thing; pillar does it itself so that a DH-HMAC-CHAP key never goes on
// a command line, where any local user reads it in /proc/PID/cmdline.
#pragma once

#include <string>

#include "common/status.h"

namespace pillar::node {

class Fabrics {
 public:
  virtual ~Fabrics() = default;
  // Creates one controller; returns the kernel's reply. The options may hold
  // secrets: implementations never log them or put them in a status.
  virtual StatusOr<std::string> Connect(const std::string& options) = 0;
};

class DevFabrics : public Fabrics {
 public:
  explicit DevFabrics(std::string path = "/dev/nvme-fabrics") : path_(std::move(path)) {}
  // UNAVAILABLE naming the errno on any failure (the kernel's own log says
  // more: a refused key, an unreachable port); ALREADY_EXISTS for EALREADY
  // (this host has that controller already).
  StatusOr<std::string> Connect(const std::string& options) override;

 private:
  std::string path_;
};

}  // namespace pillar::node
