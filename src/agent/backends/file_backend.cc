#include "agent/backends/file_backend.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <regex>

#include "agent/backends/backend_util.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

using backend_util::kChangeTimeout;
using backend_util::kQueryTimeout;

constexpr int64_t kSectorBytes = 512;
constexpr char kImageSuffix[] = ".img";
constexpr char kSidecarDir[] = ".pillar";

bool IsLoopDevice(const std::string& path) {
  static const std::regex kLoop("/dev/loop[0-9]+");
  return std::regex_match(path, kLoop);
}

}  // namespace

Status FileBackend::CheckConfig() const {
  RETURN_IF_ERROR(validate::PoolName("pool", pool_));
  if (dir_.empty() || dir_.front() != '/' || dir_.find("/../") != std::string::npos ||
      dir_.ends_with("/..")) {
    return InvalidArgument("file pool " + pool_ + ": directory '" + dir_ + "' must be absolute");
  }
  return Status::Ok();
}

std::string FileBackend::ImagePath(const std::string& name) const {
  return JoinPath(dir_, name + kImageSuffix);
}
std::string FileBackend::DirPath(const std::string& name) const { return JoinPath(dir_, name); }
std::string FileBackend::SidecarPath(const std::string& name) const {
  return JoinPath(JoinPath(dir_, kSidecarDir), name + ".json");
}

std::string FileBackend::Object(const std::string& name, VolumeMode mode) const {
  return "file pool " + pool_ + ": " +
         (mode == VolumeMode::kBlock ? name + kImageSuffix : "directory " + name);
}

StatusOr<FileSidecar> ParseFileSidecar(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return InvalidArgument("not a JSON object");
  FileSidecar out;
  auto mode = doc.find("mode");
  if (mode == doc.end() || !mode->is_string()) return InvalidArgument("mode is not a string");
  if (*mode == "block") {
    out.mode = VolumeMode::kBlock;
  } else if (*mode == "filesystem") {
    out.mode = VolumeMode::kFilesystem;
    auto size = doc.find("size_bytes");
    if (size == doc.end() || !size->is_number_integer() ||
        (size->is_number_unsigned() && size->get<uint64_t>() > INT64_MAX)) {
      return InvalidArgument("size_bytes is not an integer");
    }
    out.size_bytes = size->get<int64_t>();
    if (out.size_bytes <= 0) return InvalidArgument("size_bytes is not positive");
  } else {
    return InvalidArgument("mode is neither block nor filesystem");
  }
  if (auto uid = doc.find("volumeUid"); uid != doc.end()) {
    if (!uid->is_string()) return InvalidArgument("volumeUid is not a string");
    out.volume_uid = uid->get<std::string>();
    RETURN_IF_ERROR(validate::Uuid("volumeUid", out.volume_uid));
  }
  return out;
}

std::string FormatFileSidecar(const FileSidecar& sidecar) {
  nlohmann::json doc = {{"mode", VolumeModeName(sidecar.mode)}};
  if (sidecar.mode == VolumeMode::kFilesystem) doc["size_bytes"] = sidecar.size_bytes;
  if (!sidecar.volume_uid.empty()) doc["volumeUid"] = sidecar.volume_uid;
  return doc.dump() + "\n";
}

StatusOr<std::optional<FileSidecar>> FileBackend::ReadSidecar(const std::string& name) {
  const std::string path = SidecarPath(name);
  if (!fs_.Exists(path)) return std::optional<FileSidecar>();
  ASSIGN_OR_RETURN(std::string text, fs_.ReadFile(path));
  StatusOr<FileSidecar> sidecar = ParseFileSidecar(text);
  if (!sidecar.ok()) {
    return Internal("volume " + Id(name) + ": sidecar " + path +
                    " is malformed: " + sidecar.status().message());
  }
  return std::optional<FileSidecar>(std::move(*sidecar));
}

Status FileBackend::WriteSidecar(const std::string& name, const FileSidecar& sidecar) {
  RETURN_IF_ERROR(fs_.MakeDirs(JoinPath(dir_, kSidecarDir)));
  return fs_.WriteFileAtomic(SidecarPath(name), FormatFileSidecar(sidecar));
}

StatusOr<std::optional<BackendVolume>> FileBackend::FindRow(const std::string& name) {
  const std::string image = ImagePath(name);
  ASSIGN_OR_RETURN(std::optional<FileSidecar> sidecar, ReadSidecar(name));
  if (fs_.Exists(image)) {
    ASSIGN_OR_RETURN(int64_t size, fs_.FileSize(image));
    BackendVolume vol{name, size, VolumeMode::kBlock, "", "", ""};
    if (sidecar && sidecar->mode == VolumeMode::kBlock) vol.owner_uid = sidecar->volume_uid;
    return std::optional<BackendVolume>(std::move(vol));
  }
  const std::string dir = DirPath(name);
  if (fs_.IsDir(dir) && sidecar && sidecar->mode == VolumeMode::kFilesystem) {
    return std::optional<BackendVolume>(BackendVolume{
        name, sidecar->size_bytes, VolumeMode::kFilesystem, "", dir, sidecar->volume_uid});
  }
  return std::optional<BackendVolume>();
}

