#include "node/unmount.h"

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "node/mountinfo.h"

namespace pillar::node {
namespace {

bool DeadFilesystemErrno(int err) {
  return err == EIO || err == ESTALE || err == ENOTCONN || err == EACCES || err == EPERM;
}

std::string Err(int err) { return strerror(err); }

// One unmount of the top mount at path, escalating for a dead file system.
Status UnmountOnce(Mounter& m, const std::string& path) {
  int err = m.Unmount(path, UnmountMode::kNormal);
  if (err == 0 || err == EINVAL || err == ENOENT) return Status::Ok();
  if (err == EBUSY) {
    return FailedPrecondition("unmount " + path + ": busy (still in use); not detaching it");
  }
  if (!DeadFilesystemErrno(err)) return Internal("unmount " + path + ": " + Err(err));
  log::Warn("unmount failed on a dead file system; forcing", {{"path", path}, {"error", Err(err)}});
  int forced = m.Unmount(path, UnmountMode::kForce);
  if (forced == 0 || forced == EINVAL) return Status::Ok();
  log::Warn("forced unmount failed; detaching lazily", {{"path", path}, {"error", Err(forced)}});
  int lazy = m.Unmount(path, UnmountMode::kDetach);
  if (lazy == 0 || lazy == EINVAL) return Status::Ok();
  return Internal("unmount " + path + ": " + Err(err) + "; forced: " + Err(forced) +
                  "; lazy: " + Err(lazy));
}

}  // namespace

Status UnmountPath(Mounter& mounter, Fs& fs, const std::string& path, AfterUnmount after) {
  ASSIGN_OR_RETURN(std::string text, mounter.ReadMountInfo());
  int stacked = CountMountsAt(ParseMountInfo(text), path);
  PathStat st = mounter.Stat(path);
  if (stacked == 0 && st.err == ENOENT) return Status::Ok();
  if (stacked == 0 && st.err != 0) {
    // Not in our mountinfo, yet unusable: it may be mounted under a name this
    // namespace spells differently. umount2 settles it (EINVAL = not a mount).
    RETURN_IF_ERROR(UnmountOnce(mounter, path));
  }
  for (int i = 0; i < stacked; ++i) RETURN_IF_ERROR(UnmountOnce(mounter, path));
  ASSIGN_OR_RETURN(text, mounter.ReadMountInfo());
  if (CountMountsAt(ParseMountInfo(text), path) > 0) {
    return Internal("unmount " + path + ": still mounted after unmounting");
  }
  if (after == AfterUnmount::kKeep) return Status::Ok();
  st = mounter.Stat(path);
  if (st.err == ENOENT) return Status::Ok();
  // RemoveDir refuses a non-empty directory, so nothing but the empty mount
  // point can be deleted here.
  Status s = st.is_dir || st.err != 0 ? fs.RemoveDir(path) : fs.Unlink(path);
  if (!s.ok() && st.err != 0) s = fs.Unlink(path);
  return s.Annotate("remove mount point");
}

}  // namespace pillar::node
