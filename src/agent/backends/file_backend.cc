#include "agent/backends/file_backend.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "agent/backends/backend_util.h"
#include "common/log.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

using backend_util::kChangeTimeout;
using backend_util::kQueryTimeout;

constexpr int64_t kSectorBytes = 512;
constexpr char kImageSuffix[] = ".img";
constexpr char kSidecarDir[] = ".pillar";

constexpr char kDevPrefix[] = "/dev/";
// What the kernel appends to a backing file's path once the file is unlinked.
constexpr char kDeleted[] = " (deleted)";

// "loop" and a number: a loop device's name in /dev and /sys/block.
bool IsLoopName(const std::string& name) {
  return name.size() > 4 && name.starts_with("loop") &&
         std::all_of(name.begin() + 4, name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool IsLoopDevice(const std::string& path) {
  return path.starts_with(kDevPrefix) && IsLoopName(path.substr(sizeof(kDevPrefix) - 1));
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
  if (auto origin = doc.find("origin"); origin != doc.end()) {
    if (!origin->is_string()) return InvalidArgument("origin is not a string");
    out.origin = origin->get<std::string>();
  }
  return out;
}

StatusOr<FileSnapshotSidecar> ParseFileSnapshotSidecar(const std::string& text) {
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return InvalidArgument("not a JSON object");
  FileSnapshotSidecar out;
  auto mode = doc.find("mode");
  if (mode == doc.end() || !mode->is_string() || (*mode != "block" && *mode != "filesystem")) {
    return InvalidArgument("mode is neither block nor filesystem");
  }
  out.mode = *mode == "block" ? VolumeMode::kBlock : VolumeMode::kFilesystem;
  for (auto [key, field] : {std::pair{"size_bytes", &out.size_bytes},
                            std::pair{"createdUnixNanos", &out.created_unix_nanos}}) {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_number_integer() ||
        (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX) || it->get<int64_t>() <= 0) {
      return InvalidArgument(std::string(key) + " is not a positive integer");
    }
    *field = it->get<int64_t>();
  }
  for (auto [key, field] : {std::pair{"snapshotUid", &out.snapshot_uid},
                            std::pair{"sourceVolume", &out.source_volume}}) {
    auto it = doc.find(key);
    if (it == doc.end() || !it->is_string())
      return InvalidArgument(std::string(key) + " is not a string");
    *field = it->get<std::string>();
  }
  RETURN_IF_ERROR(validate::Uuid("snapshotUid", out.snapshot_uid));
  RETURN_IF_ERROR(validate::VolumeName("sourceVolume", out.source_volume));
  return out;
}

std::string FormatFileSnapshotSidecar(const FileSnapshotSidecar& sidecar) {
  nlohmann::json doc = {{"mode", VolumeModeName(sidecar.mode)},
                        {"size_bytes", sidecar.size_bytes},
                        {"snapshotUid", sidecar.snapshot_uid},
                        {"sourceVolume", sidecar.source_volume},
                        {"createdUnixNanos", sidecar.created_unix_nanos}};
  return doc.dump() + "\n";
}

std::string FormatFileSidecar(const FileSidecar& sidecar) {
  nlohmann::json doc = {{"mode", VolumeModeName(sidecar.mode)}};
  if (sidecar.mode == VolumeMode::kFilesystem) doc["size_bytes"] = sidecar.size_bytes;
  if (!sidecar.volume_uid.empty()) doc["volumeUid"] = sidecar.volume_uid;
  if (!sidecar.origin.empty()) doc["origin"] = sidecar.origin;
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
    if (sidecar && sidecar->mode == VolumeMode::kBlock) {
      vol.owner_uid = sidecar->volume_uid;
      vol.origin = sidecar->origin;
    }
    return std::optional<BackendVolume>(std::move(vol));
  }
  const std::string dir = DirPath(name);
  if (fs_.IsDir(dir) && sidecar && sidecar->mode == VolumeMode::kFilesystem) {
    BackendVolume vol{name, sidecar->size_bytes, VolumeMode::kFilesystem, "",
                      dir,  sidecar->volume_uid};
    vol.origin = sidecar->origin;
    return std::optional<BackendVolume>(std::move(vol));
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
    RETURN_IF_ERROR(
        WriteSidecar(vol.name, {VolumeMode::kFilesystem, target, vol.owner_uid, vol.origin}));
  } else {
    const std::string image = ImagePath(vol.name);
    // An attached loop device keeps its old size until told to re-read it.
    // Asked before growing, so a failing lookup leaves the image as it was.
    ASSIGN_OR_RETURN(std::vector<std::string> devices, AllLoopDevicesOf(image));
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
  return WriteSidecar(vol.name, {vol.mode, vol.size_bytes, owner_uid, vol.origin});
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
  // Pools of older releases are tightened when a volume is served (a read
  // of the mode; a chmod only when it is not private yet).
  RETURN_IF_ERROR(KeepPoolPrivate());
  if (vol.mode == VolumeMode::kFilesystem) return vol.export_path;
  const std::string image = ImagePath(vol.name);
  ASSIGN_OR_RETURN(std::optional<std::string> attached, CachedLoopDeviceOf(image));
  if (attached) return *attached;
  // Never a second device for one image: ask by inode before attaching.
  ASSIGN_OR_RETURN(std::vector<std::string> devices, LoopDevicesByInode(image));
  if (!devices.empty()) {
    RememberLoop(image, devices.front());
    return devices.front();
  }
  // Direct I/O keeps a second copy of every block out of the page cache.
  Command attach{
      {"losetup", "--find", "--show", "--direct-io=on", "--", image}, "", kChangeTimeout};
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, attach));
  std::string dev = backend_util::TrimEnd(out);
  if (!IsLoopDevice(dev)) {
    return Internal("'" + attach.ToString() + "' printed '" + dev + "', not a loop device");
  }
  RememberLoop(image, dev);
  return dev;
}

