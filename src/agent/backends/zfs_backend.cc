#include "agent/backends/zfs_backend.h"

#include <algorithm>
#include <regex>
#include <set>
#include <string_view>

#include "agent/backends/backend_util.h"
#include "common/log.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

using backend_util::kChangeTimeout;
using backend_util::kQueryTimeout;

// Properties a storage class may set. Everything else (mountpoint, canmount,
// volmode, quota, encryption keys, ...) is pillar's to decide or unsafe.
const std::set<std::string> kCommonParams = {"checksum",     "compression",    "copies", "logbias",
                                             "primarycache", "secondarycache", "sync"};
const std::set<std::string> kBlockParams = {"volblocksize", "thin"};
const std::set<std::string> kFilesystemParams = {"recordsize", "atime", "xattr"};

constexpr int64_t kDefaultVolBlockBytes = int64_t{16} * 1024;

constexpr char kOwnerProperty[] = "pillar-csi:volume-uid";
// A root directory mode and owner still to apply ("2770:1000:1000"): set by
// zfs create together with the ownership mark, cleared once applied.
constexpr char kRootPendingProperty[] = "pillar-csi:root-pending";
// Where a volume's data came from: "snapshot:<name>" or "volume:<name>".
constexpr char kOriginProperty[] = "pillar-csi:origin";
constexpr char kSnapshotOwnerProperty[] = "pillar-csi:snapshot-uid";
// The source volume's size when the snapshot was taken (a file system's
// snapshot has no refquota of its own).
constexpr char kSnapshotSizeProperty[] = "pillar-csi:size-bytes";
constexpr size_t kColumns = 9;
// A deleted volume kept for its snapshots: "<volume>:deleted:<uid>".
constexpr char kHiddenInfix[] = ":deleted:";
// A detached snapshot's own dataset: "<volume>:snapshot:<snapshot>", holding
// the one snapshot "@<snapshot>" (received from the volume, sharing nothing
// with it).
constexpr char kHolderInfix[] = ":snapshot:";
// pillar's own snapshots: "<volume>@pillar:clone:<clone>" (a volume clone's
// origin, deferred-destroyed at once) and "@pillar:copy:<copy>" (what a
// detached copy sends).
constexpr char kCloneSnapshotPrefix[] = "pillar:clone:";
constexpr char kCopySnapshotPrefix[] = "pillar:copy:";
// What a detached snapshot sends: "<volume>@pillar:send:<snapshot>".
constexpr char kSendSnapshotPrefix[] = "pillar:send:";

// The volume a hidden or holder dataset belongs to ("" for a dataset that is
// neither): the part before its infix, when that is a volume name.
std::string OwningVolume(const std::string& dataset) {
  for (const char* infix : {kHiddenInfix, kHolderInfix}) {
    size_t at = dataset.find(infix);
    if (at == std::string::npos) continue;
    std::string volume = dataset.substr(0, at);
    return backend_util::CheckVolumeName(volume).ok() ? volume : std::string();
  }
  return {};
}

Command Zfs(std::vector<std::string> argv, std::chrono::seconds timeout) {
  argv.insert(argv.begin(), "zfs");
  return Command{std::move(argv), "", timeout};
}

std::vector<std::string> Lines(const std::string& out) {
  std::vector<std::string> lines;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t eol = out.find('\n', pos);
    if (eol == std::string::npos) eol = out.size();
    if (eol > pos) lines.push_back(out.substr(pos, eol - pos));
    pos = eol + 1;
  }
  return lines;
}

Status CheckParamValue(const std::string& key, const std::string& value) {
  static const std::regex kValue("[A-Za-z0-9][A-Za-z0-9._-]{0,63}");
  if (!std::regex_match(value, kValue)) {
    return InvalidArgument(
        "zfs parameter '" + key + "': value '" + value +
        "' wants 1-64 characters [A-Za-z0-9._-] starting with a letter or digit");
  }
  if (key == "thin" && value != "true" && value != "false") {
    return InvalidArgument("zfs parameter 'thin': want true or false, got '" + value + "'");
  }
  return Status::Ok();
}

}  // namespace

Status ZfsBackend::CheckParams(VolumeMode mode,
                               const std::map<std::string, std::string>& params) const {
  const auto& own = mode == VolumeMode::kBlock ? kBlockParams : kFilesystemParams;
  const auto& other = mode == VolumeMode::kBlock ? kFilesystemParams : kBlockParams;
  for (const auto& [key, value] : params) {
    if (other.count(key) != 0) {
      return InvalidArgument("zfs parameter '" + key + "' does not apply to " +
                             VolumeModeName(mode) + " volumes");
    }
    if (kCommonParams.count(key) == 0 && own.count(key) == 0) {
      return InvalidArgument("zfs backend: unsupported parameter '" + key + "'");
    }
    RETURN_IF_ERROR(CheckParamValue(key, value));
  }
  return Status::Ok();
}

