// Runs programs by argv (never through a shell) with a timeout and captured
// output. Everything that runs a command takes an Exec&, so unit tests can
// record command lines and replay captured outputs.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "common/status.h"

namespace pillar {

struct Command {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH
  std::string stdin_data;
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};

  std::string ToString() const;  // for logs and error messages
};

struct ExecResult {
  int exit_code = 0;  // 128+signal when killed by a signal
  std::string out;
  std::string err;
};

class Exec {
 public:
  virtual ~Exec() = default;
  // Fails only when the program cannot be started or times out; a non-zero
  // exit is reported in ExecResult.
  virtual StatusOr<ExecResult> Run(const Command& cmd) = 0;

  // Runs and requires exit code 0; the error names the command and stderr.
  Status RunOk(const Command& cmd, ExecResult* result = nullptr);
};

class SystemExec : public Exec {
 public:
  StatusOr<ExecResult> Run(const Command& cmd) override;
};

}  // namespace pillar
