// Daemons take SIGTERM/SIGINT synchronously: block them before any thread
// starts (threads inherit the mask), then wait for one on the main thread.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace pillar {

class TerminationSignals {
 public:
  TerminationSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);
  }
  // Blocks until SIGTERM or SIGINT arrives; returns its number.
  int Wait() {
    int sig = 0;
    sigwait(&set_, &sig);
    return sig;
  }

 private:
  sigset_t set_{};
};

}  // namespace pillar