namespace {

// "16384", "16K", "1M": a power of two from 512 bytes to 16 MiB, as zfs takes.
StatusOr<int64_t> ParseVolBlockSize(const std::string& text) {
  std::string_view digits = text;
  int64_t scale = 1;
  if (!digits.empty() && (digits.back() == 'K' || digits.back() == 'k')) scale = 1024;
  if (!digits.empty() && (digits.back() == 'M' || digits.back() == 'm'))
    scale = int64_t{1024} * 1024;
  if (scale != 1) digits.remove_suffix(1);
  std::optional<int64_t> n = backend_util::ParseCount(digits);
  int64_t bytes = n && *n <= (int64_t{16} << 20) ? *n * scale : 0;
  if (bytes < 512 || bytes > (int64_t{16} << 20) || (bytes & (bytes - 1)) != 0) {
    return InvalidArgument("zfs parameter 'volblocksize': '" + text +
                           "' is not a power of two from 512 to 16M");
  }
  return bytes;
}

// A numeric column of `zfs list -p`: "-" where the property does not apply,
// and "none" (printed as 0 by -p, but cheap to accept) count as 0.
StatusOr<int64_t> NumberColumn(const Command& cmd, const std::string& text, const char* column) {
  if (text == "-" || text == "none") return 0;
  std::optional<int64_t> n = backend_util::ParseCount(text);
  if (!n) {
    return Internal("output of '" + cmd.ToString() + "': " + column + " '" + text +
                    "' is not a number");
  }
  return *n;
}

std::string FormatRootPending(const VolumeRoot& root) {
  return OctalMode(root.mode) + ":" + std::to_string(root.uid) + ":" + std::to_string(root.gid);
}

std::optional<VolumeRoot> ParseRootPending(const std::string& text) {
  static const std::regex kValue("([0-7]{4}):([0-9]{1,10}):([0-9]{1,10})");
  std::smatch m;
  if (!std::regex_match(text, m, kValue)) return std::nullopt;
  std::optional<int64_t> uid = backend_util::ParseCount(m[2].str());
  std::optional<int64_t> gid = backend_util::ParseCount(m[3].str());
  if (!uid || !gid || *uid >= UINT32_MAX || *gid >= UINT32_MAX) return std::nullopt;
  return VolumeRoot{static_cast<uint32_t>(std::stoul(m[1].str(), nullptr, 8)),
                    static_cast<uint32_t>(*uid), static_cast<uint32_t>(*gid)};
}

}  // namespace

BackendVolume ZfsBackend::ToVolume(const ZfsRow& row) const {
  BackendVolume vol =
      row.mode == VolumeMode::kBlock
          ? BackendVolume{row.name, row.size_bytes, VolumeMode::kBlock, "/dev/zvol/" + Id(row.name),
                          "",       row.owner_uid}
          : BackendVolume{row.name, row.size_bytes, VolumeMode::kFilesystem,
                          "",       row.mountpoint, row.owner_uid};
  // "snapshot:<name>" -> "snapshot <pool>/<name>"; anything else is shown as found.
  size_t colon = row.origin.find(':');
  if (colon != std::string::npos) {
    std::string kind = row.origin.substr(0, colon);
    std::string source = row.origin.substr(colon + 1);
    if (kind == "snapshot" || kind == "volume") {
      vol.origin = OriginOf(
          dataset_,
          kind == "snapshot" ? VolumeSource::Kind::kSnapshot : VolumeSource::Kind::kVolume, source);
    }
  }
  if (vol.origin.empty()) vol.origin = row.origin;
  return vol;
}

