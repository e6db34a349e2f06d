#include "agent/backends/lvm_backend.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <string_view>

#include "agent/backends/backend_util.h"
#include "common/log.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

using backend_util::kChangeTimeout;
using backend_util::kQueryTimeout;
using nlohmann::json;

// lvcreate refuses byte sizes that are not whole 512-byte sectors.
constexpr int64_t kSectorBytes = 512;

Command Lvm(std::vector<std::string> argv, std::chrono::seconds timeout) {
  return Command{std::move(argv), "", timeout};
}

Status BadReport(const Command& cmd, const std::string& what) {
  return Internal("output of '" + cmd.ToString() + "': " + what);
}

// The rows of one section ("lv", "vg") of an lvm2 JSON report:
// {"report": [{"lv": [{...}, ...]}]}.
StatusOr<json> ReportRows(const Command& cmd, const std::string& out, const char* section) {
  ASSIGN_OR_RETURN(json doc, backend_util::ParseJsonOutput(cmd, out));
  if (!doc.is_object() || !doc.contains("report") || !doc["report"].is_array() ||
      doc["report"].empty() || !doc["report"][0].is_object() ||
      !doc["report"][0].contains(section) || !doc["report"][0][section].is_array()) {
    return BadReport(cmd, std::string("no report.") + section + " list");
  }
  return doc["report"][0][section];
}

// --reportformat json prints every field as a string, json_std prints
// numbers as numbers and empty values as null: accept each.
StatusOr<std::string> TextField(const Command& cmd, const json& row, const char* key) {
  if (!row.is_object() || !row.contains(key)) {
    return BadReport(cmd, std::string("a row lacks field ") + key);
  }
  const json& v = row[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number()) return v.dump();
  if (v.is_null()) return std::string();
  return BadReport(cmd, std::string("field ") + key + " is neither text nor a number");
}

StatusOr<int64_t> BytesField(const Command& cmd, const json& row, const char* key) {
  ASSIGN_OR_RETURN(std::string text, TextField(cmd, row, key));
  std::optional<int64_t> bytes = backend_util::ParseCount(text);
  if (!bytes) return BadReport(cmd, std::string("field ") + key + " '" + text + "' is not bytes");
  return *bytes;
}

StatusOr<double> PercentField(const Command& cmd, const json& row, const char* key) {
  ASSIGN_OR_RETURN(std::string text, TextField(cmd, row, key));
  double value = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end || value < 0 || value > 100) {
    return BadReport(cmd, std::string("field ") + key + " '" + text + "' is not a percentage");
  }
  return value;
}

// lv_attr: [0] volume type, [4] state (https://man7.org/linux/man-pages/man8/lvs.8.html).
constexpr size_t kAttrType = 0;
constexpr size_t kAttrState = 4;

constexpr char kOwnerTagPrefix[] = "pillar-csi.volume-uid.";
constexpr char kZeroTagPrefix[] = "pillar-csi.zero-from.";
constexpr char kSnapshotTagPrefix[] = "pillar-csi.snapshot-uid.";
constexpr char kSnapshotOfTagPrefix[] = "pillar-csi.snapshot-of.";
constexpr char kOriginSnapshotTagPrefix[] = "pillar-csi.origin-snapshot.";
constexpr char kOriginVolumeTagPrefix[] = "pillar-csi.origin-volume.";

// The value of the one tag in lv_tags ("a,b,c") starting with `prefix`; ""
// without one.
std::string TagValue(const std::string& tags, std::string_view prefix) {
  size_t start = 0;
  while (start <= tags.size()) {
    size_t comma = tags.find(',', start);
    if (comma == std::string::npos) comma = tags.size();
    std::string_view tag(tags.data() + start, comma - start);
    if (tag.starts_with(prefix)) return std::string(tag.substr(prefix.size()));
    start = comma + 1;
  }
  return "";
}

// One chunk of zeroing may have to write every byte (no write-zeroes
// offload): 4 GiB at ~15 MB/s.
constexpr std::chrono::seconds kZeroTimeout{300};

}  // namespace

std::string LvmBackend::ZeroTag(int64_t from) { return kZeroTagPrefix + std::to_string(from); }