Status FileBackend::DoUnexpose(const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<BackendVolume> vol, FindRow(name));
  if (!vol || vol->mode != VolumeMode::kBlock) return Status::Ok();
  return DetachAll(ImagePath(name));
}

StatusOr<std::string> FileBackend::ReadBackingFile(const std::string& device) {
  const std::string name = device.substr(sizeof(kDevPrefix) - 1);
  ASSIGN_OR_RETURN(std::string text,
                   fs_.ReadFile(JoinPath(sysfs_, "block/" + name + "/loop/backing_file")));
  if (text.ends_with('\n')) text.pop_back();
  return text;
}

void FileBackend::RememberLoop(const std::string& image, const std::string& device) {
  // What validates the entry later is what the kernel shows now.
  StatusOr<std::string> backing = ReadBackingFile(device);
  if (!backing.ok() || backing->ends_with(kDeleted)) return;
  std::lock_guard<std::mutex> lock(loops_mu_);
  loops_[image] = {device, std::move(*backing)};
}

StatusOr<std::optional<std::string>> FileBackend::CachedLoopDeviceOf(const std::string& image) {
  std::optional<LoopEntry> cached;
  {
    std::lock_guard<std::mutex> lock(loops_mu_);
    auto it = loops_.find(image);
    if (it != loops_.end()) cached = it->second;
  }
  if (cached) {
    // Detached, attached to another file, or its image unlinked: the read
    // fails or differs, and a scan decides.
    StatusOr<std::string> backing = ReadBackingFile(cached->device);
    if (backing.ok() && *backing == cached->backing) {
      return std::optional<std::string>(cached->device);
    }
  }
  ASSIGN_OR_RETURN(std::vector<std::string> devices, ScanLoopDevicesOf(image));
  if (devices.empty()) return std::optional<std::string>();
  return std::optional<std::string>(devices.front());
}

