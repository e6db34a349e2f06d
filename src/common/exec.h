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

// Each side of a pipeline, as it ended.
struct PipeResult {
  ExecResult from;  // its stdout went to `to`, so `out` stays empty
  ExecResult to;
};

class Exec {
 public:
  virtual ~Exec() = default;
  // Fails only when the program cannot be started or times out; a non-zero
  // exit is reported in ExecResult.
  virtual StatusOr<ExecResult> Run(const Command& cmd) = 0;
  // Runs `from | to` without a shell: from's stdout feeds to's stdin (from's
  // own stdin is empty, its stdin_data ignored). Both run under the longer of
  // their timeouts and are killed together when it passes. By default an
  // Exec runs no pipelines (UNIMPLEMENTED).
  virtual StatusOr<PipeResult> RunPipe(const Command& from, const Command& to);

  // Runs and requires exit code 0; the error names the command and stderr.
  Status RunOk(const Command& cmd, ExecResult* result = nullptr);
  // Runs the pipeline and requires both sides to exit 0; the error names the
  // side that failed first (the reader's error explains a writer's EPIPE).
  Status RunPipeOk(const Command& from, const Command& to);
};

class SystemExec : public Exec {
 public:
  StatusOr<ExecResult> Run(const Command& cmd) override;
  StatusOr<PipeResult> RunPipe(const Command& from, const Command& to) override;
};

}  // namespace pillar