StatusOr<std::optional<int64_t>> LvmBackend::ZeroFromTags(const std::string& tags) {
  std::optional<int64_t> from;
  size_t start = 0;
  while (start <= tags.size()) {
    size_t comma = tags.find(',', start);
    if (comma == std::string::npos) comma = tags.size();
    std::string_view tag(tags.data() + start, comma - start);
    start = comma + 1;
    if (!tag.starts_with(kZeroTagPrefix)) continue;
    std::string_view value = tag.substr(std::string_view(kZeroTagPrefix).size());
    std::optional<int64_t> offset = backend_util::ParseCount(value);
    if (!offset) return InvalidArgument("zeroing tag " + std::string(tag) + " has no byte offset");
    if (from) {
      return InvalidArgument("two zeroing tags (from " + std::to_string(*from) + " and " +
                             std::to_string(*offset) + ")");
    }
    from = offset;
  }
  return from;
}

std::string LvmBackend::OwnerTag(const std::string& uid) { return kOwnerTagPrefix + uid; }

StatusOr<std::string> LvmBackend::OwnerFromTags(const std::string& tags) {
  std::string owner;
  size_t start = 0;
  while (start <= tags.size()) {
    size_t comma = tags.find(',', start);
    if (comma == std::string::npos) comma = tags.size();
    std::string_view tag(tags.data() + start, comma - start);
    if (tag.starts_with(kOwnerTagPrefix)) {
      std::string uid(tag.substr(std::string_view(kOwnerTagPrefix).size()));
      RETURN_IF_ERROR(validate::Uuid("ownership tag", uid));
      if (!owner.empty() && owner != uid) {
        return InvalidArgument("two ownership tags (" + owner + ", " + uid + ")");
      }
      owner = uid;
    }
    start = comma + 1;
  }
  return owner;
}

Status LvmBackend::CheckConfig() const {
  RETURN_IF_ERROR(validate::PoolName("pool", vg_));
  if (vg_.find('/') != std::string::npos) {
    return InvalidArgument("lvm pool '" + vg_ + "': a volume group name has no '/'");
  }
  if (!thin_pool_.empty()) RETURN_IF_ERROR(validate::VolumeName("thin pool", thin_pool_));
  return Status::Ok();
}

bool LvmBackend::IsSnapshot(const LvmRow& row) const {
  return !thin_pool_.empty() && !row.snapshot_uid.empty() && row.attr[kAttrType] == 'V' &&
         row.pool_lv == thin_pool_;
}

bool LvmBackend::IsOurs(const LvmRow& row) const {
  // A snapshot is a thin LV too, but never a volume.
  if (!row.snapshot_uid.empty()) return false;
  char type = row.attr[kAttrType];
  if (!thin_pool_.empty()) return type == 'V' && row.pool_lv == thin_pool_;
  // '-' plain linear, 'o' a linear LV that has a (thick) snapshot.
  return (type == '-' || type == 'o') && row.pool_lv.empty();
}

BackendVolume LvmBackend::ToVolume(const LvmRow& row) const {
  BackendVolume vol{row.name, row.size_bytes, VolumeMode::kBlock, DevicePath(row.name),
                    "",       row.owner_uid};
  if (row.zero_from) vol.pending = "zeroing from byte " + std::to_string(*row.zero_from);
  vol.origin = row.origin;
  return vol;
}

