#include "node/mountinfo.h"

#include <libmount/libmount.h>
#include <sys/sysmacros.h>

#include <cstdio>
#include <memory>

namespace pillar::node {
namespace {

// A line of mountinfo starts with two numbers (mount id, parent id). libmount
// guesses the table's format from its first line, so a first line that is
// not mountinfo would make it read the whole text as fstab.
bool StartsWithTwoNumbers(std::string_view line) {
  size_t i = 0;
  for (int n = 0; n < 2; ++n) {
    while (i < line.size() && line[i] == ' ') ++i;
    size_t start = i;
    while (i < line.size() && line[i] >= '0' && line[i] <= '9') ++i;
    if (i == start || (i < line.size() && line[i] != ' ')) return false;
  }
  return true;
}

std::string OrEmpty(const char* s) { return s == nullptr ? std::string() : std::string(s); }

// A line libmount cannot parse is skipped; the others are still read.
int SkipLine(libmnt_table* /*tb*/, const char* /*filename*/, int /*line*/) { return 1; }

struct TableFree {
  void operator()(libmnt_table* t) const { mnt_unref_table(t); }
};
struct IterFree {
  void operator()(libmnt_iter* i) const { mnt_free_iter(i); }
};
struct FileClose {
  void operator()(FILE* f) const { std::fclose(f); }
};

}  // namespace

std::vector<MountEntry> ParseMountInfo(std::string_view text) {
  std::vector<MountEntry> out;
  // libmount reads lines from a stream: skip what comes before the first
  // mountinfo line, and hand it the rest (a NUL would end its line early,
  // as it would end the kernel's).
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    if (StartsWithTwoNumbers(line)) break;
    pos = end == std::string_view::npos ? text.size() : end + 1;
  }
  std::string rest(text.substr(pos));
  if (rest.empty()) return out;
  std::unique_ptr<libmnt_table, TableFree> table(mnt_new_table());
  std::unique_ptr<libmnt_iter, IterFree> iter(mnt_new_iter(MNT_ITER_FORWARD));
  std::unique_ptr<FILE, FileClose> stream(fmemopen(rest.data(), rest.size(), "r"));
  if (!table || !iter || !stream) return out;
  mnt_table_set_parser_errcb(table.get(), SkipLine);
  if (mnt_table_parse_stream(table.get(), stream.get(), "mountinfo") < 0) return out;
  libmnt_fs* fs = nullptr;
  while (mnt_table_next_fs(table.get(), iter.get(), &fs) == 0) {
    MountEntry e;
    e.id = mnt_fs_get_id(fs);
    e.parent_id = mnt_fs_get_parent_id(fs);
    dev_t dev = mnt_fs_get_devno(fs);
    e.major_minor = std::to_string(major(dev)) + ":" + std::to_string(minor(dev));
    e.root = OrEmpty(mnt_fs_get_root(fs));
    e.mount_point = OrEmpty(mnt_fs_get_target(fs));
    e.options = OrEmpty(mnt_fs_get_vfs_options(fs));
    e.fs_type = OrEmpty(mnt_fs_get_fstype(fs));
    e.source = OrEmpty(mnt_fs_get_source(fs));
    e.super_options = OrEmpty(mnt_fs_get_fs_options(fs));
    // An entry without a mount point or type is no mount.
    if (e.mount_point.empty() || e.fs_type.empty()) continue;
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<MountEntry> FindMountAt(const std::vector<MountEntry>& mounts,
                                      const std::string& path) {
  std::optional<MountEntry> found;
  for (const auto& m : mounts) {
    if (m.mount_point == path) found = m;  // later lines are mounted on top
  }
  return found;
}

int CountMountsAt(const std::vector<MountEntry>& mounts, const std::string& path) {
  int n = 0;
  for (const auto& m : mounts) n += m.mount_point == path ? 1 : 0;
  return n;
}

}  // namespace pillar::node
