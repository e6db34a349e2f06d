// The export-table watcher on a real inotify over a temp directory: a write,
// a rename over the file and a removal each call back once per burst; other
// files of the directory never do; Stop returns promptly.
#include "agent/file_event_watcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/temp_dir.h"

namespace pillar::agent {
namespace {

using namespace std::chrono_literals;
using pillar::testing::TempDir;

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

// Waits up to 5 s for `calls` to reach `want`.
bool WaitFor(const std::atomic<int>& calls, int want) {
  for (int i = 0; i < 500 && calls.load() < want; ++i) std::this_thread::sleep_for(10ms);
  return calls.load() >= want;
}

TEST(FileEventWatcherTest, WriteRenameAndRemoveOfTheFileEachCallBack) {
  TempDir tmp;
  std::string etab = tmp.Sub("etab");
  Write(etab, "/srv/a\t10.0.0.1(rw)\n");
  std::atomic<int> calls{0};
  FileEventWatcher w(etab, 20ms, [&] { ++calls; });
  ASSERT_TRUE(w.Start().ok());

  Write(etab, "");  // exportfs -ua
  ASSERT_TRUE(WaitFor(calls, 1));
  // exportfs writes etab.tmp and renames it over etab.
  Write(tmp.Sub("etab.tmp"), "/srv/b\t10.0.0.2(rw)\n");
  ASSERT_EQ(std::rename(tmp.Sub("etab.tmp").c_str(), etab.c_str()), 0);
  ASSERT_TRUE(WaitFor(calls, 2));
  ASSERT_EQ(std::remove(etab.c_str()), 0);
  ASSERT_TRUE(WaitFor(calls, 3));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(calls.load(), 3);
  w.Stop();
}

TEST(FileEventWatcherTest, ABurstIsOneCallAndOtherFilesAreIgnored) {
  TempDir tmp;
  std::string etab = tmp.Sub("etab");
  std::atomic<int> calls{0};
  FileEventWatcher w(etab, 150ms, [&] { ++calls; });
  ASSERT_TRUE(w.Start().ok());
  for (int i = 0; i < 10; ++i) Write(etab, std::to_string(i));
  Write(tmp.Sub("rmtab"), "x");
  ASSERT_TRUE(WaitFor(calls, 1));
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(calls.load(), 1) << "ten writes within the debounce are one repair";
  Write(tmp.Sub("xtab"), "y");
  Write(tmp.Sub("etab2"), "y");
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(calls.load(), 1) << "another file of the directory is not the export table";
}

TEST(FileEventWatcherTest, AMissingDirectoryIsAClearErrorAndStopIsPrompt) {
  TempDir tmp;
  FileEventWatcher missing(tmp.Sub("no-such-dir/etab"), 10ms, [] {});
  Status s = missing.Start();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find(tmp.Sub("no-such-dir")), std::string::npos) << s.message();

  FileEventWatcher idle(tmp.Sub("etab"), 10ms, [] {});
  ASSERT_TRUE(idle.Start().ok());
  auto start = std::chrono::steady_clock::now();
  idle.Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s) << "no busy loop to finish, no sleep";
  idle.Stop();  // twice is harmless
}

}  // namespace
}  // namespace pillar::agent