StatusOr<std::vector<ZfsRow>> ZfsBackend::ListRows() {
  // mountpoint last: it is the one column that is free text.
  Command cmd =
      Zfs({"list", "-Hp", "-o",
           std::string("name,type,") + kOriginProperty + ",volsize,refquota,volblocksize," +
               kOwnerProperty + "," + kRootPendingProperty + ",mountpoint",
           "-r", "-d", "1", "-t", "volume,filesystem", "--", dataset_},
          kQueryTimeout);
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, cmd));
  std::vector<ZfsRow> rows;
  std::string pool_mountpoint;  // zfs lists the parent first
  for (const std::string& line : Lines(out)) {
    std::vector<std::string> cols;
    size_t start = 0;
    while (cols.size() < kColumns - 1) {
      size_t tab = line.find('\t', start);
      if (tab == std::string::npos) break;
      cols.push_back(line.substr(start, tab - start));
      start = tab + 1;
    }
    if (cols.size() != kColumns - 1) {
      return Internal("output of '" + cmd.ToString() + "': line '" + line + "' does not have " +
                      std::to_string(kColumns) + " columns");
    }
    cols.push_back(line.substr(start));
    const std::string& full = cols[0];
    const std::string& origin = cols[2];
    const std::string& owner = cols[6];
    const std::string& pending = cols[7];
    if (full == dataset_) {  // the parent itself
      if (cols[8].starts_with("/")) pool_mountpoint = cols[8];
      for (const auto& [property, value] :
           {std::pair{kOwnerProperty, owner}, std::pair{kRootPendingProperty, pending},
            std::pair{kOriginProperty, origin}}) {
        if (value == "-") continue;
        return FailedPrecondition("zfs pool " + dataset_ + " itself carries " + property + "=" +
                                  value + ", which every child inherits; clear it with 'zfs " +
                                  "inherit " + property + " " + dataset_ + "'");
      }
      continue;
    }
    const std::string prefix = dataset_ + "/";
    if (!full.starts_with(prefix)) {
      return Internal("output of '" + cmd.ToString() + "': dataset '" + full + "' is not in " +
                      dataset_);
    }
    ZfsRow row;
    row.name = full.substr(prefix.size());
    row.pool_mountpoint = pool_mountpoint;
    // A name pillar could not have made (or could not address) is not a
    // volume; a deleted one kept for its snapshots is not one any more, nor
    // is a detached snapshot's own dataset.
    if (!backend_util::CheckVolumeName(row.name).ok()) {
      if (OwningVolume(row.name).empty()) continue;
      row.hidden = true;
    }
    if (origin != "-") row.origin = origin;
    if (owner != "-") {
      if (!validate::Uuid(kOwnerProperty, owner).ok()) {
        return Internal("output of '" + cmd.ToString() + "': dataset '" + full + "' has " +
                        kOwnerProperty + " '" + owner + "', not a UUID");
      }
      row.owner_uid = owner;
    }
    if (pending != "-") {
      row.root_pending = ParseRootPending(pending);
      if (!row.root_pending) {
        return Internal("output of '" + cmd.ToString() + "': dataset '" + full + "' has " +
                        kRootPendingProperty + " '" + pending + "', not <mode>:<uid>:<gid>");
      }
    }
    if (cols[1] == "volume") {
      row.mode = VolumeMode::kBlock;
      ASSIGN_OR_RETURN(row.size_bytes, NumberColumn(cmd, cols[3], "volsize"));
      ASSIGN_OR_RETURN(row.block_bytes, NumberColumn(cmd, cols[5], "volblocksize"));
    } else if (cols[1] == "filesystem") {
      row.mode = VolumeMode::kFilesystem;
      ASSIGN_OR_RETURN(row.size_bytes, NumberColumn(cmd, cols[4], "refquota"));
      // "legacy", "none" and "-" leave nothing to export.
      if (cols[8].starts_with("/")) row.mountpoint = cols[8];
    } else {
      return Internal("output of '" + cmd.ToString() + "': dataset '" + full + "' has type '" +
                      cols[1] + "'");
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

StatusOr<std::optional<ZfsRow>> ZfsBackend::FindRow(const std::string& name) {
  // Listing the parent and picking the child avoids telling "does not
  // exist" from other failures by zfs's stderr text.
  ASSIGN_OR_RETURN(std::vector<ZfsRow> rows, ListRows());
  for (auto& row : rows) {
    if (row.name == name && !row.hidden) return std::optional<ZfsRow>(std::move(row));
  }
  return std::optional<ZfsRow>();
}

StatusOr<int64_t> ZfsBackend::ZvolBytes(int64_t size_bytes,
                                        const std::map<std::string, std::string>& params) {
  int64_t unit = kDefaultVolBlockBytes;
  if (auto it = params.find("volblocksize"); it != params.end()) {
    ASSIGN_OR_RETURN(unit, ParseVolBlockSize(it->second));
  }
  return backend_util::RoundUp(size_bytes, unit);
}

Status ZfsBackend::PrepareCreate(int64_t size_bytes, VolumeMode mode,
                                 const std::map<std::string, std::string>& params) {
  if (mode != VolumeMode::kBlock) return Status::Ok();
  return ZvolBytes(size_bytes, params).status();
}

StatusOr<BackendVolume> ZfsBackend::DoCreate(const std::string& name, int64_t size_bytes,
                                             VolumeMode mode,
                                             const std::map<std::string, std::string>& params,
                                             const std::string& owner_uid,
                                             const std::optional<VolumeRoot>& root,
                                             std::unique_lock<std::mutex>& /*lock*/) {
  std::vector<std::string> argv = {"create"};
  if (mode == VolumeMode::kBlock) {
    ASSIGN_OR_RETURN(int64_t size, ZvolBytes(size_bytes, params));
    if (auto it = params.find("thin"); it != params.end() && it->second == "true") {
      argv.push_back("-s");
    }
    // volmode=dev: a device node only, so the storage node's udev and
    // partition scanning never touch a consumer's partition table.
    argv.insert(argv.end(), {"-V", std::to_string(size), "-o", "volmode=dev"});
  } else {
    argv.insert(argv.end(), {"-o", "refquota=" + std::to_string(size_bytes)});
    if (root) {
      argv.insert(argv.end(),
                  {"-o", std::string(kRootPendingProperty) + "=" + FormatRootPending(*root)});
    }
  }
  for (const auto& [key, value] : params) {
    if (key == "thin") continue;
    std::string property = key;
    property.append("=").append(value);
    argv.insert(argv.end(), {"-o", std::move(property)});
  }
  argv.insert(argv.end(), {"-o", std::string(kOwnerProperty) + "=" + owner_uid, "--", Id(name)});
  RETURN_IF_ERROR(exec_.RunOk(Zfs(std::move(argv), kChangeTimeout)));
  ASSIGN_OR_RETURN(ZfsRow created, FindVolume(name));
  if (created.root_pending) RETURN_IF_ERROR(ApplyPendingRoot(created));
  return ToVolume(created);
}

StatusOr<BackendVolume> ZfsBackend::ResumeCreate(const ZfsRow& row,
                                                 std::unique_lock<std::mutex>& /*lock*/) {
  // A create that stopped before its root was done: finish it, with what
  // that create recorded. A complete dataset is never changed again.
  if (row.root_pending) RETURN_IF_ERROR(ApplyPendingRoot(row));
  return ToVolume(row);
}

Status ZfsBackend::ApplyPendingRoot(const ZfsRow& row) {
  ASSIGN_OR_RETURN(std::string dir, ExposeFilesystem(row));
  const VolumeRoot& root = *row.root_pending;
  // Owner first, so no chown can clear setuid/setgid bits the mode just set.
  RETURN_IF_ERROR(fs_.Chown(dir, root.uid, root.gid));
  RETURN_IF_ERROR(fs_.Chmod(dir, root.mode));
  // No "--", as in Expand.
  return exec_.RunOk(Zfs({"inherit", kRootPendingProperty, Id(row.name)}, kChangeTimeout));
}

StatusOr<BackendVolume> ZfsBackend::DoExpand(const ZfsRow& row, int64_t size_bytes,
                                             std::unique_lock<std::mutex>& /*lock*/) {
  const std::string& name = row.name;
  int64_t target = size_bytes;
  if (row.mode == VolumeMode::kBlock && row.block_bytes > 0) {
    ASSIGN_OR_RETURN(target, backend_util::RoundUp(size_bytes, row.block_bytes));
  }
  ASSIGN_OR_RETURN(backend_util::Growth growth,
                   backend_util::PlanExpand(Id(name), row.size_bytes, target));
  if (growth == backend_util::Growth::kNone) return ToVolume(row);
  const char* prop = row.mode == VolumeMode::kBlock ? "volsize=" : "refquota=";
  // No "--" here: zfs set before OpenZFS 2.2 rejects any argument starting
  // with '-'. The dataset name was validated and cannot start with one.
  RETURN_IF_ERROR(
      exec_.RunOk(Zfs({"set", prop + std::to_string(target), Id(name)}, kChangeTimeout)));
  ASSIGN_OR_RETURN(ZfsRow grown, FindVolume(name));
  return ToVolume(grown);
}

Status ZfsBackend::DoDelete(const std::string& name, const std::optional<ZfsRow>& row) {
  if (!row) return Status::Ok();
  Command cmd = Zfs({"destroy", "--", Id(name)}, kChangeTimeout);
  ASSIGN_OR_RETURN(ExecResult r, exec_.Run(cmd));
  if (r.exit_code != 0 && row->mode == VolumeMode::kBlock &&
      (r.err + r.out).find("dataset is busy") != std::string::npos) {
    // A zvol just let go of (its export removed, a copy made of it) is
    // probed by udev for a moment: once udev is done, once more. Still busy
    // (held by someone) is FAILED_PRECONDITION below.
    Status settled =
        exec_.RunOk(Command{{"udevadm", "settle", "--timeout=10"}, "", kChangeTimeout});
    if (!settled.ok()) log::Warn("udevadm settle failed", {{"error", settled.ToString()}});
    ASSIGN_OR_RETURN(r, exec_.Run(cmd));
  }
  if (r.exit_code == 0) {
    // A clone's origin snapshot, deferred-destroyed, went with it: its
    // volume may be a hidden one that nothing needs any more.
    if (!row->origin.empty()) Reclaim();
    return Status::Ok();
  }
  std::string msg = backend_util::TrimEnd(r.err.empty() ? r.out : r.err);
  if (msg.find("does not exist") != std::string::npos) return Status::Ok();  // gone meanwhile
  std::string what = "volume " + Id(name) + ": '" + cmd.ToString() + "' refused: " + msg;
  if (msg.find("has children") != std::string::npos) {
    // Snapshots (or clones of them) still need the data: hide the volume
    // instead, and reclaim it when the last of them goes.
    ASSIGN_OR_RETURN(std::vector<ZfsSnapshotRow> snaps, ListSnapshotsOfPool());
    bool has_snapshots = std::any_of(snaps.begin(), snaps.end(),
                                     [&](const ZfsSnapshotRow& s) { return s.dataset == name; });
    if (has_snapshots) {
      const std::string hidden = Id(name + kHiddenInfix + row->owner_uid);
      RETURN_IF_ERROR(exec_.RunOk(Zfs({"rename", "--", Id(name), hidden}, kChangeTimeout)));
      log::Info("deleted volume kept hidden for its snapshots",
                {{"volume", Id(name)}, {"keptAs", hidden}});
      return Status::Ok();
    }
  }
  for (const char* blocker : {"has children", "dependent clones", "busy"}) {
    if (msg.find(blocker) != std::string::npos) return FailedPrecondition(what);
  }
  return Internal(what);
}

Status ZfsBackend::WriteMark(const ZfsRow& row, const std::string& owner_uid) {
  // No "--", as in Expand.
  return exec_.RunOk(
      Zfs({"set", std::string(kOwnerProperty) + "=" + owner_uid, Id(row.name)}, kChangeTimeout));
}

StatusOr<std::vector<BackendVolume>> ZfsBackend::ListVolumes() {
  ASSIGN_OR_RETURN(std::vector<ZfsRow> rows, ListRows());
  std::vector<BackendVolume> out;
  out.reserve(rows.size());
  for (const auto& row : rows) {
    if (!row.hidden) out.push_back(ToVolume(row));
  }
  return out;
}

StatusOr<PoolCapacity> ZfsBackend::ReadCapacity() {
  // -o property,value rather than value alone: rows are matched by name, not
  // by the order zfs happens to print them in.
  Command cmd =
      Zfs({"get", "-Hp", "-o", "property,value", "available,used", "--", dataset_}, kQueryTimeout);
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, cmd));
  std::optional<int64_t> available, used;
  for (const std::string& line : Lines(out)) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::string prop = line.substr(0, tab);
    std::optional<int64_t> value = backend_util::ParseCount(line.substr(tab + 1));
    if (prop == "available") available = value;
    if (prop == "used") used = value;
  }
  if (!available || !used) {
    return Internal("output of '" + cmd.ToString() + "' lacks numeric available and used");
  }
  return PoolCapacity{*available + *used, *available};
}

