#include "agent/backends/zfs_backend.h"

#include <regex>
#include <set>
#include <string_view>

#include "agent/backends/backend_util.h"
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
constexpr size_t kColumns = 8;

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
  if (row.mode == VolumeMode::kBlock) {
    return BackendVolume{row.name, row.size_bytes, VolumeMode::kBlock, "/dev/zvol/" + Id(row.name),
                         "",       row.owner_uid};
  }
  return BackendVolume{row.name, row.size_bytes, VolumeMode::kFilesystem,
                       "",       row.mountpoint, row.owner_uid};
}

StatusOr<std::vector<ZfsRow>> ZfsBackend::ListRows() {
  // mountpoint last: it is the one column that is free text.
  Command cmd = Zfs({"list", "-Hp", "-o",
                     std::string("name,type,volsize,refquota,volblocksize,") + kOwnerProperty +
                         "," + kRootPendingProperty + ",mountpoint",
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
    const std::string& owner = cols[5];
    const std::string& pending = cols[6];
    if (full == dataset_) {  // the parent itself
      if (cols[7].starts_with("/")) pool_mountpoint = cols[7];
      for (const auto& [property, value] :
           {std::pair{kOwnerProperty, owner}, std::pair{kRootPendingProperty, pending}}) {
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
    // A name pillar could not have made (or could not address) is not a volume.
    if (!backend_util::CheckVolumeName(row.name).ok()) continue;
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
      ASSIGN_OR_RETURN(row.size_bytes, NumberColumn(cmd, cols[2], "volsize"));
      ASSIGN_OR_RETURN(row.block_bytes, NumberColumn(cmd, cols[4], "volblocksize"));
    } else if (cols[1] == "filesystem") {
      row.mode = VolumeMode::kFilesystem;
      ASSIGN_OR_RETURN(row.size_bytes, NumberColumn(cmd, cols[3], "refquota"));
      // "legacy", "none" and "-" leave nothing to export.
      if (cols[7].starts_with("/")) row.mountpoint = cols[7];
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
    if (row.name == name) return std::optional<ZfsRow>(std::move(row));
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
  if (r.exit_code == 0) return Status::Ok();
  std::string msg = backend_util::TrimEnd(r.err.empty() ? r.out : r.err);
  if (msg.find("does not exist") != std::string::npos) return Status::Ok();  // gone meanwhile
  std::string what = "volume " + Id(name) + ": '" + cmd.ToString() + "' refused: " + msg;
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
  for (const auto& row : rows) out.push_back(ToVolume(row));
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

}  // namespace pillar::agent