Status FileBackend::NotFoundError(const std::string& name) const {
  return NotFound("volume " + Id(name) + " not found in " + dir_);
}

Status FileBackend::KeepPoolPrivate() {
  return backend_util::KeepPrivateToRoot(fs_, dir_, pool_, "pool directory");
}

StatusOr<BackendVolume> FileBackend::CreateDir(const std::string& name, int64_t size_bytes,
                                               const std::string& owner_uid,
                                               const std::optional<VolumeRoot>& root) {
  const std::string dir = DirPath(name);
  if (fs_.Exists(dir) && !fs_.IsDir(dir)) {
    return AlreadyExists("volume " + Id(name) + ": " + dir + " exists and is not a directory");
  }
  if (fs_.IsDir(dir)) {
    // Left by a create that stopped before its sidecar, or not ours at all:
    // adopt it only when there is nothing in it to lose.
    ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs_.ListDir(dir));
    if (!entries.empty()) {
      return AlreadyExists(Object(name, VolumeMode::kFilesystem) +
                           " exists, is not empty and is not pillar's (no sidecar); remove or "
                           "rename it");
    }
  }
  RETURN_IF_ERROR(fs_.MakeDir(dir));
  // Owner and mode before the sidecar: until it exists the directory is no
  // volume (never exposed; a retry finds it empty and unmarked and comes
  // back here), and once it exists they are never touched again. Owner
  // first, so no chown can clear setuid/setgid bits the mode just set.
  if (root) {
    RETURN_IF_ERROR(fs_.Chown(dir, root->uid, root->gid));
    RETURN_IF_ERROR(fs_.Chmod(dir, root->mode));
  }
  RETURN_IF_ERROR(WriteSidecar(name, {VolumeMode::kFilesystem, size_bytes, owner_uid}));
  return BackendVolume{name, size_bytes, VolumeMode::kFilesystem, "", dir, owner_uid};
}

Status FileBackend::PrepareCreate(int64_t /*size_bytes*/, VolumeMode /*mode*/,
                                  const std::map<std::string, std::string>& /*params*/) {
  return KeepPoolPrivate();
}

StatusOr<BackendVolume> FileBackend::DoCreate(const std::string& name, int64_t size_bytes,
                                              VolumeMode mode,
                                              const std::map<std::string, std::string>& /*params*/,
                                              const std::string& owner_uid,
                                              const std::optional<VolumeRoot>& root,
                                              std::unique_lock<std::mutex>& /*lock*/) {
  if (mode == VolumeMode::kFilesystem) return CreateDir(name, size_bytes, owner_uid, root);
  ASSIGN_OR_RETURN(int64_t size, backend_util::RoundUp(size_bytes, kSectorBytes));
  // The mark first: an image never exists unmarked, even after a crash here.
  RETURN_IF_ERROR(WriteSidecar(name, {VolumeMode::kBlock, 0, owner_uid}));
  RETURN_IF_ERROR(fs_.CreateSparseFile(ImagePath(name), size));
  return BackendVolume{name, size, VolumeMode::kBlock, "", "", owner_uid};
}

StatusOr<BackendVolume> FileBackend::ResumeCreate(const BackendVolume& vol,
                                                  std::unique_lock<std::mutex>& /*lock*/) {
  return vol;  // a file pool's volume is complete once it exists
}

StatusOr<BackendVolume> FileBackend::DoExpand(const BackendVolume& found, int64_t size_bytes,
                                              std::unique_lock<std::mutex>& /*lock*/) {
  BackendVolume vol = found;
  int64_t target = size_bytes;
  if (vol.mode == VolumeMode::kBlock) {
    ASSIGN_OR_RETURN(target, backend_util::RoundUp(size_bytes, kSectorBytes));
  }
  ASSIGN_OR_RETURN(backend_util::Growth growth,
                   backend_util::PlanExpand(Id(vol.name), vol.size_bytes, target));
  if (growth == backend_util::Growth::kNone) return vol;
  if (vol.mode == VolumeMode::kFilesystem) {
    RETURN_IF_ERROR(WriteSidecar(vol.name, {VolumeMode::kFilesystem, target, vol.owner_uid}));
  } else {
    const std::string image = ImagePath(vol.name);
    // An attached loop device keeps its old size until told to re-read it.
    // Asked before growing, so a failing losetup leaves the image as it was.
    ASSIGN_OR_RETURN(std::vector<std::string> devices, LoopDevicesOf(image));
    RETURN_IF_ERROR(fs_.ResizeFile(image, target));
    for (const auto& dev : devices) {
      RETURN_IF_ERROR(exec_.RunOk({{"losetup", "--set-capacity", dev}, "", kChangeTimeout}));
    }
  }
  vol.size_bytes = target;
  return vol;
}