Status LvmBackend::FinishZeroing(const LvmRow& row) {
  if (!row.zero_from) return Status::Ok();
  const std::string id = Id(row.name);
  if (row.attr[kAttrState] != 'a') {
    RETURN_IF_ERROR(exec_.RunOk(Lvm({"lvchange", "--activate", "y", "--", id}, kChangeTimeout)));
  }
  int64_t tagged = *row.zero_from;
  for (int64_t offset = tagged; offset < row.size_bytes;) {
    int64_t length = std::min(kZeroChunkBytes, row.size_bytes - offset);
    // --force: the LV may be held open (an exported volume being expanded);
    // only the range the tag names, which no consumer was given yet, is written.
    RETURN_IF_ERROR(
        exec_.RunOk(Lvm({"blkdiscard", "--zeroout", "--force", "--offset", std::to_string(offset),
                         "--length", std::to_string(length), "--", DevicePath(row.name)},
                        kZeroTimeout)));
    offset += length;
    if (offset < row.size_bytes) {
      // One lvchange: the progress is recorded in a single metadata commit.
      RETURN_IF_ERROR(exec_.RunOk(
          Lvm({"lvchange", "--deltag", ZeroTag(tagged), "--addtag", ZeroTag(offset), "--", id},
              kChangeTimeout)));
      tagged = offset;
    }
  }
  RETURN_IF_ERROR(
      exec_.RunOk(Lvm({"lvchange", "--deltag", ZeroTag(tagged), "--", id}, kChangeTimeout)));
  log::Info("volume zeroed",
            {{"volume", id}, {"fromByte", *row.zero_from}, {"sizeBytes", row.size_bytes}});
  return Status::Ok();
}

StatusOr<std::vector<LvmRow>> LvmBackend::ListRows() {
  Command cmd = Lvm({"lvs", "--reportformat", "json", "--units", "b", "--nosuffix", "-o",
                     "lv_name,lv_size,lv_attr,pool_lv,vg_extent_size,lv_tags", "--", vg_},
                    kQueryTimeout);
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, cmd));
  ASSIGN_OR_RETURN(json rows, ReportRows(cmd, out, "lv"));
  std::vector<LvmRow> result;
  for (const json& r : rows) {
    LvmRow row;
    ASSIGN_OR_RETURN(row.name, TextField(cmd, r, "lv_name"));
    ASSIGN_OR_RETURN(row.size_bytes, BytesField(cmd, r, "lv_size"));
    ASSIGN_OR_RETURN(row.attr, TextField(cmd, r, "lv_attr"));
    ASSIGN_OR_RETURN(row.pool_lv, TextField(cmd, r, "pool_lv"));
    ASSIGN_OR_RETURN(row.extent_bytes, BytesField(cmd, r, "vg_extent_size"));
    ASSIGN_OR_RETURN(std::string tags, TextField(cmd, r, "lv_tags"));
    StatusOr<std::string> owner = OwnerFromTags(tags);
    if (!owner.ok()) {
      return BadReport(cmd, "LV " + row.name + " lv_tags: " + owner.status().message());
    }
    row.owner_uid = *owner;
    StatusOr<std::optional<int64_t>> zero_from = ZeroFromTags(tags);
    if (!zero_from.ok()) {
      return BadReport(cmd, "LV " + row.name + " lv_tags: " + zero_from.status().message());
    }
    row.zero_from = *zero_from;
    row.snapshot_uid = TagValue(tags, kSnapshotTagPrefix);
    if (!row.snapshot_uid.empty() && !validate::Uuid("snapshot tag", row.snapshot_uid).ok()) {
      return BadReport(cmd, "LV " + row.name + " lv_tags: snapshot tag is not a UUID");
    }
    row.snapshot_of = TagValue(tags, kSnapshotOfTagPrefix);
    std::string from_snapshot = TagValue(tags, kOriginSnapshotTagPrefix);
    std::string from_volume = TagValue(tags, kOriginVolumeTagPrefix);
    if (!from_snapshot.empty()) {
      row.origin = OriginOf(vg_, VolumeSource::Kind::kSnapshot, from_snapshot);
    } else if (!from_volume.empty()) {
      row.origin = OriginOf(vg_, VolumeSource::Kind::kVolume, from_volume);
    }
    if (row.attr.size() <= kAttrState) return BadReport(cmd, "lv_attr '" + row.attr + "'");
    // Hidden LVs ("[tp_tdata]") are parts of others; lvs -a alone lists them.
    if (!row.name.empty() && row.name.front() == '[') continue;
    result.push_back(std::move(row));
  }
  return result;
}

