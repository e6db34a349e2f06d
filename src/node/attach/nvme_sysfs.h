// The NVMe host's sysfs layout, read through Fs under a configurable root:
//   class/nvme-subsystem/nvme-subsysN/{subsysnqn, nvmeX -> controller, nvmeXnY (head)}
//   class/nvme/nvmeX/{subsysnqn, transport, address, state}
//   block/nvmeXnY/{nsid, size, device -> subsystem (multipath) or controller}
//   block/nvmeXcCnY: hidden per-path nodes of a multipath head, never a device to use.
// The Y of /dev/nvmeXnY is not the NSID: namespaces are matched by the nsid
// attribute and the NQN of the subsystem they belong to.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.h"
#include "node/attach/sysfs_util.h"

namespace pillar::node {

struct NvmeController {
  std::string name;  // "nvme0"
  std::string subsysnqn;
  std::string transport;  // "tcp"
  std::string traddr;     // from "address": traddr=...,trsvcid=...
  std::string trsvcid;
  std::string state;  // "live", "connecting", "resetting", "deleting", ...
};

struct NvmeSubsystem {
  std::string name;  // "nvme-subsys0"
  std::string nqn;
  std::vector<NvmeController> controllers;
};

// "traddr=10.0.0.1,trsvcid=4420,src_addr=10.0.0.2" -> key/value pairs.
std::map<std::string, std::string> ParseNvmeAddress(std::string_view text);

// True for "nvme0n1" (a namespace/head block device), false for the hidden
// path node "nvme0c1n1", controllers "nvme0" and partitions "nvme0n1p1".
bool IsNvmeNamespaceDevice(std::string_view name);

class NvmeSysfs {
 public:
  NvmeSysfs(Fs& fs, std::string sysfs_root) : fs_(fs), root_(std::move(sysfs_root)) {}

  std::optional<NvmeController> ReadController(const std::string& name);
  // The subsystem with this NQN and the controllers under it.
  std::optional<NvmeSubsystem> FindSubsystem(const std::string& nqn);
  // The block device name ("nvme0n1") of namespace `nsid` of subsystem `nqn`.
  std::optional<std::string> FindNamespaceDevice(const std::string& nqn, int64_t nsid);

 private:
  std::optional<std::string> Attr(const std::string& path) { return ReadAttr(fs_, path); }

  Fs& fs_;
  std::string root_;
};

}  // namespace pillar::node
