#include "node/attach/nvme.h"

#include "common/log.h"
#include "common/validate.h"
#include "node/attach/wait_for_device.h"

namespace pillar::node {
namespace {

constexpr std::chrono::seconds kConnectTimeout{30};
constexpr std::chrono::seconds kRescanTimeout{15};

Status ValidateTarget(const RemoteTarget& t) {
  RETURN_IF_ERROR(validate::Nqn("targetID", t.target_id));
  RETURN_IF_ERROR(validate::IpAddress("address", t.address));
  RETURN_IF_ERROR(validate::Port("port", t.port));
  if (t.nsid < 1 || t.nsid > 0xFFFFFFFE) return InvalidArgument("nsid must be 1..4294967294");
  return Status::Ok();
}

std::string Describe(const RemoteTarget& t) {
  return "namespace " + std::to_string(t.nsid) + " of subsystem " + t.target_id + " at " +
         t.address + ":" + std::to_string(t.port);
}

}  // namespace

StatusOr<std::string> NvmeAttacher::ConnectOptions(const RemoteTarget& t,
                                                   const std::string& host_nqn,
                                                   const std::string& host_id) {
  std::string out;
  auto add = [&](const char* key, const std::string& field, const std::string& value) -> Status {
    for (char c : value) {
      if (c == ',' || static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
        // The value itself is never shown: it may be a key.
        return InvalidArgument(field +
                               " holds a character (',', a space or a control character) "
                               "that the kernel's connect options cannot carry");
      }
    }
    if (value.empty()) return InvalidArgument(field + " is empty");
    out += (out.empty() ? "" : ",") + std::string(key) + "=" + value;
    return Status::Ok();
  };
  RETURN_IF_ERROR(add("transport", "transport", "tcp"));
  RETURN_IF_ERROR(add("traddr", "address", t.address));
  RETURN_IF_ERROR(add("trsvcid", "port", std::to_string(t.port)));
  RETURN_IF_ERROR(add("nqn", "targetID", t.target_id));
  RETURN_IF_ERROR(add("hostnqn", "host NQN", host_nqn));
  if (!host_id.empty()) RETURN_IF_ERROR(add("hostid", "host ID", host_id));
  const ConnectionTiming& timing = t.timing;
  if (timing.nvme_reconnect_delay) {
    RETURN_IF_ERROR(
        add("reconnect_delay", "nvmeReconnectDelay", std::to_string(*timing.nvme_reconnect_delay)));
  }
  if (timing.nvme_ctrl_loss_tmo) {
    RETURN_IF_ERROR(
        add("ctrl_loss_tmo", "nvmeCtrlLossTimeout", std::to_string(*timing.nvme_ctrl_loss_tmo)));
  }
  if (timing.nvme_keep_alive_tmo) {
    RETURN_IF_ERROR(
        add("keep_alive_tmo", "nvmeKeepAliveTimeout", std::to_string(*timing.nvme_keep_alive_tmo)));
  }
  // DH-HMAC-CHAP: the host's key, and the controller's for bidirectional.
  if (!t.credentials.secret.empty()) {
    RETURN_IF_ERROR(add("dhchap_secret", "secrets.dhchapKey", t.credentials.secret));
  }
  if (!t.credentials.mutual_secret.empty()) {
    RETURN_IF_ERROR(
        add("dhchap_ctrl_secret", "secrets.dhchapCtrlKey", t.credentials.mutual_secret));
  }
  return out;
}

NvmeAttacher::PathState NvmeAttacher::PathTo(const RemoteTarget& t, const NvmeSubsystem* sub) {
  if (sub == nullptr) return PathState::kNone;
  PathState best = PathState::kNone;
  for (const auto& c : sub->controllers) {
    if (c.transport != "tcp" || CanonicalIp(c.traddr) != CanonicalIp(t.address) ||
        c.trsvcid != std::to_string(t.port)) {
      continue;
    }
    if (c.state == "live") return PathState::kLive;
    // A controller that is reconnecting is still this host's path: connecting
    // again would only be refused as a duplicate.
    if (c.state == "connecting" || c.state == "resetting" || c.state == "new") {
      best = PathState::kPending;
    }
  }
  return best;
}

Status NvmeAttacher::CheckOneTarget(const RemoteTarget& t, const NvmeSubsystem& sub) {
  for (const auto& c : sub.controllers) {
    if (c.transport == "tcp" && CanonicalIp(c.traddr) == CanonicalIp(t.address) &&
        c.trsvcid == std::to_string(t.port)) {
      continue;
    }
    return FailedPrecondition("subsystem " + t.target_id + " is connected through " + c.name +
                              " to " + c.transport + " " + c.traddr + ":" + c.trsvcid +
                              ", not this volume's " + t.address + ":" + std::to_string(t.port) +
                              "; its namespaces belong to that connection: refusing them");
  }
  return Status::Ok();
}

void NvmeAttacher::LoadTransport() {
  if (fs_.Exists(transport_module_dir_)) return;
  auto r = exec_.Run({{"modprobe", "nvme-tcp"}, {}, kConnectTimeout});
  if (r.ok() && r->exit_code == 0) {
    log::Info("loaded the nvme-tcp module", {});
    return;
  }
  log::Warn("modprobe nvme-tcp failed",
            {{"error", r.ok() ? "exit " + std::to_string(r->exit_code) + ": " + TrimSpace(r->err)
                              : r.status().message()}});
}

Status NvmeAttacher::Connect(const RemoteTarget& t) {
  auto raw = fs_.ReadFile(host_nqn_file_);
  std::string host_nqn = raw.ok() ? TrimSpace(*raw) : "";
  if (host_nqn.empty()) {
    return FailedPrecondition("host NQN file " + host_nqn_file_ +
                              " is missing or empty; export ACLs are built from it");
  }
  RETURN_IF_ERROR(validate::Nqn("host NQN (" + host_nqn_file_ + ")", host_nqn));
  std::string host_id_file = host_nqn_file_.substr(0, host_nqn_file_.rfind('/') + 1) + "hostid";
  auto raw_id = fs_.ReadFile(host_id_file);
  std::string host_id = raw_id.ok() ? TrimSpace(*raw_id) : "";
  if (!host_id.empty()) RETURN_IF_ERROR(validate::Uuid("host ID (" + host_id_file + ")", host_id));
  ASSIGN_OR_RETURN(std::string options, ConnectOptions(t, host_nqn, host_id));
  LoadTransport();
  log::Info("nvme connect", {{"nqn", t.target_id},
                             {"address", t.address},
                             {"port", t.port},
                             {"dhchap", !t.credentials.secret.empty()}});
  auto r = fabrics_.Connect(options);
  if (r.ok()) return Status::Ok();
  // "already connected" races (another stage of a volume on this subsystem)
  // are settled by sysfs, not by the errno alone.
  auto sub = sysfs_.FindSubsystem(t.target_id);
  if (PathTo(t, sub ? &*sub : nullptr) != PathState::kNone) return Status::Ok();
  return Unavailable("nvme connect to " + t.target_id + " at " + t.address + ":" +
                     std::to_string(t.port) + " failed (" +
                     RedactSecrets(r.status().message(), t.credentials) + ")");
}

StatusOr<int> NvmeAttacher::RescanControllers(const NvmeSubsystem& sub) {
  int n = 0;
  std::string failures;
  for (const auto& c : sub.controllers) {
    if (c.state != "live") continue;
    Command cmd{{"nvme", "ns-rescan", "/dev/" + c.name}, {}, kRescanTimeout};
    auto r = exec_.Run(cmd);
    ++n;
    if (!r.ok() || r->exit_code != 0) {
      std::string why = r.ok() ? TrimSpace(r->err) : r.status().message();
      log::Warn("nvme ns-rescan failed", {{"controller", c.name}, {"error", why}});
      failures += (failures.empty() ? "" : "; ") + c.name + ": " + why;
    }
  }
  if (!failures.empty()) {
    return Internal("nvme ns-rescan on " + sub.nqn + " failed (" + failures + ")");
  }
  return n;
}

StatusOr<std::string> NvmeAttacher::Attach(const RemoteTarget& t) {
  RETURN_IF_ERROR(ValidateTarget(t));
  if (auto sub = sysfs_.FindSubsystem(t.target_id)) RETURN_IF_ERROR(CheckOneTarget(t, *sub));
  AttachSteps steps;
  steps.target = Describe(t);
  steps.rescan_name = "nvme ns-rescan";
  steps.connected = [&] {
    auto sub = sysfs_.FindSubsystem(t.target_id);
    return PathTo(t, sub ? &*sub : nullptr) != PathState::kNone;
  };
  steps.connect = [&] { return Connect(t); };
  steps.find_device = [&]() -> std::optional<std::string> {
    auto sub = sysfs_.FindSubsystem(t.target_id);
    if (!sub || !CheckOneTarget(t, *sub).ok()) return std::nullopt;
    if (auto dev = sysfs_.FindNamespaceDevice(t.target_id, t.nsid)) return "/dev/" + *dev;
    return std::nullopt;
  };
  steps.rescan = [&]() -> StatusOr<int> {
    auto sub = sysfs_.FindSubsystem(t.target_id);
    return sub ? RescanControllers(*sub) : 0;
  };
  steps.describe_connection = [&] {
    auto sub = sysfs_.FindSubsystem(t.target_id);
    return !sub ? std::string("the subsystem is not connected")
                : "the subsystem is connected through " + std::to_string(sub->controllers.size()) +
                      " controller(s)";
  };
  ASSIGN_OR_RETURN(std::string device, ConnectAndWaitForDevice(clock_, options_, steps));
  // Checked again now that the connect is done: another connection to the
  // same NQN may have appeared meanwhile.
  auto sub = sysfs_.FindSubsystem(t.target_id);
  if (!sub) return Unavailable("subsystem " + t.target_id + " went away during the attach");
  RETURN_IF_ERROR(CheckOneTarget(t, *sub));
  return device;
}

Status NvmeAttacher::Detach(const RemoteTarget& t) {
  RETURN_IF_ERROR(validate::Nqn("targetID", t.target_id));
  if (!sysfs_.FindSubsystem(t.target_id)) return Status::Ok();
  Command cmd{{"nvme", "disconnect", "-n", t.target_id}, {}, kConnectTimeout};
  log::Info("nvme disconnect", {{"nqn", t.target_id}});
  auto r = exec_.Run(cmd);
  if (r.ok() && r->exit_code == 0) return Status::Ok();
  if (!sysfs_.FindSubsystem(t.target_id)) return Status::Ok();
  return Internal("nvme disconnect -n " + t.target_id +
                  " failed: " + (r.ok() ? TrimSpace(r->err) : r.status().message()));
}

DeviceHealth NvmeAttacher::Check(const RemoteTarget& t) {
  DeviceHealth h;
  auto sub = sysfs_.FindSubsystem(t.target_id);
  PathState path = PathTo(t, sub ? &*sub : nullptr);
  h.connected = path == PathState::kLive;
  Status one_target = sub ? CheckOneTarget(t, *sub) : Status::Ok();
  if (one_target.ok()) {
    if (auto dev = sysfs_.FindNamespaceDevice(t.target_id, t.nsid)) h.device = "/dev/" + *dev;
  }
  if (!sub) {
    h.problem = "subsystem " + t.target_id + " is not connected";
  } else if (!one_target.ok()) {
    h.problem = one_target.message();
  } else if (path == PathState::kPending) {
    h.problem = "controller to " + t.address + ":" + std::to_string(t.port) + " is reconnecting";
  } else if (path == PathState::kNone) {
    h.problem = "no controller to " + t.address + ":" + std::to_string(t.port);
  } else if (h.device.empty()) {
    h.problem = "no block device for " + Describe(t);
  }
  return h;
}

Status NvmeAttacher::Heal(const RemoteTarget& t) {
  RETURN_IF_ERROR(ValidateTarget(t));
  auto sub = sysfs_.FindSubsystem(t.target_id);
  PathState path = PathTo(t, sub ? &*sub : nullptr);
  if (path == PathState::kNone) return Connect(t);
  if (path == PathState::kLive && !sysfs_.FindNamespaceDevice(t.target_id, t.nsid)) {
    // Best effort (failures are logged): a device still missing is the next
    // heal's or stage's to see.
    (void)RescanControllers(*sub);
  }
  return Status::Ok();
}

Status NvmeAttacher::Rescan(const RemoteTarget& t) {
  auto sub = sysfs_.FindSubsystem(t.target_id);
  if (!sub) return FailedPrecondition("subsystem " + t.target_id + " is not connected");
  // As the iSCSI rescan: a failed ns-rescan (logged) is not "not connected";
  // the device wait that follows says whether the namespace came.
  (void)RescanControllers(*sub);
  return Status::Ok();
}

}  // namespace pillar::node
