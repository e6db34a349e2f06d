// What is on a block device, and the one place a device is formatted: only
// when blkid's low-level probe finds neither a file system nor a partition
// table (exit 2). Any other probe outcome, including an error, is never a
// reason to run mkfs (DESIGN "Data safety").
#pragma once

#include <map>
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

class DeviceFormatter {
 public:
  explicit DeviceFormatter(Exec& exec) : exec_(exec) {}

  // blkid -p -o export DEV: exit 0 = something found, 2 = nothing, else an error.
  StatusOr<ProbeResult> Probe(const std::string& device);
  // Leaves `device` carrying a `fs_type` file system (empty = ext4 for a blank
  // device, whatever is there otherwise) and returns the type. A device with
  // a different file system, a partition table or anything else is
  // FAILED_PRECONDITION and is never formatted.
  StatusOr<std::string> EnsureFilesystem(const std::string& device, const std::string& fs_type);
  // Grows the file system to the device: resize2fs DEV / xfs_growfs MOUNT.
  Status Grow(const std::string& device, const std::string& fs_type,
              const std::string& mount_point);

  static Command MkfsCommand(const std::string& device, const std::string& fs_type);

 private:
  Exec& exec_;
};

}  // namespace pillar::node
