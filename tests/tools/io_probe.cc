// io-probe: a consumer's I/O across a fault, for the e2e recovery scenarios
// (issue 28), run by root in a guest.
//
//   io-probe write PATH STOPFILE   1 MiB O_DIRECT writes, each followed by
//                                  fsync, every 100 ms, round-robin over the
//                                  first 8 MiB of PATH (a file or a device);
//                                  when STOPFILE appears, reads the 8 MiB back
//                                  (O_DIRECT) and compares it with the last
//                                  write of each block
//   io-probe read PATH STOPFILE    a 4 KiB O_DIRECT read of PATH (reopened
//                                  each time, so a lost NFS export shows)
//                                  every 100 ms
//
// Prints one line: "ios=N errors=E max_gap_ms=G gap_end_us=T last_ok_us=L
// verified=ok|BAD first_error=..." where the gap is the longest time between
// two successful I/Os' completions, gap_end_us the wall clock (µs since the
// epoch) at its end and last_ok_us the wall clock of the last successful I/O.
// While it runs, each success that ends a gap of more than a second is told
// on stderr at once ("io-probe: resumed after a gap of G ms at T us"), so a
// harness can see the I/O resume without stopping the probe. Exit 0 when
// every byte read back matched (errors are reported, not fatal: the scenario
// decides), 1 on a mismatch, 2 on usage or setup errors.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr size_t kBlock = 1 << 20;
constexpr int kBlocks = 8;
constexpr size_t kReadSize = 4096;

int64_t WallUs() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Pattern(char* buf, uint64_t seq) {
  auto* words = reinterpret_cast<uint64_t*>(buf);
  for (size_t i = 0; i < kBlock / sizeof(uint64_t); ++i) words[i] = seq * 0x9E3779B97F4A7C15ULL + i;
}

bool Exists(const char* path) {
  struct stat st {};
  return stat(path, &st) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::strcmp(argv[1], "write") != 0 && std::strcmp(argv[1], "read") != 0)) {
    std::fprintf(stderr, "usage: io-probe write|read PATH STOPFILE\n");
    return 2;
  }
  const bool writing = std::strcmp(argv[1], "write") == 0;
  const char* path = argv[2];
  const char* stop = argv[3];
  size_t size = writing ? kBlock : kReadSize;
  void* mem = nullptr;
  if (posix_memalign(&mem, 4096, size) != 0) return 2;
  char* buf = static_cast<char*>(mem);
  std::vector<uint64_t> last(kBlocks, 0);  // the sequence number each block holds
  int wfd = -1;
  if (writing) {
    wfd = open(path, O_RDWR | O_CREAT | O_DIRECT, 0644);
    if (wfd < 0) {
      std::fprintf(stderr, "io-probe: open %s: %s\n", path, std::strerror(errno));
      return 2;
    }
  }
  uint64_t ios = 0;
  uint64_t errors = 0;
  std::string first_error;
  int64_t last_ok = WallUs();
  int64_t max_gap = 0;
  int64_t gap_end = 0;
  for (uint64_t seq = 1; !Exists(stop); ++seq) {
    auto next = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    bool ok = false;
    const char* what = "";
    if (writing) {
      int block = static_cast<int>(seq % kBlocks);
      Pattern(buf, seq);
      // A failed write leaves the block's content unknown: never verified.
      last[block] = 0;
      if (pwrite(wfd, buf, kBlock, static_cast<off_t>(block) * kBlock) !=
          static_cast<ssize_t>(kBlock)) {
        what = "pwrite";
      } else if (fsync(wfd) != 0) {
        what = "fsync";
      } else {
        last[block] = seq;
        ok = true;
      }
    } else {
      int fd = open(path, O_RDONLY | O_DIRECT);
      if (fd < 0) {
        what = "open";
      } else {
        ok = pread(fd, buf, kReadSize, 0) >= 0;
        if (!ok) what = "pread";
        close(fd);
      }
    }
    if (ok) {
      ++ios;
      int64_t now = WallUs();
      if (now - last_ok > max_gap) {
        max_gap = now - last_ok;
        gap_end = now;
      }
      if (now - last_ok > 1000000) {
        std::fprintf(stderr, "io-probe: resumed after a gap of %lld ms at %lld us\n",
                     static_cast<long long>((now - last_ok) / 1000), static_cast<long long>(now));
      }
      last_ok = now;
    } else {
      ++errors;
      if (first_error.empty()) first_error = std::string(what) + ": " + std::strerror(errno);
    }
    std::this_thread::sleep_until(next);
  }
  bool verified = true;
  if (writing) {
    for (int b = 0; b < kBlocks; ++b) {
      if (last[b] == 0) continue;
      std::vector<char> want(kBlock);
      Pattern(want.data(), last[b]);
      if (pread(wfd, buf, kBlock, static_cast<off_t>(b) * kBlock) != static_cast<ssize_t>(kBlock) ||
          std::memcmp(buf, want.data(), kBlock) != 0) {
        verified = false;
      }
    }
    close(wfd);
  }
  std::printf(
      "ios=%llu errors=%llu max_gap_ms=%lld gap_end_us=%lld last_ok_us=%lld verified=%s "
      "first_error=%s\n",
      static_cast<unsigned long long>(ios), static_cast<unsigned long long>(errors),
      static_cast<long long>(max_gap / 1000), static_cast<long long>(gap_end),
      static_cast<long long>(last_ok), verified ? "ok" : "BAD",
      first_error.empty() ? "none" : first_error.c_str());
  free(mem);
  return verified ? 0 : 1;
}