StatusOr<std::string> ZfsBackend::DoExpose(const ZfsRow& row) {
  const std::string& name = row.name;
  if (row.mode == VolumeMode::kFilesystem) {
    if (row.root_pending) {
      return FailedPrecondition("volume " + Id(name) + ": its create has not finished (root " +
                                DescribeVolumeRoot(*row.root_pending) +
                                " still to apply); a CreateVolume retry finishes it");
    }
    return ExposeFilesystem(row);
  }
  std::string device = ToVolume(row).device_path;
  // zfs creates the zvol's minor asynchronously and udev adds the link later.
  if (!fs_.Exists(device)) {
    return Unavailable("volume " + Id(name) + ": " + device + " does not exist yet");
  }
  return device;
}

Status ZfsBackend::KeepPoolPrivate(const ZfsRow& row) {
  const std::string& dir = row.pool_mountpoint;
  if (dir.empty() || !fs_.Exists(dir)) return Status::Ok();
  return backend_util::KeepPrivateToRoot(fs_, dir, dataset_, "zfs pool mountpoint");
}

StatusOr<std::string> ZfsBackend::ExposeFilesystem(const ZfsRow& row) {
  RETURN_IF_ERROR(KeepPoolPrivate(row));
  if (row.mountpoint.empty()) {
    return FailedPrecondition("volume " + Id(row.name) +
                              " has no mountpoint (legacy or none); nothing to export");
  }
  Command mounted =
      Zfs({"get", "-Hp", "-o", "value", "mounted", "--", Id(row.name)}, kQueryTimeout);
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, mounted));
  std::string answer = backend_util::TrimEnd(out);
  if (answer == "no") {
    RETURN_IF_ERROR(exec_.RunOk(Zfs({"mount", "--", Id(row.name)}, kChangeTimeout)));
  } else if (answer != "yes") {
    return Internal("output of '" + mounted.ToString() + "' is '" + answer + "', not yes or no");
  }
  return row.mountpoint;
}

