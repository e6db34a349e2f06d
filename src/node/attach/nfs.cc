#include "node/attach/nfs.h"

#include "common/log.h"
#include "common/validate.h"
#include "node/attach/sysfs_util.h"
#include "node/mounter.h"
#include "node/paths.h"

namespace pillar::node {

Command NfsMounter::MountCommand(const RemoteTarget& t, const std::string& staging,
                                 const std::vector<std::string>& options, bool read_only) {
  std::vector<std::string> opts = options;
  if (read_only) opts.push_back("ro");
  bool v6 = t.address.find(':') != std::string::npos;
  std::string source = (v6 ? "[" + t.address + "]" : t.address) + ":" + t.target_id;
  Command c;
  c.argv = {"mount", "-t", "nfs4"};
  if (t.port != 0 && t.port != 2049) opts.push_back("port=" + std::to_string(t.port));
  if (!opts.empty()) {
    std::string joined;
    for (const auto& o : opts) joined += (joined.empty() ? "" : ",") + o;
    c.argv.push_back("-o");
    c.argv.push_back(joined);
  }
  c.argv.push_back(source);
  c.argv.push_back(staging);
  c.timeout = std::chrono::seconds(120);
  return c;
}

Status NfsMounter::Mount(const RemoteTarget& t, const std::string& staging,
                         const std::vector<std::string>& options, bool read_only) {
  RETURN_IF_ERROR(validate::ExportPath("targetID", t.target_id));
  RETURN_IF_ERROR(validate::IpAddress("address", t.address));
  if (t.port != 0) RETURN_IF_ERROR(validate::Port("port", t.port));
  RETURN_IF_ERROR(ValidateCleanPath("staging_target_path", staging));
  RETURN_IF_ERROR(ValidateMountOptions(options));
  Command cmd = MountCommand(t, staging, options, read_only);
  log::Info("nfs mount", {{"source", cmd.argv[cmd.argv.size() - 2]}, {"target", staging}});
  auto r = exec_.Run(cmd);
  if (!r.ok()) return r.status();
  if (r->exit_code != 0) {
    std::string why = TrimSpace(r->err.empty() ? r->out : r->err);
    // mount.nfs exits 32 for "access denied by server": a missing export rule.
    return r->exit_code == 32 && why.find("denied") != std::string::npos
               ? Status(Code::kPermissionDenied,
                        "mount " + t.address + ":" + t.target_id + ": " + why)
               : Internal("mount " + t.address + ":" + t.target_id + " failed (exit " +
                          std::to_string(r->exit_code) + "): " + why);
  }
  return Status::Ok();
}

}  // namespace pillar::node
