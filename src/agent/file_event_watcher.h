// Calls back when a file is written, replaced or removed, on the kernel's
// event (inotify), not by polling. The directory is watched for the file's
// name: tools replace such files by rename (exportfs writes etab.tmp, then
// renames it over /var/lib/nfs/etab), which a watch on the file itself would
// lose after the first time. Bursts are debounced into one call.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "common/status.h"

namespace pillar::agent {

class FileEventWatcher {
 public:
  // `on_change` runs on the watcher's own thread, once `debounce` passed with
  // no further event of the file.
  FileEventWatcher(const std::string& path, std::chrono::milliseconds debounce,
                   std::function<void()> on_change);
  ~FileEventWatcher();  // Stop()
  FileEventWatcher(const FileEventWatcher&) = delete;
  FileEventWatcher& operator=(const FileEventWatcher&) = delete;

  // UNAVAILABLE naming the directory when it cannot be watched (absent:
  // no nfs-utils on this node).
  Status Start();
  // Wakes the thread and joins it; a callback under way finishes first.
  void Stop();

 private:
  void Run();

  std::string dir_;
  std::string name_;
  std::chrono::milliseconds debounce_;
  std::function<void()> on_change_;
  int inotify_fd_ = -1;
  int stop_fd_ = -1;  // an eventfd
  std::thread thread_;
};

}  // namespace pillar::agent
