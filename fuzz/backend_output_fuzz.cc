// lvm2 and zfs report parsing: the backends read the tools' JSON and
// tab-separated output; arbitrary output must give an error or volumes with
// valid names, never a crash; snapshot listings likewise.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/backends/lvm_backend.h"
#include "agent/backends/zfs_backend.h"
#include "common/fs.h"
#include "common/validate.h"

namespace {

class FuzzExec : public pillar::Exec {
 public:
  explicit FuzzExec(std::string out) : out_(std::move(out)) {}
  pillar::StatusOr<pillar::ExecResult> Run(const pillar::Command&) override {
    return pillar::ExecResult{0, out_, ""};
  }

 private:
  std::string out_;
};

void Check(const pillar::StatusOr<std::vector<pillar::agent::BackendVolume>>& vols) {
  if (!vols.ok()) return;
  for (const auto& v : *vols) {
    if (!pillar::validate::VolumeName("name", v.name).ok() || v.size_bytes < 0) std::abort();
  }
}

// Snapshots: valid names, a source volume with a valid name, sizes >= 0.
void Check(const pillar::StatusOr<std::vector<pillar::agent::BackendSnapshot>>& snaps) {
  if (!snaps.ok()) return;
  for (const auto& s : *snaps) {
    if (!pillar::validate::VolumeName("name", s.name).ok() ||
        !pillar::validate::VolumeName("source", s.source_volume).ok() || s.size_bytes < 0 ||
        s.used_bytes < 0 || s.deleted) {
      std::abort();
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string out(reinterpret_cast<const char*>(data), size);
  FuzzExec exec(out);
  pillar::PosixFs fs;
  pillar::agent::LvmBackend lvm("vg0", "", exec);
  Check(lvm.List());
  (void)lvm.Capacity();
  pillar::agent::LvmBackend thin("vg0", "thinpool", exec);
  Check(thin.List());
  (void)thin.Capacity();
  Check(thin.ListSnapshots());
  (void)pillar::agent::LvmBackend::ParseLvTime(out);
  pillar::agent::ZfsBackend zfs("tank/pillar", exec, fs);
  Check(zfs.List());
  (void)zfs.Capacity();
  Check(zfs.ListSnapshots());
  return 0;
}
