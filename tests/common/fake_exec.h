// A scripted Exec for unit tests: records every argv and answers from rules
// matched on the argv prefix, using outputs captured from the real tools.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/exec.h"

namespace pillar::testing {

class FakeExec : public Exec {
 public:
  using Handler = std::function<StatusOr<ExecResult>(const Command&)>;

  // Answers any command whose argv starts with `prefix`. The longest matching
  // prefix wins; a command with no rule fails the call with NOT_FOUND.
  void On(std::vector<std::string> prefix, Handler handler) {
    std::lock_guard<std::mutex> lock(mu_);
    rules_.push_back({std::move(prefix), std::move(handler)});
  }
  void OnOutput(std::vector<std::string> prefix, std::string out, int exit_code = 0,
                std::string err = "") {
    On(std::move(prefix), [out, exit_code, err](const Command&) -> StatusOr<ExecResult> {
      return ExecResult{exit_code, out, err};
    });
  }

  StatusOr<ExecResult> Run(const Command& cmd) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(cmd.argv);
    }
    return Answer(cmd);
  }

  // A pipeline is recorded as one call, "from... | to...", and each side is
  // answered by its own rule.
  StatusOr<PipeResult> RunPipe(const Command& from, const Command& to) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      std::vector<std::string> argv = from.argv;
      argv.push_back("|");
      argv.insert(argv.end(), to.argv.begin(), to.argv.end());
      calls_.push_back(std::move(argv));
    }
    PipeResult result;
    auto f = Answer(from);
    if (!f.ok()) return f.status();
    result.from = *f;
    auto t = Answer(to);
    if (!t.ok()) return t.status();
    result.to = *t;
    return result;
  }

  StatusOr<ExecResult> Answer(const Command& cmd) {
    Handler handler;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t best = 0;
      for (const auto& rule : rules_) {
        if (rule.prefix.size() > cmd.argv.size() || rule.prefix.size() < best) continue;
        if (std::equal(rule.prefix.begin(), rule.prefix.end(), cmd.argv.begin())) {
          best = rule.prefix.size();
          handler = rule.handler;
        }
      }
    }
    if (!handler) return NotFound("FakeExec: no rule for '" + cmd.ToString() + "'");
    return handler(cmd);
  }

  std::vector<std::vector<std::string>> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }
  // Calls joined with spaces, for readable assertions.
  std::vector<std::string> CallLines() {
    std::vector<std::string> out;
    for (const auto& argv : calls()) {
      Command c{argv, {}, {}};
      out.push_back(c.ToString());
    }
    return out;
  }
  void ClearCalls() {
    std::lock_guard<std::mutex> lock(mu_);
    calls_.clear();
  }

 private:
  struct Rule {
    std::vector<std::string> prefix;
    Handler handler;
  };
  std::mutex mu_;
  std::vector<Rule> rules_;
  std::vector<std::vector<std::string>> calls_;
};

}  // namespace pillar::testing
