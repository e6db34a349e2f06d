// NVMe-oF/TCP: connect through the kernel's /dev/nvme-fabrics (no secret on
// any argv), disconnect and rescan through nvme-cli, everything else
// (already connected? which /dev/nvmeXnY?) from sysfs.
#pragma once

#include <string>

#include "common/clock.h"
#include "common/exec.h"
#include "common/fs.h"
#include "node/attach/attacher.h"
#include "node/attach/nvme_fabrics.h"
#include "node/attach/nvme_sysfs.h"

namespace pillar::node {

class NvmeAttacher : public BlockAttacher {
 public:
  // host_nqn_file is read at every connect, so a rewritten host NQN is used
  // at once (the controller's ACL is built from the same file); the host ID
  // comes from "hostid" beside it when that exists, as nvme-cli takes it.
  NvmeAttacher(Exec& exec, Fabrics& fabrics, Fs& fs, Clock& clock, std::string sysfs_root,
               std::string host_nqn_file, AttachOptions options = {})
      : exec_(exec),
        fabrics_(fabrics),
        fs_(fs),
        clock_(clock),
        transport_module_dir_(JoinPath(sysfs_root, "module/nvme_tcp")),
        sysfs_(fs, std::move(sysfs_root)),
        host_nqn_file_(std::move(host_nqn_file)),
        options_(options) {}

  StatusOr<std::string> Attach(const RemoteTarget& t) override;
  Status Detach(const RemoteTarget& t) override;
  DeviceHealth Check(const RemoteTarget& t) override;
  Status Heal(const RemoteTarget& t) override;
  Status Rescan(const RemoteTarget& t) override;

  // The exact options written to /dev/nvme-fabrics (exposed for tests);
  // INVALID_ARGUMENT naming the field when a value would break the
  // comma-separated list (a ',', a space or a control character). host_id
  // may be empty (the kernel then uses its own).
  static StatusOr<std::string> ConnectOptions(const RemoteTarget& t, const std::string& host_nqn,
                                              const std::string& host_id);

 private:
  enum class PathState { kNone, kPending, kLive };
  // The state of this host's controller to t.address:t.port in the subsystem.
  PathState PathTo(const RemoteTarget& t, const NvmeSubsystem* sub);
  // A subsystem NQN names one target, at one address: a subsystem of t's NQN
  // with a controller to another transport, address or port belongs to
  // another connection (another storage node's volume, or an impostor's
  // claim), so none of its namespaces is t's device. FAILED_PRECONDITION
  // naming both connections then; OK when there is no such controller.
  static Status CheckOneTarget(const RemoteTarget& t, const NvmeSubsystem& sub);
  Status Connect(const RemoteTarget& t);
  // nvme-cli writes to /dev/nvme-fabrics, which exists only once the fabrics
  // module is loaded, and loads no module itself: modprobe nvme-tcp (which
  // pulls in nvme-fabrics) when sysfs does not show it, as the agent loads
  // its targets. A failure is logged; the connect then says what is missing.
  void LoadTransport();
  // ns-rescan on every live controller of the subsystem; returns how many
  // ran, or which of them failed (each failure is logged too).
  StatusOr<int> RescanControllers(const NvmeSubsystem& sub);

  Exec& exec_;
  Fabrics& fabrics_;
  Fs& fs_;
  Clock& clock_;
  std::string transport_module_dir_;
  NvmeSysfs sysfs_;
  std::string host_nqn_file_;
  AttachOptions options_;
};

}  // namespace pillar::node