StatusOr<std::vector<std::string>> FileBackend::ScanLoopDevicesOf(const std::string& image) {
  ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs_.ListDir(JoinPath(sysfs_, "block")));
  std::vector<std::string> names;
  for (const auto& e : entries) {
    if (IsLoopName(e.name)) names.push_back(e.name);
  }
  // loop2 before loop10, so the first device of an image is always the same.
  std::sort(names.begin(), names.end(), [](const std::string& a, const std::string& b) {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  });
  // backing_file holds the path the kernel resolves for the file it holds
  // open (d_path): every symlink followed, and " (deleted)" appended once the
  // file is unlinked (then it is no image of ours). So a device is an
  // image's when it reads the pool directory, resolved the same way, and the
  // image's name; the image itself is a regular file, never a link
  // (FileSize refuses one).
  ASSIGN_OR_RETURN(std::string dir, CanonicalPath(fs_, dir_));
  const std::string prefix = dir == "/" ? dir : dir + "/";
  std::map<std::string, LoopEntry> found;
  std::map<std::string, std::string> backing_of;  // device -> its backing_file
  std::vector<std::string> devices;               // of `image`
  for (const auto& name : names) {
    const std::string device = kDevPrefix + name;
    StatusOr<std::string> backing = ReadBackingFile(device);
    if (!backing.ok()) continue;  // not attached (it has no loop/ directory then)
    backing_of[device] = *backing;
    if (backing->ends_with(kDeleted) || !backing->starts_with(prefix)) continue;
    const std::string file = backing->substr(prefix.size());
    if (file.find('/') != std::string::npos || !file.ends_with(kImageSuffix)) continue;
    const std::string path = JoinPath(dir_, file);
    if (path == image) devices.push_back(device);
    found.emplace(path, LoopEntry{device, *backing});
  }
  std::lock_guard<std::mutex> lock(loops_mu_);
  // An entry losetup found (a path sysfs names differently) stays while its
  // device still reads the same.
  for (const auto& [path, entry] : loops_) {
    auto now = backing_of.find(entry.device);
    if (found.count(path) != 0 || now == backing_of.end() || now->second != entry.backing) {
      continue;
    }
    found.emplace(path, entry);
    if (path == image) devices.push_back(entry.device);
  }
  loops_ = std::move(found);
  return devices;
}

