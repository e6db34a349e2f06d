#include "node/format.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "node/attach/sysfs_util.h"

namespace pillar::node {
namespace {

constexpr int kBlkidNothingFound = 2;

class FdClaim : public DeviceClaimer::Claim {
 public:
  explicit FdClaim(int fd) : fd_(fd) {}
  ~FdClaim() override { close(fd_); }
  FdClaim(const FdClaim&) = delete;
  FdClaim& operator=(const FdClaim&) = delete;

 private:
  int fd_;
};

}  // namespace

StatusOr<std::unique_ptr<DeviceClaimer::Claim>> PosixDeviceClaimer::ClaimExclusive(
    const std::string& device) {
  int fd = open(device.c_str(), O_RDONLY | O_EXCL | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    std::string why = std::strerror(err);
    if (err == EBUSY) {
      return FailedPrecondition(device + " is in use (mounted or held by another program): " + why +
                                "; it is not formatted");
    }
    if (err == ENOENT) return NotFound(device + " does not exist");
    return Internal("open " + device + " exclusively: " + why);
  }
  return std::unique_ptr<Claim>(std::make_unique<FdClaim>(fd));
}

std::map<std::string, std::string> ParseBlkidExport(std::string_view text) {
  std::map<std::string, std::string> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    out[std::string(line.substr(0, eq))] = TrimSpace(line.substr(eq + 1));
  }
  return out;
}

bool SupportedFsType(const std::string& fs_type) {
  return fs_type == "ext4" || fs_type == "ext3" || fs_type == "xfs";
}

StatusOr<ProbeResult> DeviceFormatter::Probe(const std::string& device) {
  Command cmd{{"blkid", "-p", "-o", "export", device}, {}, std::chrono::seconds(30)};
  auto r = exec_.Run(cmd);
  if (!r.ok()) return r.status().Annotate("probe " + device);
  ProbeResult out;
  if (r->exit_code == kBlkidNothingFound) return out;
  if (r->exit_code != 0) {
    return Internal("blkid -p " + device + " exited " + std::to_string(r->exit_code) + " (" +
                    TrimSpace(r->err) + "): cannot tell whether the device is blank");
  }
  auto kv = ParseBlkidExport(r->out);
  out.usage = kv["USAGE"];
  if (!kv["PTTYPE"].empty() && kv["TYPE"].empty()) {
    out.kind = ProbeResult::Kind::kPartitionTable;
    out.type = kv["PTTYPE"];
  } else if (!kv["TYPE"].empty()) {
    out.type = kv["TYPE"];
    out.kind = out.usage.empty() || out.usage == "filesystem" ? ProbeResult::Kind::kFilesystem
                                                              : ProbeResult::Kind::kOther;
  } else {
    // Exit 0 with no TYPE: something was found that we cannot name.
    out.kind = ProbeResult::Kind::kOther;
    out.type = "unknown";
  }
  return out;
}

Command DeviceFormatter::MkfsCommand(const std::string& device, const std::string& fs_type) {
  // No -f: mkfs.xfs then refuses a device with any signature. mke2fs has
  // no such switch, and -F would only widen what it accepts.
  return Command{{"mkfs." + fs_type, device}, {}, std::chrono::minutes(10)};
}

Status DeviceFormatter::FormatBlank(const std::string& device, const std::string& fs_type) {
  {
    ASSIGN_OR_RETURN(std::unique_ptr<DeviceClaimer::Claim> claim, claimer_.ClaimExclusive(device));
    ASSIGN_OR_RETURN(ProbeResult again, Probe(device));
    if (again.kind != ProbeResult::Kind::kBlank) {
      return FailedPrecondition(device + " was blank and now holds " + again.type +
                                "; something wrote to it meanwhile, so it is not formatted");
    }
  }  // mkfs claims the device itself: ours must be gone first.
  log::Info("formatting blank device", {{"device", device}, {"fsType", fs_type}});
  return exec_.RunOk(MkfsCommand(device, fs_type));
}

StatusOr<std::string> DeviceFormatter::EnsureFilesystem(const std::string& device,
                                                        const std::string& fs_type) {
  if (!fs_type.empty() && !SupportedFsType(fs_type)) {
    return InvalidArgument("fsType \"" + fs_type + "\" is not supported (ext4, ext3, xfs)");
  }
  ASSIGN_OR_RETURN(ProbeResult probe, Probe(device));
  switch (probe.kind) {
    case ProbeResult::Kind::kBlank: {
      std::string want = fs_type.empty() ? "ext4" : fs_type;
      RETURN_IF_ERROR(FormatBlank(device, want));
      return want;
    }
    case ProbeResult::Kind::kFilesystem:
      if (!fs_type.empty() && probe.type != fs_type) {
        return FailedPrecondition(device + " holds a " + probe.type + " file system, not the " +
                                  fs_type + " requested; it is left untouched");
      }
      if (!SupportedFsType(probe.type)) {
        return FailedPrecondition(device + " holds a " + probe.type +
                                  " file system, which pillar does not mount");
      }
      return probe.type;
    case ProbeResult::Kind::kPartitionTable:
      return FailedPrecondition(device + " has a " + probe.type +
                                " partition table; it is neither formatted nor mounted");
    case ProbeResult::Kind::kOther:
      break;
  }
  return FailedPrecondition(device + " holds " + probe.type +
                            (probe.usage.empty() ? "" : " (" + probe.usage + ")") +
                            "; it is neither formatted nor mounted");
}

Status DeviceFormatter::Grow(const std::string& device, const std::string& fs_type,
                             const std::string& mount_point) {
  if (fs_type == "ext4" || fs_type == "ext3") {
    return exec_.RunOk(Command{{"resize2fs", device}, {}, std::chrono::minutes(10)});
  }
  if (fs_type == "xfs") {
    return exec_.RunOk(Command{{"xfs_growfs", mount_point}, {}, std::chrono::minutes(10)});
  }
  return FailedPrecondition("cannot grow a " + fs_type + " file system");
}

}  // namespace pillar::node