StatusOr<std::optional<LvmRow>> LvmBackend::FindRow(const std::string& name) {
  // Listing the VG and picking the row avoids telling "no such LV" from
  // other failures by lvs's stderr text.
  ASSIGN_OR_RETURN(std::vector<LvmRow> rows, ListRows());
  for (auto& row : rows) {
    if (row.name == name) return std::optional<LvmRow>(std::move(row));
  }
  return std::optional<LvmRow>();
}

Status LvmBackend::CheckIsVolume(const std::string& name, const LvmRow& row, bool creating) const {
  if (IsOurs(row)) return Status::Ok();
  if (creating) {
    return AlreadyExists("volume " + Id(name) + ": an LV of that name exists and is not a " +
                         kind() + " volume (lv_attr " + row.attr + ")");
  }
  return FailedPrecondition("LV " + Id(name) + " (lv_attr " + row.attr + ") is not a volume of " +
                            kind() + " pool " + vg_ + "; leaving it alone");
}

StatusOr<BackendVolume> LvmBackend::DoCreate(const std::string& name, int64_t size_bytes,
                                             VolumeMode /*mode*/,
                                             const std::map<std::string, std::string>& /*params*/,
                                             const std::string& owner_uid,
                                             const std::optional<VolumeRoot>& /*root*/,
                                             std::unique_lock<std::mutex>& lock) {
  ASSIGN_OR_RETURN(int64_t size, backend_util::RoundUp(size_bytes, kSectorBytes));
  const std::string bytes = std::to_string(size) + "b";
  Command create =
      thin_pool_.empty()
          // The extents may have held another volume: the LV is born with
          // its zeroing tag, so it is never complete before every byte is
          // zero (signatures are wiped at once all the same).
          ? Lvm({"lvcreate", "--yes", "--wipesignatures", "y", "--zero", "y", "--type", "linear",
                 "--size", bytes, "--addtag", OwnerTag(owner_uid), "--addtag", ZeroTag(0), "--name",
                 name, "--", vg_},
                kChangeTimeout)
          // A new thin LV reads as zeros until written: nothing to wipe.
          : Lvm({"lvcreate", "--yes", "--type", "thin", "--virtualsize", bytes, "--thinpool",
                 thin_pool_, "--addtag", OwnerTag(owner_uid), "--name", name, "--", vg_},
                kChangeTimeout);
  RETURN_IF_ERROR(exec_.RunOk(create));
  ASSIGN_OR_RETURN(LvmRow created, FindVolume(name));
  return FinishCreate(std::move(created), lock);
}

StatusOr<BackendVolume> LvmBackend::ResumeCreate(const LvmRow& row,
                                                 std::unique_lock<std::mutex>& lock) {
  return FinishCreate(row, lock);
}

StatusOr<BackendVolume> LvmBackend::FinishCreate(LvmRow row, std::unique_lock<std::mutex>& lock) {
  lock.unlock();
  // A new LV, or one whose create stopped before its zeroing was done.
  RETURN_IF_ERROR(FinishZeroing(row));
  row.zero_from.reset();
  return ToVolume(row);
}

StatusOr<BackendVolume> LvmBackend::DoExpand(const LvmRow& found, int64_t size_bytes,
                                             std::unique_lock<std::mutex>& lock) {
  LvmRow row = found;
  const std::string& name = row.name;
  if (row.zero_from) {
    // An earlier create or expand stopped before its zeroing was done.
    lock.unlock();
    RETURN_IF_ERROR(FinishZeroing(row));
    row.zero_from.reset();
    lock.lock();
  }
  int64_t unit = row.extent_bytes > 0 ? row.extent_bytes : kSectorBytes;
  ASSIGN_OR_RETURN(int64_t target, backend_util::RoundUp(size_bytes, unit));
  ASSIGN_OR_RETURN(backend_util::Growth growth,
                   backend_util::PlanExpand(Id(name), row.size_bytes, target));
  if (growth == backend_util::Growth::kNone) return ToVolume(row);
  if (thin_pool_.empty()) {
    // The tag before the new extents exist: a crash right after lvextend
    // still leaves them to be zeroed by the retry.
    RETURN_IF_ERROR(exec_.RunOk(
        Lvm({"lvchange", "--addtag", ZeroTag(row.size_bytes), "--", Id(name)}, kChangeTimeout)));
  }
  RETURN_IF_ERROR(exec_.RunOk(
      Lvm({"lvextend", "--size", std::to_string(target) + "b", "--", Id(name)}, kChangeTimeout)));
  ASSIGN_OR_RETURN(LvmRow grown, FindVolume(name));
  lock.unlock();
  RETURN_IF_ERROR(FinishZeroing(grown));
  grown.zero_from.reset();
  return ToVolume(grown);
}

