// The ownership marks the backends read back (issue 11): the file backend's
// sidecar JSON (volumes' and snapshots') and lvm's lv_tags. Any input gives an error or an owner
// that is empty or a UUID, and a sidecar survives a round trip.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/backends/file_backend.h"
#include "agent/backends/lvm_backend.h"
#include "common/validate.h"

namespace {

void CheckOwner(const std::string& owner) {
  if (!owner.empty() && !pillar::validate::Uuid("owner", owner).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  auto sidecar = pillar::agent::ParseFileSidecar(text);
  if (sidecar.ok()) {
    CheckOwner(sidecar->volume_uid);
    if (sidecar->mode == pillar::agent::VolumeMode::kFilesystem && sidecar->size_bytes <= 0) {
      std::abort();
    }
    auto again = pillar::agent::ParseFileSidecar(pillar::agent::FormatFileSidecar(*sidecar));
    if (!again.ok() || again->mode != sidecar->mode || again->volume_uid != sidecar->volume_uid ||
        (sidecar->mode == pillar::agent::VolumeMode::kFilesystem &&
         again->size_bytes != sidecar->size_bytes)) {
      std::abort();
    }
  }
  auto snap = pillar::agent::ParseFileSnapshotSidecar(text);
  if (snap.ok()) {
    CheckOwner(snap->snapshot_uid);
    if (snap->snapshot_uid.empty() || snap->size_bytes <= 0 || snap->created_unix_nanos <= 0 ||
        !pillar::validate::VolumeName("source", snap->source_volume).ok()) {
      std::abort();
    }
    auto again =
        pillar::agent::ParseFileSnapshotSidecar(pillar::agent::FormatFileSnapshotSidecar(*snap));
    if (!again.ok() || again->snapshot_uid != snap->snapshot_uid ||
        again->size_bytes != snap->size_bytes || again->source_volume != snap->source_volume) {
      std::abort();
    }
  }
  auto owner = pillar::agent::LvmBackend::OwnerFromTags(text);
  if (owner.ok()) CheckOwner(*owner);
  return 0;
}
