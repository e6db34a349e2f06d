// Unmounting a publish or staging path the way seed 000 demands: "mounted"
// comes from mountinfo, never from stat alone; a path whose stat fails
// (EACCES, EIO, ESTALE, ENOTCONN) is still unmounted; "not mounted and not
// there" is success.
#pragma once

#include <string>

#include "common/fs.h"
#include "node/mounter.h"

namespace pillar::node {

enum class AfterUnmount { kKeep, kRemove };

// Unmounts every mount stacked at `path`, escalating to MNT_FORCE and then
// MNT_DETACH only when the plain unmount fails because the file system is
// dead (EIO, ESTALE, ENOTCONN, EACCES); a busy mount (EBUSY) is an error,
// never detached. With kRemove, the (empty) mount point is removed after.
Status UnmountPath(Mounter& mounter, Fs& fs, const std::string& path, AfterUnmount after);

}  // namespace pillar::node