Status LvmBackend::DoDelete(const std::string& name, const std::optional<LvmRow>& row) {
  if (!row) return Status::Ok();
  // --yes answers "remove active LV?"; no --force, so an LV in use is refused.
  return exec_.RunOk(Lvm({"lvremove", "--yes", "--", Id(name)}, kChangeTimeout));
}

Status LvmBackend::WriteMark(const LvmRow& row, const std::string& owner_uid) {
  return exec_.RunOk(
      Lvm({"lvchange", "--addtag", OwnerTag(owner_uid), "--", Id(row.name)}, kChangeTimeout));
}

StatusOr<std::vector<BackendVolume>> LvmBackend::ListVolumes() {
  ASSIGN_OR_RETURN(std::vector<LvmRow> rows, ListRows());
  std::vector<BackendVolume> out;
  for (const auto& row : rows) {
    if (IsOurs(row) && backend_util::CheckVolumeName(row.name).ok()) {
      out.push_back(ToVolume(row));
    }
  }
  return out;
}

StatusOr<PoolCapacity> LvmBackend::ReadCapacity() {
  if (thin_pool_.empty()) {
    Command cmd = Lvm({"vgs", "--reportformat", "json", "--units", "b", "--nosuffix", "-o",
                       "vg_name,vg_size,vg_free", "--", vg_},
                      kQueryTimeout);
    ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, cmd));
    ASSIGN_OR_RETURN(json rows, ReportRows(cmd, out, "vg"));
    for (const json& r : rows) {
      ASSIGN_OR_RETURN(std::string name, TextField(cmd, r, "vg_name"));
      if (name != vg_) continue;
      PoolCapacity cap;
      ASSIGN_OR_RETURN(cap.total_bytes, BytesField(cmd, r, "vg_size"));
      ASSIGN_OR_RETURN(cap.available_bytes, BytesField(cmd, r, "vg_free"));
      return cap;
    }
    return BadReport(cmd, "no row for volume group " + vg_);
  }
  Command cmd = Lvm({"lvs", "--reportformat", "json", "--units", "b", "--nosuffix", "-o",
                     "lv_name,lv_size,lv_attr,data_percent", "--", Id(thin_pool_)},
                    kQueryTimeout);
  ASSIGN_OR_RETURN(std::string out, backend_util::RunForOutput(exec_, cmd));
  ASSIGN_OR_RETURN(json rows, ReportRows(cmd, out, "lv"));
  if (rows.size() != 1) return BadReport(cmd, "want exactly one row for " + Id(thin_pool_));
  ASSIGN_OR_RETURN(std::string attr, TextField(cmd, rows[0], "lv_attr"));
  if (attr.empty() || attr[kAttrType] != 't') {
    return FailedPrecondition("LV " + Id(thin_pool_) + " (lv_attr " + attr +
                              ") is not a thin pool");
  }
  PoolCapacity cap;
  ASSIGN_OR_RETURN(cap.total_bytes, BytesField(cmd, rows[0], "lv_size"));
  ASSIGN_OR_RETURN(double used_percent, PercentField(cmd, rows[0], "data_percent"));
  auto used = static_cast<int64_t>(
      std::llround(static_cast<double>(cap.total_bytes) * used_percent / 100.0));
  cap.available_bytes = std::max<int64_t>(0, cap.total_bytes - used);
  return cap;
}

StatusOr<std::string> LvmBackend::DoExpose(const LvmRow& row) {
  const std::string& name = row.name;
  if (row.zero_from) {
    return FailedPrecondition("volume " + Id(name) +
                              " is not served yet: " + ToVolume(row).pending +
                              " is pending (its create or expand did not finish); a retried "
                              "CreateVolume or ExpandVolume finishes it");
  }
  if (row.attr[kAttrState] != 'a') {
    RETURN_IF_ERROR(
        exec_.RunOk(Lvm({"lvchange", "--activate", "y", "--", Id(name)}, kChangeTimeout)));
  }
  return DevicePath(name);
}