// --- Snapshots -------------------------------------------------------------

StatusOr<std::vector<ZfsSnapshotRow>> ZfsBackend::ListSnapshotsOfPool() {
  // -d 2: the snapshots of the pool's direct children.
  Command cmd = Zfs({"list", "-Hp", "-t", "snapshot", "-o",
                     std::string("name,") + kSnapshotOwnerProperty + "," + kSnapshotSizeProperty +
                         ",volsize,volblocksize,creation,used,defer_destroy",
                     "-r", "-d", "2", "--", dataset_},
                    kQueryTimeout);
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, cmd));
  std::vector<ZfsSnapshotRow> rows;
  constexpr size_t kSnapshotColumns = 8;
  for (const std::string& line : Lines(out)) {
    std::vector<std::string> cols;
    size_t start = 0;
    while (true) {
      size_t tab = line.find('\t', start);
      cols.push_back(line.substr(start, tab == std::string::npos ? tab : tab - start));
      if (tab == std::string::npos) break;
      start = tab + 1;
    }
    if (cols.size() != kSnapshotColumns) {
      return Internal("output of '" + cmd.ToString() + "': line '" + line + "' does not have " +
                      std::to_string(kSnapshotColumns) + " columns");
    }
    const std::string& full = cols[0];
    const std::string prefix = dataset_ + "/";
    size_t at = full.find('@');
    if (at == std::string::npos) {
      return Internal("output of '" + cmd.ToString() + "': '" + full + "' is not a snapshot");
    }
    if (!full.starts_with(prefix)) continue;  // a snapshot of the parent itself
    ZfsSnapshotRow row;
    row.dataset = full.substr(prefix.size(), at - prefix.size());
    std::string name = full.substr(at + 1);
    std::string source = row.dataset;
    if (!backend_util::CheckVolumeName(source).ok()) {
      source = OwningVolume(row.dataset);
      if (source.empty()) continue;  // not below a volume
    }
    row.internal = name.starts_with(kCloneSnapshotPrefix) ||
                   name.starts_with(kCopySnapshotPrefix) || name.starts_with(kSendSnapshotPrefix);
    if (!row.internal && !backend_util::CheckSnapshotName(name).ok()) continue;
    BackendSnapshot& snap = row.snapshot;
    snap.name = name;
    snap.source_volume = source;
    if (cols[1] != "-") {
      if (!validate::Uuid(kSnapshotOwnerProperty, cols[1]).ok()) {
        return Internal("output of '" + cmd.ToString() + "': snapshot '" + full + "' has " +
                        kSnapshotOwnerProperty + " '" + cols[1] + "', not a UUID");
      }
      snap.owner_uid = cols[1];
    }
    snap.mode = cols[3] == "-" ? VolumeMode::kFilesystem : VolumeMode::kBlock;
    ASSIGN_OR_RETURN(int64_t volsize, NumberColumn(cmd, cols[3], "volsize"));
    ASSIGN_OR_RETURN(row.block_bytes, NumberColumn(cmd, cols[4], "volblocksize"));
    // What the mark recorded; a zvol's own volsize for a snapshot made by hand.
    ASSIGN_OR_RETURN(snap.size_bytes, NumberColumn(cmd, cols[2], kSnapshotSizeProperty));
    if (snap.size_bytes == 0) snap.size_bytes = volsize;
    ASSIGN_OR_RETURN(int64_t creation, NumberColumn(cmd, cols[5], "creation"));
    snap.creation_time_unix_nanos = creation * 1000000000;
    ASSIGN_OR_RETURN(snap.used_bytes, NumberColumn(cmd, cols[6], "used"));
    snap.deleted = cols[7] == "on";
    snap.detached = row.dataset.find(kHolderInfix) != std::string::npos;
    rows.push_back(std::move(row));
  }
  return rows;
}