Status FileBackend::DoDelete(const std::string& name, const std::optional<BackendVolume>& vol) {
  if (vol && vol->mode == VolumeMode::kBlock) {
    // Detach first: an attached image keeps its blocks until the loop goes.
    RETURN_IF_ERROR(DetachAll(ImagePath(name)));
    // The mark before the image: a stale mark could later vouch for a file
    // someone else put here; a stale unmarked image is only refused.
    RETURN_IF_ERROR(fs_.Unlink(SidecarPath(name)));
    return fs_.Unlink(ImagePath(name));
  }
  if (vol) RETURN_IF_ERROR(fs_.RemoveTree(DirPath(name)));
  // Also clears a sidecar a half-finished delete left without its directory.
  return fs_.Unlink(SidecarPath(name));
}

Status FileBackend::WriteMark(const BackendVolume& vol, const std::string& owner_uid) {
  return WriteSidecar(vol.name, {vol.mode, vol.size_bytes, owner_uid});
}

StatusOr<std::vector<BackendVolume>> FileBackend::ListVolumes() {
  ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs_.ListDir(dir_));
  std::vector<BackendVolume> out;
  for (const auto& e : entries) {
    std::string name = e.name;
    const std::string suffix = kImageSuffix;
    if (e.type == DirEntry::Type::kFile && name.size() > suffix.size() && name.ends_with(suffix)) {
      name.resize(name.size() - suffix.size());
    } else if (e.type != DirEntry::Type::kDir) {
      continue;
    }
    // Anything not named like a volume (".pillar", stray files) is not one.
    if (!backend_util::CheckVolumeName(name).ok()) continue;
    ASSIGN_OR_RETURN(std::optional<BackendVolume> vol, FindRow(name));
    if (vol && (vol->mode == VolumeMode::kBlock) == (e.type == DirEntry::Type::kFile)) {
      out.push_back(std::move(*vol));
    }
  }
  std::sort(out.begin(), out.end(),
            [](const BackendVolume& a, const BackendVolume& b) { return a.name < b.name; });
  return out;
}

StatusOr<PoolCapacity> FileBackend::ReadCapacity() {
  ASSIGN_OR_RETURN(FsCapacity cap, fs_.StatVfs(dir_));
  return PoolCapacity{cap.total_bytes, cap.available_bytes};
}

StatusOr<std::string> FileBackend::DoExpose(const BackendVolume& vol) {
  // Pools of older releases are tightened when a volume is served.
  RETURN_IF_ERROR(KeepPoolPrivate());
  if (vol.mode == VolumeMode::kFilesystem) return vol.export_path;
  const std::string image = ImagePath(vol.name);
  ASSIGN_OR_RETURN(std::vector<std::string> devices, LoopDevicesOf(image));
  if (!devices.empty()) return devices.front();
  // Direct I/O keeps a second copy of every block out of the page cache.
  Command attach{
      {"losetup", "--find", "--show", "--direct-io=on", "--", image}, "", kChangeTimeout};
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, attach));
  std::string dev = backend_util::TrimEnd(out);
  if (!IsLoopDevice(dev)) {
    return Internal("'" + attach.ToString() + "' printed '" + dev + "', not a loop device");
  }
  return dev;
}

Status FileBackend::DoUnexpose(const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<BackendVolume> vol, FindRow(name));
  if (!vol || vol->mode != VolumeMode::kBlock) return Status::Ok();
  return DetachAll(ImagePath(name));
}

StatusOr<std::vector<std::string>> FileBackend::LoopDevicesOf(const std::string& image) {
  // --associated matches the backing inode, not the path string.
  Command list{{"losetup", "--list", "--json", "--output", "NAME,BACK-FILE", "--associated", image},
               "",
               kQueryTimeout};
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, list));
  std::vector<std::string> devices;
  // Older util-linux prints nothing at all when no device matches.
  if (backend_util::TrimEnd(out).empty()) return devices;
  ASSIGN_OR_RETURN(nlohmann::json doc, backend_util::ParseJsonOutput(list, out));
  if (!doc.is_object() || !doc.contains("loopdevices") || !doc["loopdevices"].is_array()) {
    return Internal("output of '" + list.ToString() + "' has no \"loopdevices\" list");
  }
  for (const auto& dev : doc["loopdevices"]) {
    if (!dev.is_object() || !dev.contains("name") || !dev["name"].is_string() ||
        !IsLoopDevice(dev["name"].get<std::string>())) {
      return Internal("output of '" + list.ToString() + "' has an entry without a loop device");
    }
    devices.push_back(dev["name"].get<std::string>());
  }
  return devices;
}

Status FileBackend::DetachAll(const std::string& image) {
  ASSIGN_OR_RETURN(std::vector<std::string> devices, LoopDevicesOf(image));
  for (const auto& dev : devices) {
    // A device still held open (by nvmet, say) is marked autoclear by the
    // kernel and goes when its last user closes it.
    RETURN_IF_ERROR(exec_.RunOk({{"losetup", "--detach", dev}, "", kChangeTimeout}));
  }
  return Status::Ok();
}

}  // namespace pillar::agent