StatusOr<std::vector<std::string>> FileBackend::LoopDevicesByInode(const std::string& image) {
  // A device attached from a mount namespace that is gone since (the agent's
  // previous pod) names its file relative to a mount detached with it, not
  // by a path of ours: only the backing inode, which --associated compares,
  // tells that it serves this image.
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

StatusOr<std::vector<std::string>> FileBackend::AllLoopDevicesOf(const std::string& image) {
  ASSIGN_OR_RETURN(std::vector<std::string> devices, ScanLoopDevicesOf(image));
  if (!devices.empty()) return devices;
  return LoopDevicesByInode(image);
}

Status FileBackend::DetachAll(const std::string& image) {
  ASSIGN_OR_RETURN(std::vector<std::string> devices, AllLoopDevicesOf(image));
  {
    std::lock_guard<std::mutex> lock(loops_mu_);
    loops_.erase(image);
  }
  for (const auto& dev : devices) {
    // A device still held open (by nvmet, say) is marked autoclear by the
    // kernel and goes when its last user closes it.
    RETURN_IF_ERROR(exec_.RunOk({{"losetup", "--detach", dev}, "", kChangeTimeout}));
  }
  return Status::Ok();
}

// --- Snapshots and copies ------------------------------------------------------

std::string FileBackend::SnapshotDir() const {
  return JoinPath(JoinPath(dir_, kSidecarDir), "snapshots");
}

std::string FileBackend::SnapshotDataPath(const std::string& name, VolumeMode mode) const {
  return JoinPath(SnapshotDir(), mode == VolumeMode::kBlock ? name + kImageSuffix : name);
}

std::string FileBackend::SnapshotSidecarPath(const std::string& name) const {
  return JoinPath(SnapshotDir(), name + ".json");
}

std::string FileBackend::TempPath(const std::string& name) const {
  return JoinPath(JoinPath(JoinPath(dir_, kSidecarDir), "tmp"), name);
}

StatusOr<std::optional<BackendSnapshot>> FileBackend::FindSnapshotRow(const std::string& name) {
  const std::string path = SnapshotSidecarPath(name);
  if (!fs_.Exists(path)) return std::optional<BackendSnapshot>();
  ASSIGN_OR_RETURN(std::string text, fs_.ReadFile(path));
  StatusOr<FileSnapshotSidecar> sidecar = ParseFileSnapshotSidecar(text);
  if (!sidecar.ok()) {
    return Internal("snapshot " + Id(name) + ": sidecar " + path +
                    " is malformed: " + sidecar.status().message());
  }
  const std::string data = SnapshotDataPath(name, sidecar->mode);
  // A sidecar whose copy never landed (a crash in between) marks nothing.
  bool present = sidecar->mode == VolumeMode::kBlock ? fs_.FileSize(data).ok() : fs_.IsDir(data);
  if (!present) return std::optional<BackendSnapshot>();
  BackendSnapshot snap;
  snap.name = name;
  snap.source_volume = sidecar->source_volume;
  snap.mode = sidecar->mode;
  snap.size_bytes = sidecar->size_bytes;
  snap.creation_time_unix_nanos = sidecar->created_unix_nanos;
  snap.owner_uid = sidecar->snapshot_uid;
  if (snap.mode == VolumeMode::kBlock) {
    ASSIGN_OR_RETURN(snap.used_bytes, fs_.AllocatedBytes(data));
  }
  snap.detached = true;  // a copy holds nothing of its source
  return std::optional<BackendSnapshot>(std::move(snap));
}

StatusOr<std::vector<BackendSnapshot>> FileBackend::ListSnapshotRows() {
  std::vector<BackendSnapshot> out;
  if (!fs_.IsDir(SnapshotDir())) return out;
  ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs_.ListDir(SnapshotDir()));
  for (const auto& e : entries) {
    if (e.type != DirEntry::Type::kFile || !e.name.ends_with(".json")) continue;
    std::string name = e.name.substr(0, e.name.size() - 5);
    if (!backend_util::CheckSnapshotName(name).ok()) continue;
    ASSIGN_OR_RETURN(std::optional<BackendSnapshot> snap, FindSnapshotRow(name));
    if (snap) out.push_back(std::move(*snap));
  }
  std::sort(out.begin(), out.end(),
            [](const BackendSnapshot& a, const BackendSnapshot& b) { return a.name < b.name; });
  return out;
}

StatusOr<std::string> FileBackend::CopyToTemp(const std::string& from, VolumeMode mode,
                                              const std::string& name) {
  const std::string tmp = TempPath(name);
  RETURN_IF_ERROR(fs_.MakeDirs(JoinPath(JoinPath(dir_, kSidecarDir), "tmp")));
  RETURN_IF_ERROR(fs_.RemoveTree(tmp));  // what an interrupted copy left
  if (mode == VolumeMode::kBlock) {
    RETURN_IF_ERROR(fs_.CopyFile(from, tmp));
  } else {
    RETURN_IF_ERROR(fs_.CopyTree(from, tmp));
  }
  return tmp;
}