// --- Snapshots (lvm-thin) ----------------------------------------------------

std::optional<int64_t> LvmBackend::ParseLvTime(const std::string& text) {
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0, off = 0;
  char sign = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2d %2d:%2d:%2d %c%4d%n", &year, &mon, &day, &hour, &min,
                  &sec, &sign, &off, &used) != 8 ||
      static_cast<size_t>(used) != text.size() || (sign != '+' && sign != '-') || mon < 1 ||
      mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60 || off % 100 > 59) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  int64_t utc = static_cast<int64_t>(timegm(&tm));
  int64_t offset = (off / 100) * 3600 + (off % 100) * 60;
  return sign == '+' ? utc - offset : utc + offset;
}

Status LvmBackend::CheckSnapshots(bool /*detached*/) const {
  if (!thin_pool_.empty()) return Status::Ok();
  return FailedPrecondition(
      "lvm pool " + vg_ +
      " holds linear LVs, which have no cheap snapshots (a thick LVM snapshot copies on write "
      "into space reserved up front and is lost when that fills); use an lvm-thin pool");
}

Status LvmBackend::CheckCopies(const VolumeSource& source) const {
  if (!thin_pool_.empty()) return Status::Ok();
  return FailedPrecondition("lvm pool " + vg_ + ": a volume made from a " +
                            (source.kind == VolumeSource::Kind::kSnapshot ? "snapshot" : "volume") +
                            " needs thin snapshots, which linear LVs do not have; use an "
                            "lvm-thin pool");
}

StatusOr<std::vector<LvmRow>> LvmBackend::ListSnapshotLvs() {
  std::vector<LvmRow> out;
  if (thin_pool_.empty()) return out;  // linear pools take none
  ASSIGN_OR_RETURN(std::vector<LvmRow> rows, ListRows());
  bool any =
      std::any_of(rows.begin(), rows.end(), [&](const LvmRow& row) { return IsSnapshot(row); });
  if (!any) return out;
  Command cmd =
      Lvm({"lvs", "--reportformat", "json", "-o", "lv_name,lv_time", "--", vg_}, kQueryTimeout);
  ASSIGN_OR_RETURN(std::string text, backend_util::RunForOutput(exec_, cmd));
  ASSIGN_OR_RETURN(json times, ReportRows(cmd, text, "lv"));
  std::map<std::string, int64_t> time_of;
  for (const json& r : times) {
    ASSIGN_OR_RETURN(std::string name, TextField(cmd, r, "lv_name"));
    ASSIGN_OR_RETURN(std::string when, TextField(cmd, r, "lv_time"));
    std::optional<int64_t> t = ParseLvTime(when);
    if (!t) return BadReport(cmd, "LV " + name + " lv_time '" + when + "'");
    time_of[name] = *t;
  }
  for (auto& row : rows) {
    if (!IsSnapshot(row) || !backend_util::CheckSnapshotName(row.name).ok()) continue;
    row.time_unix = time_of.count(row.name) != 0 ? time_of[row.name] : 0;
    out.push_back(std::move(row));
  }
  return out;
}

BackendSnapshot LvmBackend::ToSnapshot(const LvmRow& row) const {
  BackendSnapshot snap;
  snap.name = row.name;
  snap.source_volume = row.snapshot_of;
  snap.mode = VolumeMode::kBlock;
  snap.size_bytes = row.size_bytes;  // a thin snapshot has its origin's size when taken
  snap.creation_time_unix_nanos = row.time_unix * 1000000000;
  snap.owner_uid = row.snapshot_uid;
  snap.detached = true;  // thin snapshots never hold their origin, nor it them
  return snap;
}

