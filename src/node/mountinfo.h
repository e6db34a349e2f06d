// /proc/self/mountinfo, parsed (by libmount): the only source of truth for
// "is this path mounted". stat(2) cannot answer it when the mount point
// itself fails with EACCES / ESTALE / ENOTCONN (seed 000), so nothing here
// touches the path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pillar::node {

struct MountEntry {
  int id = 0;
  int parent_id = 0;
  std::string major_minor;  // "259:1"
  std::string root;         // the subtree of the source that is mounted ("/" usually)
  std::string mount_point;  // unescaped
  std::string options;      // per-mount options ("rw,relatime")
  std::string fs_type;      // "ext4", "nfs4"
  std::string source;       // "/dev/nvme0n1", "10.0.0.1:/export", unescaped
  std::string super_options;
};

// Parses the whole text, with the kernel's octal escapes ("\040" space,
// "\011" tab, "\012" newline, "\134" backslash) undone; malformed lines are
// skipped, never fatal, so one odd entry cannot make a mounted path look
// unmounted to every caller. Total (never crashes, never throws) on any
// input: it is a fuzz target.
std::vector<MountEntry> ParseMountInfo(std::string_view text);

// The entry mounted last (the visible one) at exactly `path`, if any.
std::optional<MountEntry> FindMountAt(const std::vector<MountEntry>& mounts,
                                      const std::string& path);

// How many mounts are stacked at exactly `path`.
int CountMountsAt(const std::vector<MountEntry>& mounts, const std::string& path);

}  // namespace pillar::node