StatusOr<BackendSnapshot> FileBackend::DoCreateSnapshot(const BackendVolume& vol,
                                                        const std::string& name,
                                                        const std::string& snapshot_uid,
                                                        bool /*detached*/,
                                                        std::unique_lock<std::mutex>& /*lock*/) {
  const std::string source = vol.mode == VolumeMode::kBlock ? ImagePath(vol.name) : vol.export_path;
  const std::string data = SnapshotDataPath(name, vol.mode);
  RETURN_IF_ERROR(fs_.MakeDirs(SnapshotDir()));
  // A copy a crash left without its sidecar is no snapshot: replaced.
  RETURN_IF_ERROR(fs_.RemoveTree(data));
  ASSIGN_OR_RETURN(std::string tmp, CopyToTemp(source, vol.mode, name));
  auto now = std::chrono::system_clock::now().time_since_epoch();
  FileSnapshotSidecar sidecar{vol.mode, vol.size_bytes, snapshot_uid, vol.name,
                              std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()};
  RETURN_IF_ERROR(
      fs_.WriteFileAtomic(SnapshotSidecarPath(name), FormatFileSnapshotSidecar(sidecar)));
  RETURN_IF_ERROR(fs_.Rename(tmp, data));
  log::Info("snapshot copied", {{"snapshot", Id(name)}, {"of", Id(vol.name)}});
  return FindSnapshot(name);
}

Status FileBackend::DoDeleteSnapshot(const BackendSnapshot& snap) {
  // The data first: a sidecar alone marks nothing.
  RETURN_IF_ERROR(fs_.RemoveTree(SnapshotDataPath(snap.name, snap.mode)));
  return fs_.Unlink(SnapshotSidecarPath(snap.name));
}

StatusOr<BackendVolume> FileBackend::CopyIntoVolume(const std::string& name, int64_t size_bytes,
                                                    VolumeMode mode, const std::string& owner_uid,
                                                    const std::string& from, int64_t bytes,
                                                    const std::string& origin) {
  ASSIGN_OR_RETURN(std::string tmp, CopyToTemp(from, mode, name));
  int64_t size = std::max(size_bytes, bytes);
  if (mode == VolumeMode::kBlock) {
    ASSIGN_OR_RETURN(size, backend_util::RoundUp(size, kSectorBytes));
    if (size > bytes) RETURN_IF_ERROR(fs_.ResizeFile(tmp, size));
  }
  // The mark before the data is in place, as for a new volume.
  RETURN_IF_ERROR(
      WriteSidecar(name, {mode, mode == VolumeMode::kFilesystem ? size : 0, owner_uid, origin}));
  RETURN_IF_ERROR(fs_.Rename(tmp, mode == VolumeMode::kBlock ? ImagePath(name) : DirPath(name)));
  ASSIGN_OR_RETURN(std::optional<BackendVolume> made, FindRow(name));
  if (!made) return Internal("volume " + Id(name) + " vanished right after its copy");
  return std::move(*made);
}

StatusOr<BackendVolume> FileBackend::DoCreateFromSnapshot(
    const std::string& name, int64_t size_bytes, VolumeMode mode,
    const std::map<std::string, std::string>& /*params*/, const std::string& owner_uid,
    const BackendSnapshot& snap, bool /*detached*/, std::unique_lock<std::mutex>& /*lock*/) {
  if (mode == VolumeMode::kFilesystem && fs_.Exists(DirPath(name))) {
    return AlreadyExists(Object(name, mode) + " exists and is not pillar's (no sidecar)");
  }
  return CopyIntoVolume(name, size_bytes, mode, owner_uid, SnapshotDataPath(snap.name, mode),
                        snap.size_bytes, OriginOf(pool_, VolumeSource::Kind::kSnapshot, snap.name));
}

StatusOr<BackendVolume> FileBackend::DoCloneVolume(
    const std::string& name, int64_t size_bytes, VolumeMode mode,
    const std::map<std::string, std::string>& /*params*/, const std::string& owner_uid,
    const BackendVolume& source, bool /*detached*/, std::unique_lock<std::mutex>& /*lock*/) {
  if (mode == VolumeMode::kFilesystem && fs_.Exists(DirPath(name))) {
    return AlreadyExists(Object(name, mode) + " exists and is not pillar's (no sidecar)");
  }
  const std::string from = mode == VolumeMode::kBlock ? ImagePath(source.name) : source.export_path;
  return CopyIntoVolume(name, size_bytes, mode, owner_uid, from, source.size_bytes,
                        OriginOf(pool_, VolumeSource::Kind::kVolume, source.name));
}

}  // namespace pillar::agent