StatusOr<std::optional<BackendSnapshot>> LvmBackend::FindSnapshotRow(const std::string& name) {
  ASSIGN_OR_RETURN(std::vector<LvmRow> rows, ListSnapshotLvs());
  for (const auto& row : rows) {
    if (row.name == name) return std::optional<BackendSnapshot>(ToSnapshot(row));
  }
  if (thin_pool_.empty()) return std::optional<BackendSnapshot>();
  // Another LV of the name (a volume, say) is no snapshot but holds the name.
  ASSIGN_OR_RETURN(std::optional<LvmRow> other, FindRow(name));
  if (other) {
    return AlreadyExists("snapshot " + Id(name) + ": an LV of that name exists and is not a " +
                         "snapshot (lv_attr " + other->attr + ")");
  }
  return std::optional<BackendSnapshot>();
}

StatusOr<std::vector<BackendSnapshot>> LvmBackend::ListSnapshotRows() {
  ASSIGN_OR_RETURN(std::vector<LvmRow> rows, ListSnapshotLvs());
  std::vector<BackendSnapshot> out;
  out.reserve(rows.size());
  for (const auto& row : rows) out.push_back(ToSnapshot(row));
  return out;
}

StatusOr<BackendSnapshot> LvmBackend::DoCreateSnapshot(const LvmRow& row, const std::string& name,
                                                       const std::string& snapshot_uid,
                                                       bool /*detached*/,
                                                       std::unique_lock<std::mutex>& /*lock*/) {
  // No size: a thin snapshot in the origin's pool. The activation-skip flag
  // keeps it inactive; nothing reads it but a new thin snapshot of it.
  RETURN_IF_ERROR(
      exec_.RunOk(Lvm({"lvcreate", "--yes", "--snapshot", "--setactivationskip", "y", "--addtag",
                       kSnapshotTagPrefix + snapshot_uid, "--addtag",
                       kSnapshotOfTagPrefix + row.name, "--name", name, "--", Id(row.name)},
                      kChangeTimeout)));
  return FindSnapshot(name);
}

Status LvmBackend::DoDeleteSnapshot(const BackendSnapshot& snap) {
  // Thin snapshots are independent: nothing made from it needs it.
  return exec_.RunOk(Lvm({"lvremove", "--yes", "--", Id(snap.name)}, kChangeTimeout));
}

StatusOr<BackendVolume> LvmBackend::ThinCopy(const std::string& name, int64_t size_bytes,
                                             const std::string& owner_uid,
                                             const std::string& source,
                                             const std::string& origin_tag,
                                             std::unique_lock<std::mutex>& lock) {
  // --setactivationskip n: a volume activates like any other (a snapshot of
  // a snapshot would inherit the default skip flag of thin snapshots).
  RETURN_IF_ERROR(exec_.RunOk(
      Lvm({"lvcreate", "--yes", "--snapshot", "--setactivationskip", "n", "--addtag",
           OwnerTag(owner_uid), "--addtag", origin_tag, "--name", name, "--", Id(source)},
          kChangeTimeout)));
  ASSIGN_OR_RETURN(LvmRow made, FindVolume(name));
  if (made.size_bytes < size_bytes) return DoExpand(made, size_bytes, lock);
  return ToVolume(made);
}

StatusOr<BackendVolume> LvmBackend::DoCreateFromSnapshot(
    const std::string& name, int64_t size_bytes, VolumeMode /*mode*/,
    const std::map<std::string, std::string>& /*params*/, const std::string& owner_uid,
    const BackendSnapshot& snap, bool /*detached*/, std::unique_lock<std::mutex>& lock) {
  return ThinCopy(name, size_bytes, owner_uid, snap.name, kOriginSnapshotTagPrefix + snap.name,
                  lock);
}

StatusOr<BackendVolume> LvmBackend::DoCloneVolume(
    const std::string& name, int64_t size_bytes, VolumeMode /*mode*/,
    const std::map<std::string, std::string>& /*params*/, const std::string& owner_uid,
    const LvmRow& source, bool /*detached*/, std::unique_lock<std::mutex>& lock) {
  return ThinCopy(name, size_bytes, owner_uid, source.name, kOriginVolumeTagPrefix + source.name,
                  lock);
}

}  // namespace pillar::agent
