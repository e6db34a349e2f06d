#include "node/node_core.h"

#include <cerrno>
#include <charconv>
#include <cstring>

#include "common/credentials.h"
#include "common/log.h"
#include "common/protocol.h"
#include "common/validate.h"
#include "common/volume_context.h"
#include "node/attach/sysfs_util.h"
#include "node/mountinfo.h"
#include "node/paths.h"
#include "node/unmount.h"

namespace pillar::node {
namespace {

constexpr const char* kAttaching = "attaching";
constexpr const char* kStaged = "staged";

Status RequireVolumeId(const std::string& volume_id) {
  if (volume_id.empty()) return InvalidArgument("volume_id is required");
  return validate::ObjectName("volume_id", volume_id);
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

bool AbnormalErrno(int err) {
  return err == EACCES || err == EPERM || err == EIO || err == ESTALE || err == ENOTCONN ||
         err == ENODEV || err == ENXIO;
}

}  // namespace

StatusOr<RemoteTarget> ParseTarget(const Context& ctx) {
  ASSIGN_OR_RETURN(VolumeContext c, ParseVolumeContext(ctx));
  RemoteTarget t;
  t.protocol = c.protocol;
  t.target_id = std::move(c.target_id);
  t.address = std::move(c.address);
  t.port = c.port;
  t.timing = c.timing;
  return t;
}

StatusOr<std::vector<std::string>> NodeCore::MountsOfDevice(const std::string& device) {
  ASSIGN_OR_RETURN(std::string text, d_.mounter.ReadMountInfo());
  std::vector<std::string> out;
  std::string node = "/" + Basename(device);
  for (const auto& m : ParseMountInfo(text)) {
    if (m.source == device || (m.fs_type == "devtmpfs" && m.root == node)) {
      out.push_back(m.mount_point);
    }
  }
  return out;
}

StatusOr<bool> NodeCore::StagedAndHealthy(const StageRecord& rec) {
  if (rec.state != kStaged) return false;
  if (rec.target.protocol != Protocol::kNfs) {
    BlockAttacher* a = d_.attachers.For(rec.target.protocol);
    if (a == nullptr || a->Check(rec.target).device.empty()) return false;
    if (rec.block) return true;
  }
  ASSIGN_OR_RETURN(std::string text, d_.mounter.ReadMountInfo());
  return FindMountAt(ParseMountInfo(text), rec.staging_path).has_value();
}

Status NodeCore::Stage(const StageRequest& req) {
  RETURN_IF_ERROR(RequireVolumeId(req.volume_id));
  RETURN_IF_ERROR(ValidateCleanPath("staging_target_path", req.staging_path));
  RETURN_IF_ERROR(ValidateMountOptions(req.mount_flags));
  ASSIGN_OR_RETURN(RemoteTarget t, ParseTarget(req.context));
  ASSIGN_OR_RETURN(VolumeContext context, ParseVolumeContext(req.context));
  if (context.auth == kAuthChap) {
    ASSIGN_OR_RETURN(t.credentials, CredentialsFromSecrets(t.protocol, req.secrets, "secrets"));
  }
  if (t.protocol == Protocol::kNfs && req.block) {
    return InvalidArgument("volume_capability: block access is not possible over nfs");
  }
  std::string fs_type = req.fs_type.empty() ? context.fs_type : req.fs_type;
  if (!req.block && t.protocol != Protocol::kNfs && !fs_type.empty() && !SupportedFsType(fs_type)) {
    return InvalidArgument("fsType \"" + fs_type + "\" is not supported (ext4, ext3, xfs)");
  }
  ASSIGN_OR_RETURN(auto lock, d_.volume_locks.Call(req.volume_id));
  StageRequest effective = req;
  effective.fs_type = fs_type;
  return StageLocked(effective, t);
}

Status NodeCore::StageLocked(const StageRequest& req, const RemoteTarget& t) {
  auto existing = d_.records.Get(req.volume_id);
  if (!existing.ok() && existing.status().code() != Code::kNotFound) return existing.status();
  if (existing.ok()) {
    if (existing->staging_path != req.staging_path) {
      return AlreadyExists("volume " + req.volume_id + " is already staged at " +
                           existing->staging_path);
    }
    if (existing->target.ConnectionKey() != t.ConnectionKey() || existing->block != req.block) {
      return AlreadyExists("volume " + req.volume_id +
                           " is already staged with a different target or access type");
    }
    ASSIGN_OR_RETURN(bool healthy, StagedAndHealthy(*existing));
    if (healthy) return Status::Ok();
  }

  // A target is one volume's: a target another staged volume uses is not
  // this volume's, whatever its context claims.
  for (const auto& other : d_.records.List()) {
    if (other.volume_id != req.volume_id && other.target.protocol == t.protocol &&
        other.target.target_id == t.target_id) {
      return FailedPrecondition("target " + t.target_id + " is staged for volume " +
                                other.volume_id + " on this node; refusing it for volume " +
                                req.volume_id);
    }
  }

  StageRecord rec;
  rec.volume_id = req.volume_id;
  rec.staging_path = req.staging_path;
  rec.target = t;
  rec.block = req.block;
  rec.fs_type = t.protocol == Protocol::kNfs ? "nfs4" : req.fs_type;
  rec.mount_flags = req.mount_flags;
  rec.read_only = req.read_only;
  rec.state = kAttaching;
  if (existing.ok()) rec.device = existing->device;
  // Recorded before any connect: a crash from here on still leaves NodeUnstage
  // what it needs to clean up.
  RETURN_IF_ERROR(d_.records.Put(rec));

  ASSIGN_OR_RETURN(std::string text, d_.mounter.ReadMountInfo());
  auto mounted = FindMountAt(ParseMountInfo(text), req.staging_path);

  if (t.protocol == Protocol::kNfs) {
    if (!mounted) {
      RETURN_IF_ERROR(d_.fs.MakeDirs(req.staging_path));
      RETURN_IF_ERROR(d_.nfs.Mount(t, req.staging_path, req.mount_flags, req.read_only));
    } else if (mounted->fs_type.rfind("nfs", 0) != 0) {
      return FailedPrecondition("staging path " + req.staging_path + " already has a " +
                                mounted->fs_type + " mount of " + mounted->source);
    }
  } else {
    BlockAttacher* attacher = d_.attachers.For(t.protocol);
    if (attacher == nullptr)
      return Unimplemented(std::string("no attacher for ") + ProtocolName(t.protocol));
    std::string device;
    {
      auto conn = d_.connection_locks.Lock(t.ConnectionKey());
      ASSIGN_OR_RETURN(device, attacher->Attach(t));
    }
    for (const auto& other : d_.records.List()) {
      if (other.volume_id != req.volume_id && other.device == device) {
        return FailedPrecondition(device + " is volume " + other.volume_id +
                                  "'s device on this node; refusing it for volume " +
                                  req.volume_id);
      }
    }
    rec.device = device;
    RETURN_IF_ERROR(d_.records.Put(rec));
    if (!req.block) {
      if (mounted) {
        if (mounted->source != device) {
          return FailedPrecondition("staging path " + req.staging_path + " already has " +
                                    mounted->source + " mounted, not " + device);
        }
        if (rec.fs_type.empty()) rec.fs_type = mounted->fs_type;
      } else {
        std::string fs_type;
        if (req.read_only) {
          // A read-only stage can mount what is there, never create it.
          ASSIGN_OR_RETURN(ProbeResult probe, d_.formatter.Probe(device));
          if (probe.kind != ProbeResult::Kind::kFilesystem) {
            return FailedPrecondition(device + " has no file system to mount read-only");
          }
          if (!req.fs_type.empty() && probe.type != req.fs_type) {
            return FailedPrecondition(device + " holds a " + probe.type + " file system, not " +
                                      req.fs_type);
          }
          fs_type = probe.type;
        } else {
          ASSIGN_OR_RETURN(fs_type, d_.formatter.EnsureFilesystem(device, req.fs_type));
        }
        RETURN_IF_ERROR(d_.fs.MakeDirs(req.staging_path));
        MountSpec spec{device, req.staging_path, fs_type, req.mount_flags, false, req.read_only};
        RETURN_IF_ERROR(d_.mounter.Mount(spec));
        rec.fs_type = fs_type;
      }
    }
  }
  rec.state = kStaged;
  RETURN_IF_ERROR(d_.records.Put(rec));
  log::Info("volume staged", {{"volume", rec.volume_id},
                              {"protocol", ProtocolName(t.protocol)},
                              {"device", rec.device},
                              {"staging", rec.staging_path},
                              {"fsType", rec.fs_type}});
  return Status::Ok();
}

Status NodeCore::DetachIfLastUser(const StageRecord& rec) {
  BlockAttacher* attacher = d_.attachers.For(rec.target.protocol);
  if (attacher == nullptr) return Status::Ok();
  auto conn = d_.connection_locks.Lock(rec.target.ConnectionKey());
  std::vector<std::string> others;
  for (const auto& r : d_.records.List()) {
    if (r.volume_id != rec.volume_id && r.target.ConnectionKey() == rec.target.ConnectionKey()) {
      others.push_back(r.volume_id);
    }
  }
  if (!others.empty()) {
    log::Info("connection kept: other staged volumes use it",
              {{"volume", rec.volume_id}, {"target", rec.target.target_id}, {"users", others}});
    return Status::Ok();
  }
  return attacher->Detach(rec.target);
}

Status NodeCore::Unstage(const std::string& volume_id, const std::string& staging_path) {
  RETURN_IF_ERROR(RequireVolumeId(volume_id));
  RETURN_IF_ERROR(ValidateCleanPath("staging_target_path", staging_path));
  ASSIGN_OR_RETURN(auto lock, d_.volume_locks.Call(volume_id));
  auto rec = d_.records.Get(volume_id);
  if (!rec.ok() && rec.status().code() != Code::kNotFound) return rec.status();
  RETURN_IF_ERROR(UnmountPath(d_.mounter, d_.fs, staging_path, AfterUnmount::kKeep));
  if (!rec.ok()) return Status::Ok();  // nothing staged (or already unstaged)
  if (rec->staging_path != staging_path) {
    log::Warn("unstage path differs from the staged one",
              {{"volume", volume_id}, {"staged", rec->staging_path}, {"asked", staging_path}});
    RETURN_IF_ERROR(UnmountPath(d_.mounter, d_.fs, rec->staging_path, AfterUnmount::kKeep));
  }
  if (!rec->device.empty()) {
    // Never disconnect a device something still has mounted (a publish the CO
    // forgot): that would turn a leak into I/O errors under a live mount.
    ASSIGN_OR_RETURN(auto users, MountsOfDevice(rec->device));
    if (!users.empty()) {
      return FailedPrecondition("volume " + volume_id + ": " + rec->device +
                                " is still mounted at " + users.front());
    }
  }
  RETURN_IF_ERROR(DetachIfLastUser(*rec));
  RETURN_IF_ERROR(d_.records.Delete(volume_id));
  log::Info("volume unstaged", {{"volume", volume_id}, {"staging", staging_path}});
  return Status::Ok();
}

Status NodeCore::Publish(const PublishRequest& req) {
  RETURN_IF_ERROR(RequireVolumeId(req.volume_id));
  RETURN_IF_ERROR(ValidateCleanPath("staging_target_path", req.staging_path));
  RETURN_IF_ERROR(ValidateCleanPath("target_path", req.target_path));
  RETURN_IF_ERROR(ValidateMountOptions(req.mount_flags));
  ASSIGN_OR_RETURN(auto lock, d_.volume_locks.Call(req.volume_id));
  auto rec = d_.records.Get(req.volume_id);
  if (!rec.ok()) {
    if (rec.status().code() == Code::kNotFound) {
      return FailedPrecondition("volume " + req.volume_id +
                                " is not staged on this node (NodeStageVolume first)");
    }
    return rec.status();
  }
  if (rec->state != kStaged) {
    return FailedPrecondition("volume " + req.volume_id + " is still being staged");
  }
  if (rec->staging_path != req.staging_path) {
    return FailedPrecondition("volume " + req.volume_id + " is staged at " + rec->staging_path +
                              ", not " + req.staging_path);
  }
  if (rec->block != req.block) {
    return InvalidArgument(std::string("volume_capability: the volume is staged for ") +
                           (rec->block ? "block" : "mount") + " access");
  }
  ASSIGN_OR_RETURN(std::string text, d_.mounter.ReadMountInfo());
  if (FindMountAt(ParseMountInfo(text), req.target_path)) return Status::Ok();

  MountSpec spec;
  spec.target = req.target_path;
  spec.bind = true;
  spec.read_only = req.read_only || rec->read_only;
  spec.options = req.mount_flags;
  if (req.block) {
    BlockAttacher* a = d_.attachers.For(rec->target.protocol);
    std::string device = a != nullptr ? a->Check(rec->target).device : "";
    if (device.empty()) {
      return Unavailable("volume " + req.volume_id + ": its block device is gone (" + rec->device +
                         "); self-healing is reconnecting");
    }
    RETURN_IF_ERROR(d_.fs.MakeDirs(ParentDir(req.target_path)));
    if (!d_.fs.Exists(req.target_path)) RETURN_IF_ERROR(d_.fs.WriteFile(req.target_path, ""));
    spec.source = device;
  } else {
    RETURN_IF_ERROR(d_.fs.MakeDirs(req.target_path));
    spec.source = req.staging_path;
  }
  RETURN_IF_ERROR(d_.mounter.Mount(spec));
  log::Info("volume published",
            {{"volume", req.volume_id}, {"target", req.target_path}, {"readOnly", spec.read_only}});
  return Status::Ok();
}

Status NodeCore::Unpublish(const std::string& volume_id, const std::string& target_path) {
  RETURN_IF_ERROR(RequireVolumeId(volume_id));
  RETURN_IF_ERROR(ValidateCleanPath("target_path", target_path));
  ASSIGN_OR_RETURN(auto lock, d_.volume_locks.Call(volume_id));
  RETURN_IF_ERROR(UnmountPath(d_.mounter, d_.fs, target_path, AfterUnmount::kRemove));
  log::Info("volume unpublished", {{"volume", volume_id}, {"target", target_path}});
  return Status::Ok();
}

StatusOr<VolumeStats> NodeCore::Stats(const std::string& volume_id,
                                      const std::string& volume_path) {
  RETURN_IF_ERROR(RequireVolumeId(volume_id));
  ASSIGN_OR_RETURN(StageRecord rec, d_.records.Get(volume_id));
  // A path where this volume is neither staged nor published (not even a
  // clean absolute path, or no mount there) is NOT_FOUND, as CSI says: never
  // the statistics of whatever file system holds that path.
  ASSIGN_OR_RETURN(std::string mountinfo, d_.mounter.ReadMountInfo());
  auto mounts = ParseMountInfo(mountinfo);
  if (!ValidateCleanPath("volume_path", volume_path).ok() ||
      (volume_path != rec.staging_path && !FindMountAt(mounts, volume_path))) {
    return NotFound("volume " + volume_id + " is not staged or published at volume_path " +
                    volume_path);
  }
  VolumeStats out;
  out.block = rec.block;
  std::vector<std::string> problems;
  if (rec.target.protocol != Protocol::kNfs) {
    BlockAttacher* a = d_.attachers.For(rec.target.protocol);
    DeviceHealth h = a != nullptr ? a->Check(rec.target) : DeviceHealth{};
    if (!h.problem.empty()) problems.push_back(h.problem);
    if (rec.block && !h.device.empty()) {
      if (auto size = BlockDeviceSizeBytes(d_.fs, d_.sysfs_root, Basename(h.device))) {
        out.has_usage = true;
        out.total_bytes = *size;
      }
    }
  }
  if (!rec.block) {
    VfsStat vfs = d_.mounter.StatVfs(volume_path);
    if (vfs.err == ENOENT && !FindMountAt(mounts, volume_path)) {
      return NotFound("volume_path " + volume_path + " does not exist");
    }
    if (vfs.err != 0) {
      // The seed-000 case: the mount answers EACCES/ESTALE; that is a volume
      // condition for the CO to show, not an RPC failure.
      problems.push_back("statvfs " + volume_path + ": " + strerror(vfs.err));
      if (!AbnormalErrno(vfs.err)) {
        log::Warn("unexpected statvfs error", {{"path", volume_path}, {"errno", vfs.err}});
      }
    } else {
      out.has_usage = true;
      out.total_bytes = vfs.total_bytes;
      out.available_bytes = vfs.available_bytes;
      out.used_bytes = vfs.used_bytes;
      out.total_inodes = vfs.total_inodes;
      out.free_inodes = vfs.free_inodes;
      out.used_inodes = vfs.used_inodes;
    }
    if (!FindMountAt(mounts, rec.staging_path)) {
      problems.push_back("staging path " + rec.staging_path + " is not mounted");
    }
  }
  out.abnormal = !problems.empty();
  for (const auto& p : problems) out.message += (out.message.empty() ? "" : "; ") + p;
  if (!out.abnormal) out.message = "volume is healthy";
  return out;
}

StatusOr<int64_t> NodeCore::Expand(const std::string& volume_id, const std::string& volume_path,
                                   int64_t required_bytes) {
  RETURN_IF_ERROR(RequireVolumeId(volume_id));
  ASSIGN_OR_RETURN(auto lock, d_.volume_locks.Call(volume_id));
  ASSIGN_OR_RETURN(StageRecord rec, d_.records.Get(volume_id));  // NOT_FOUND first, as CSI says
  RETURN_IF_ERROR(ValidateCleanPath("volume_path", volume_path));
  if (rec.target.protocol == Protocol::kNfs) return int64_t{0};  // the server's quota is the size
  BlockAttacher* a = d_.attachers.For(rec.target.protocol);
  if (a == nullptr)
    return Unimplemented(std::string("no attacher for ") + ProtocolName(rec.target.protocol));
  RETURN_IF_ERROR(a->Rescan(rec.target));
  std::string device = a->Check(rec.target).device;
  if (device.empty()) return Unavailable("volume " + volume_id + ": block device is gone");
  auto size = BlockDeviceSizeBytes(d_.fs, d_.sysfs_root, Basename(device));
  if (!size) return Internal("cannot read the size of " + device);
  if (required_bytes > 0 && *size < required_bytes) {
    return Unavailable(device + " is " + std::to_string(*size) + " bytes, less than the " +
                       std::to_string(required_bytes) + " required: the target has not grown yet");
  }
  if (!rec.block) RETURN_IF_ERROR(d_.formatter.Grow(device, rec.fs_type, rec.staging_path));
  log::Info("volume expanded", {{"volume", volume_id}, {"bytes", *size}});
  return *size;
}

}  // namespace pillar::node