StatusOr<std::optional<ZfsSnapshotRow>> ZfsBackend::FindZfsSnapshot(const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<ZfsSnapshotRow> rows, ListSnapshotsOfPool());
  for (auto& row : rows) {
    if (!row.internal && row.snapshot.name == name) {
      return std::optional<ZfsSnapshotRow>(std::move(row));
    }
  }
  return std::optional<ZfsSnapshotRow>();
}

StatusOr<std::optional<BackendSnapshot>> ZfsBackend::FindSnapshotRow(const std::string& name) {
  ASSIGN_OR_RETURN(std::optional<ZfsSnapshotRow> row, FindZfsSnapshot(name));
  if (!row) return std::optional<BackendSnapshot>();
  return std::optional<BackendSnapshot>(std::move(row->snapshot));
}

StatusOr<std::vector<BackendSnapshot>> ZfsBackend::ListSnapshotRows() {
  ASSIGN_OR_RETURN(std::vector<ZfsSnapshotRow> rows, ListSnapshotsOfPool());
  std::vector<BackendSnapshot> out;
  for (auto& row : rows) {
    if (!row.internal) out.push_back(std::move(row.snapshot));
  }
  return out;
}

StatusOr<BackendSnapshot> ZfsBackend::DoCreateSnapshot(const ZfsRow& row, const std::string& name,
                                                       const std::string& snapshot_uid,
                                                       bool detached,
                                                       std::unique_lock<std::mutex>& /*lock*/) {
  if (row.size_bytes <= 0) {
    // A file system imported without a refquota: no size a restore could ask for.
    return FailedPrecondition("volume " + Id(row.name) +
                              " has no size (no refquota); expand it to give it one, then "
                              "snapshot it");
  }
  const std::string uid_mark = std::string(kSnapshotOwnerProperty) + "=" + snapshot_uid;
  const std::string size_mark =
      std::string(kSnapshotSizeProperty) + "=" + std::to_string(row.size_bytes);
  if (!detached) {
    RETURN_IF_ERROR(exec_.RunOk(
        Zfs({"snapshot", "-o", uid_mark, "-o", size_mark, "--", Id(row.name) + "@" + name},
            kChangeTimeout)));
    return FindSnapshot(name);
  }
  // Detached: the point in time is sent whole into a dataset of its own,
  // which holds the marks (its one snapshot inherits them) and the local
  // properties a restore carries over; it is never mounted and has no device
  // node. The receive is all or nothing; the snapshot it sends goes at once
  // (Reclaim retries it after a crash).
  ASSIGN_OR_RETURN(auto props, LocalProperties(row.name, row.mode));
  const std::string sent = row.name + "@" + kSendSnapshotPrefix + name;
  RETURN_IF_ERROR(exec_.RunOk(Zfs({"snapshot", "--", Id(sent)}, kChangeTimeout)));
  std::vector<std::string> options = {
      "-o",      uid_mark, "-o",
      size_mark, "-o",     row.mode == VolumeMode::kBlock ? "volmode=none" : "canmount=off"};
  for (const auto& [key, value] : props) options.insert(options.end(), {"-o", key + "=" + value});
  Status received = SendReceive(Id(sent), options, Id(row.name + kHolderInfix + name) + "@" + name);
  Status dropped = DestroySnapshot(Id(sent), /*deferred=*/false);
  RETURN_IF_ERROR(received);
  RETURN_IF_ERROR(dropped);
  log::Info("detached snapshot received into a dataset of its own",
            {{"snapshot", Id(name)}, {"of", Id(row.name)}});
  return FindSnapshot(name);
}

