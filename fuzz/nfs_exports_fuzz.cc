// knfsd exports: the export path validator, and the reader of the agent's
// own exports.d file (read back on every Get). Any input gives an error or a
// path that is absolute and one token; never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/exporters/nfs_exporter.h"
#include "common/exec.h"
#include "common/fs.h"
#include "fuzz_temp_dir.h"

namespace {

// exportfs -v with nothing exported.
class NoExports : public pillar::Exec {
 public:
  pillar::StatusOr<pillar::ExecResult> Run(const pillar::Command&) override {
    return pillar::ExecResult{0, "", ""};
  }
};

const std::string& Dir() { return pillar::fuzz::TempDir("exports"); }

bool OneAbsoluteToken(const std::string& path) {
  if (path.empty() || path[0] != '/') return false;
  for (char c : path) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '"' || c == '\0') return false;
  }
  return path.find("/../") == std::string::npos && !path.ends_with("/..");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  if (pillar::agent::ValidateExportPath("path", text).ok() && !OneAbsoluteToken(text)) {
    std::abort();
  }
  NoExports exec;
  pillar::PosixFs fs;
  pillar::agent::NfsExporter nfs(exec, fs, Dir(), Dir());
  const std::string id = "demo/pvc-1";
  {
    std::ofstream out(nfs.ExportsFile(id), std::ios::binary | std::ios::trunc);
    out << text;
  }
  auto got = nfs.Get(id);
  if (got.ok() && got->has_value() && !OneAbsoluteToken((*got)->target_id)) std::abort();
  return 0;
}
