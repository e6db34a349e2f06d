// What is on a block device, and the one place a device is formatted: only
// when blkid's low-level probe finds neither a file system nor a partition
// table (exit 2). Any other probe outcome, including an error, is never a
// reason to run mkfs (DESIGN "Data safety").
//
// The probe and mkfs are separate programs, so a blank device is formatted
// only after it was claimed exclusively (O_EXCL: the kernel refuses the claim
// while it is mounted or held by another exclusive opener, and refuses them
// while it is held) and probed blank again under that claim. The claim is
// dropped right before mkfs, which claims the device itself; mkfs.xfs runs
// without -f and so refuses an existing file system on its own. mke2fs has
// no such switch (it asks only on a terminal), so for ext3/4 the re-probe
// under the claim is the guard and the remaining window is the instant
// between our release and mke2fs's own exclusive open.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "common/exec.h"

namespace pillar::node {

struct ProbeResult {
  enum class Kind { kBlank, kFilesystem, kPartitionTable, kOther };
  Kind kind = Kind::kBlank;
  std::string type;   // TYPE= ("ext4", "xfs", "LVM2_member") or PTTYPE= ("gpt", "dos")
  std::string usage;  // USAGE= ("filesystem", "raid", "crypto", ...)
};

// KEY=value lines of `blkid -o export`.
std::map<std::string, std::string> ParseBlkidExport(std::string_view text);

// The file systems pillar formats and mounts.
bool SupportedFsType(const std::string& fs_type);

// Exclusive claims of block devices, behind an interface so the logic runs
// in unit tests against fake devices.
class DeviceClaimer {
 public:
  // Released when destroyed.
  class Claim {
   public:
    virtual ~Claim() = default;
  };
  virtual ~DeviceClaimer() = default;
  // FAILED_PRECONDITION when the device is in use (EBUSY), other errors as
  // they come.
  virtual StatusOr<std::unique_ptr<Claim>> ClaimExclusive(const std::string& device) = 0;
};

// open(2) with O_RDONLY | O_EXCL.
class PosixDeviceClaimer : public DeviceClaimer {
 public:
  StatusOr<std::unique_ptr<Claim>> ClaimExclusive(const std::string& device) override;
};

class DeviceFormatter {
 public:
  DeviceFormatter(Exec& exec, DeviceClaimer& claimer) : exec_(exec), claimer_(claimer) {}

  // blkid -p -o export DEV: exit 0 = something found, 2 = nothing, else an error.
  StatusOr<ProbeResult> Probe(const std::string& device);
  // Leaves `device` carrying a `fs_type` file system (empty = ext4 for a blank
  // device, whatever is there otherwise) and returns the type. A device with
  // a different file system, a partition table or anything else is
  // FAILED_PRECONDITION and is never formatted; so is a blank device that is
  // in use or stops being blank before mkfs.
  StatusOr<std::string> EnsureFilesystem(const std::string& device, const std::string& fs_type);
  // Grows the file system to the device: resize2fs DEV / xfs_growfs MOUNT.
  Status Grow(const std::string& device, const std::string& fs_type,
              const std::string& mount_point);

  static Command MkfsCommand(const std::string& device, const std::string& fs_type);

 private:
  Status FormatBlank(const std::string& device, const std::string& fs_type);

  Exec& exec_;
  DeviceClaimer& claimer_;
};

}  // namespace pillar::node
