// The CSI Node service's logic, free of protobuf: the gRPC glue (csi_node.h)
// checks field presence and converts messages; everything else - validation
// of the contexts, attach, format-only-blank, mount, stage records, unmount,
// health - is here and runs against injected Exec / Fs / Mounter.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/fs.h"
#include "node/attach/attacher.h"
#include "node/attach/nfs.h"
#include "node/format.h"
#include "node/mounter.h"
#include "node/stage_record.h"
#include "node/volume_locks.h"

namespace pillar::node {

using Context = std::map<std::string, std::string>;

// volume_context + publish_context (the publish context wins: it is what the
// controller saw at publish time), validated before any command runs.
StatusOr<RemoteTarget> ParseTarget(const Context& ctx);

struct StageRequest {
  std::string volume_id;
  std::string staging_path;
  bool block = false;
  std::string fs_type;  // from the capability, else the context's fsType
  std::vector<std::string> mount_flags;
  bool read_only = false;  // reader-only access mode or readonly=true
  Context context;
  // NodeStage secrets (csi.storage.k8s.io/node-stage-secret-*): required when
  // the context says auth=chap, ignored otherwise. Never logged or recorded.
  std::map<std::string, std::string> secrets;
};

struct PublishRequest {
  std::string volume_id;
  std::string staging_path;
  std::string target_path;
  bool block = false;
  bool read_only = false;
  std::vector<std::string> mount_flags;
};

struct VolumeStats {
  bool block = false;
  bool has_usage = false;
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
  int64_t used_bytes = 0;
  int64_t total_inodes = 0;
  int64_t free_inodes = 0;
  int64_t used_inodes = 0;
  bool abnormal = false;
  std::string message;
};

struct Attachers {
  BlockAttacher* nvme = nullptr;
  BlockAttacher* iscsi = nullptr;
  BlockAttacher* For(Protocol protocol) const {
    switch (protocol) {
      case Protocol::kNvmeofTcp:
        return nvme;
      case Protocol::kIscsi:
        return iscsi;
      case Protocol::kNfs:
        return nullptr;
    }
    return nullptr;
  }
};

struct NodeDeps {
  Fs& fs;
  Mounter& mounter;
  Attachers attachers;
  NfsMounter& nfs;
  DeviceFormatter& formatter;
  StageRecordStore& records;
  VolumeLocks& volume_locks;
  NamedLocks& connection_locks;
  std::string sysfs_root;
};

class NodeCore {
 public:
  explicit NodeCore(NodeDeps deps) : d_(std::move(deps)) {}

  Status Stage(const StageRequest& req);
  Status Unstage(const std::string& volume_id, const std::string& staging_path);
  Status Publish(const PublishRequest& req);
  Status Unpublish(const std::string& volume_id, const std::string& target_path);
  StatusOr<VolumeStats> Stats(const std::string& volume_id, const std::string& volume_path);
  // Returns the new capacity in bytes (0 for NFS: nothing to grow here).
  StatusOr<int64_t> Expand(const std::string& volume_id, const std::string& volume_path,
                           int64_t required_bytes);

 private:
  Status StageLocked(const StageRequest& req, const RemoteTarget& t);
  StatusOr<bool> StagedAndHealthy(const StageRecord& rec);
  // The mounts of the device anywhere on this host ("/dev/nvme0n1" as a
  // source, or bind mounts of its device node).
  StatusOr<std::vector<std::string>> MountsOfDevice(const std::string& device);
  Status DetachIfLastUser(const StageRecord& rec);

  NodeDeps d_;
};

}  // namespace pillar::node
