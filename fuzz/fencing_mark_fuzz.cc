// The agent's fencing marks are JSON files it reads back on every fenced
// write: whatever a file holds, the reader must give an error (never "no
// mark", which would unfence the volume) or a mark with a UUID and a
// non-negative generation, and never crash.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/fencing/fencing_marks.h"
#include "common/clock.h"
#include "common/fs.h"
#include "common/validate.h"
#include "fuzz_temp_dir.h"

namespace {

const std::string& Root() { return pillar::fuzz::TempDir("marks"); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pillar::PosixFs fs;
  pillar::SystemClock clock;
  pillar::agent::FencingMarks marks(fs, clock, Root());
  const std::string id = "demo/pvc-1";
  {
    std::ofstream out(marks.MarkPath(id), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  }
  auto mark = marks.Get(id);
  if (mark.ok()) {
    if (!mark->has_value()) std::abort();  // a file is there: never "no mark"
    if (!pillar::validate::Uuid("uid", (*mark)->volume_uid).ok() || (*mark)->generation < 0) {
      std::abort();
    }
  }
  return 0;
}
