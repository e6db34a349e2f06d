// NFS needs no block device: staging an NFS volume is mounting the export at
// the staging path with mount(8) (mount.nfs resolves the client address and
// negotiates the version), by argv. Unmounting goes through the Mounter.
#pragma once

#include <string>
#include <vector>

#include "common/exec.h"
#include "node/attach/attacher.h"

namespace pillar::node {

class NfsMounter {
 public:
  explicit NfsMounter(Exec& exec) : exec_(exec) {}

  // mount -t nfs4 [-o OPTS] ADDR:PATH STAGING
  static Command MountCommand(const RemoteTarget& t, const std::string& staging,
                              const std::vector<std::string>& options, bool read_only);
  Status Mount(const RemoteTarget& t, const std::string& staging,
               const std::vector<std::string>& options, bool read_only);

 private:
  Exec& exec_;
};

}  // namespace pillar::node
