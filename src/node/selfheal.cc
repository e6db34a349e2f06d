#include "node/selfheal.h"

#include "common/log.h"
#include "node/mountinfo.h"
#include "node/node_metrics.h"

namespace pillar::node {

bool SelfHealer::HealOne(const StageRecord& rec, const std::string& mountinfo) {
  if (rec.target.protocol == Protocol::kNfs) {
    if (FindMountAt(ParseMountInfo(mountinfo), rec.staging_path)) return false;
    log::Warn("self-heal: nfs staging mount is gone; mounting again",
              {{"volume", rec.volume_id}, {"staging", rec.staging_path}});
    Status s = nfs_.Mount(rec.target, rec.staging_path, rec.mount_flags, rec.read_only);
    NodeMetrics::Get().SelfHeal(s.ok() ? "nfs_remount" : "nfs_remount_failed");
    if (!s.ok())
      log::Warn("self-heal: nfs mount failed",
                {{"volume", rec.volume_id}, {"error", s.ToString()}});
    return true;
  }
  BlockAttacher* a = attachers_.For(rec.target.protocol);
  if (a == nullptr) return false;
  DeviceHealth h = a->Check(rec.target);
  if (h.problem.empty()) {
    if (!rec.block && !FindMountAt(ParseMountInfo(mountinfo), rec.staging_path)) {
      // Remounting under live bind mounts could mask which file system the
      // pod sees; report it and leave it to NodeStage's retry.
      log::Warn("self-heal: staging mount is gone",
                {{"volume", rec.volume_id}, {"staging", rec.staging_path}});
      NodeMetrics::Get().SelfHeal("staging_mount_lost");
    }
    return false;
  }
  log::Warn("self-heal: repairing", {{"volume", rec.volume_id}, {"problem", h.problem}});
  auto conn = connection_locks_.TryLock(rec.target.ConnectionKey());
  if (!conn) return false;
  Status s = a->Heal(rec.target);
  NodeMetrics::Get().SelfHeal(s.ok() ? "device_repair" : "device_repair_failed");
  if (!s.ok())
    log::Warn("self-heal: repair failed", {{"volume", rec.volume_id}, {"error", s.ToString()}});
  return true;
}

HealReport SelfHealer::RunOnce() {
  HealReport report;
  auto mountinfo = mounter_.ReadMountInfo();
  if (!mountinfo.ok()) {
    log::Warn("self-heal: cannot read mountinfo", {{"error", mountinfo.status().ToString()}});
    return report;
  }
  for (const auto& rec : records_.List()) {
    if (rec.state != "staged") continue;  // an interrupted stage is NodeStage's to finish
    ++report.checked;
    auto lock = volume_locks_.TryHeal(rec.volume_id);
    if (!lock) {
      ++report.skipped;
      continue;
    }
    if (HealOne(rec, *mountinfo)) {
      ++report.repaired;
    } else {
      ++report.healthy;
    }
  }
  return report;
}

}  // namespace pillar::node