Status ZfsBackend::SendReceive(const std::string& snapshot, const std::vector<std::string>& options,
                               const std::string& target) {
  std::vector<std::string> receive = {"receive", "-u"};
  receive.insert(receive.end(), options.begin(), options.end());
  receive.insert(receive.end(), {"--", target});
  return exec_.RunPipeOk(Zfs({"send", "--", snapshot}, kChangeTimeout),
                         Zfs(std::move(receive), kChangeTimeout));
}

Status ZfsBackend::DestroySnapshot(const std::string& snapshot, bool deferred) {
  std::vector<std::string> argv = {"destroy"};
  // -d: destroyed now, or (clones still need it) marked defer_destroy and
  // destroyed by zfs when the last clone goes.
  if (deferred) argv.push_back("-d");
  argv.insert(argv.end(), {"--", snapshot});
  return exec_.RunOk(Zfs(std::move(argv), kChangeTimeout));
}

Status ZfsBackend::DoDeleteSnapshot(const BackendSnapshot& snap) {
  ASSIGN_OR_RETURN(std::optional<ZfsSnapshotRow> row, FindZfsSnapshot(snap.name));
  if (!row) return Status::Ok();
  RETURN_IF_ERROR(DestroySnapshot(Id(row->dataset) + "@" + snap.name, /*deferred=*/true));
  log::Info("snapshot deleted", {{"snapshot", Id(snap.name)}, {"of", Id(row->dataset)}});
  // Its volume may be a deleted one that this snapshot was the last to need.
  if (row->dataset != snap.source_volume) Reclaim();
  return Status::Ok();
}

void ZfsBackend::Reclaim() {
  auto rows = ListRows();
  auto snaps = ListSnapshotsOfPool();
  if (!rows.ok() || !snaps.ok()) {
    log::Warn(
        "reclaim skipped",
        {{"pool", dataset_}, {"error", (!rows.ok() ? rows.status() : snaps.status()).ToString()}});
    return;
  }
  for (const auto& snap : *snaps) {
    if (!snap.internal || snap.snapshot.deleted) continue;
    // Left by a crash between an internal snapshot and its destroy.
    Status s = DestroySnapshot(Id(snap.dataset) + "@" + snap.snapshot.name, /*deferred=*/true);
    if (!s.ok()) log::Warn("reclaim of a snapshot failed", {{"error", s.ToString()}});
  }
  for (const auto& row : *rows) {
    if (!row.hidden) continue;
    bool needed = std::any_of(snaps->begin(), snaps->end(),
                              [&](const ZfsSnapshotRow& snap) { return snap.dataset == row.name; });
    if (needed) continue;
    Status s = exec_.RunOk(Zfs({"destroy", "--", Id(row.name)}, kChangeTimeout));
    if (s.ok()) {
      log::Info("deleted volume reclaimed", {{"dataset", Id(row.name)}});
    } else {
      log::Warn("reclaim of a deleted volume failed", {{"error", s.ToString()}});
    }
  }
}

StatusOr<std::map<std::string, std::string>> ZfsBackend::LocalProperties(const std::string& dataset,
                                                                         VolumeMode mode) {
  std::string names;
  for (const auto* set :
       {&kCommonParams, mode == VolumeMode::kBlock ? &kBlockParams : &kFilesystemParams}) {
    for (const auto& p : *set) {
      if (p == "thin" || p == "volblocksize") continue;
      names += (names.empty() ? "" : ",") + p;
    }
  }
  Command cmd = Zfs({"get", "-Hp", "-s", "local", "-o", "property,value", names, "--", Id(dataset)},
                    kQueryTimeout);
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, cmd));
  std::map<std::string, std::string> props;
  for (const std::string& line : Lines(out)) {
    size_t tab = line.find('\t');
    if (tab == std::string::npos) continue;
    std::string key = line.substr(0, tab);
    std::string value = line.substr(tab + 1);
    // Only what a storage class could have set, formed as it would be.
    if (CheckParams(mode, {{key, value}}).ok()) props[key] = value;
  }
  return props;
}

StatusOr<std::vector<std::string>> ZfsBackend::CopyOptions(
    const std::string& source_dataset, VolumeMode mode, int64_t source_block_bytes,
    const std::map<std::string, std::string>& params, const std::string& owner_uid,
    const std::string& origin, int64_t refquota) {
  if (auto it = params.find("volblocksize"); it != params.end()) {
    ASSIGN_OR_RETURN(int64_t asked, ParseVolBlockSize(it->second));
    if (asked != source_block_bytes) {
      return InvalidArgument("zfs parameter 'volblocksize': a copy keeps its source's " +
                             std::to_string(source_block_bytes) + "-byte blocks, not " +
                             std::to_string(asked));
    }
  }
  ASSIGN_OR_RETURN(auto props, LocalProperties(source_dataset, mode));
  for (const auto& [key, value] : params) {
    if (key != "thin" && key != "volblocksize") props[key] = value;
  }
  std::vector<std::string> options;
  if (mode == VolumeMode::kBlock) {
    options.insert(options.end(), {"-o", "volmode=dev"});
  } else {
    options.insert(options.end(), {"-o", "refquota=" + std::to_string(refquota)});
  }
  for (const auto& [key, value] : props) options.insert(options.end(), {"-o", key + "=" + value});
  options.insert(options.end(), {"-o", std::string(kOwnerProperty) + "=" + owner_uid, "-o",
                                 std::string(kOriginProperty) + "=" + origin});
  return options;
}

StatusOr<BackendVolume> ZfsBackend::CopySnapshot(const std::string& name, int64_t size_bytes,
                                                 VolumeMode mode, std::vector<std::string> options,
                                                 const std::string& snapshot, int64_t source_bytes,
                                                 bool detached,
                                                 const std::map<std::string, std::string>& params) {
  if (detached) {
    // A full stream into a dataset of its own: nothing of the source is kept
    // for it. The received snapshot gets an internal name and goes at once.
    const std::string received = Id(name) + "@" + kCopySnapshotPrefix + name;
    RETURN_IF_ERROR(SendReceive(Id(snapshot), options, received));
    RETURN_IF_ERROR(DestroySnapshot(received, /*deferred=*/false));
  } else {
    std::vector<std::string> argv = {"clone"};
    argv.insert(argv.end(), options.begin(), options.end());
    argv.insert(argv.end(), {"--", Id(snapshot), Id(name)});
    RETURN_IF_ERROR(exec_.RunOk(Zfs(std::move(argv), kChangeTimeout)));
  }
  ASSIGN_OR_RETURN(ZfsRow made, FindVolume(name));
  if (mode == VolumeMode::kBlock) {
    // A zvol copy starts with its source's volsize and no reservation.
    int64_t target = source_bytes;
    if (size_bytes > source_bytes) {
      ASSIGN_OR_RETURN(target,
                       backend_util::RoundUp(size_bytes, std::max<int64_t>(made.block_bytes, 512)));
    }
    if (target > made.size_bytes) {
      RETURN_IF_ERROR(
          exec_.RunOk(Zfs({"set", "volsize=" + std::to_string(target), Id(name)}, kChangeTimeout)));
    }
    if (auto it = params.find("thin"); it == params.end() || it->second != "true") {
      // As a zvol made thick: space for every block is reserved.
      RETURN_IF_ERROR(exec_.RunOk(Zfs({"set", "refreservation=auto", Id(name)}, kChangeTimeout)));
    }
    ASSIGN_OR_RETURN(made, FindVolume(name));
  }
  log::Info("volume made from a source",
            {{"volume", Id(name)}, {"source", Id(snapshot)}, {"detached", detached}});
  return ToVolume(made);
}

StatusOr<BackendVolume> ZfsBackend::DoCreateFromSnapshot(
    const std::string& name, int64_t size_bytes, VolumeMode mode,
    const std::map<std::string, std::string>& params, const std::string& owner_uid,
    const BackendSnapshot& snap, bool detached, std::unique_lock<std::mutex>& /*lock*/) {
  ASSIGN_OR_RETURN(std::optional<ZfsSnapshotRow> row, FindZfsSnapshot(snap.name));
  if (!row) return NotFound("snapshot " + Id(snap.name) + " not found");
  ASSIGN_OR_RETURN(std::vector<std::string> options,
                   CopyOptions(row->dataset, mode, row->block_bytes, params, owner_uid,
                               "snapshot:" + snap.name, std::max(size_bytes, snap.size_bytes)));
  return CopySnapshot(name, size_bytes, mode, std::move(options), row->dataset + "@" + snap.name,
                      snap.size_bytes, detached, params);
}

StatusOr<BackendVolume> ZfsBackend::DoCloneVolume(const std::string& name, int64_t size_bytes,
                                                  VolumeMode mode,
                                                  const std::map<std::string, std::string>& params,
                                                  const std::string& owner_uid,
                                                  const ZfsRow& source, bool detached,
                                                  std::unique_lock<std::mutex>& /*lock*/) {
  ASSIGN_OR_RETURN(std::vector<std::string> options,
                   CopyOptions(source.name, mode, source.block_bytes, params, owner_uid,
                               "volume:" + source.name, std::max(size_bytes, source.size_bytes)));
  // The point in time the copy starts from; it never outlives the copy.
  const std::string snapshot =
      source.name + "@" + (detached ? kCopySnapshotPrefix : kCloneSnapshotPrefix) + name;
  RETURN_IF_ERROR(exec_.RunOk(Zfs({"snapshot", "--", Id(snapshot)}, kChangeTimeout)));
  auto made = CopySnapshot(name, size_bytes, mode, std::move(options), snapshot, source.size_bytes,
                           detached, params);
  // Deferred: a clone's origin goes when the clone goes; a detached copy's
  // at once. Reclaim retries it when this fails.
  Status destroyed = DestroySnapshot(Id(snapshot), /*deferred=*/true);
  if (!made.ok()) return made.status();
  RETURN_IF_ERROR(destroyed);
  return made;
}

}  // namespace pillar::agent
