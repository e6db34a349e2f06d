// The LIO configfs readers: every attribute, directory name and link target
// of one iSCSI export comes from the input (one value per line), on a real
// directory tree shaped like /sys/kernel/config/target. Whatever the kernel
// or someone else left there, Get and List give an error or a description of
// pillar's export (its own IQN, initiators that are plain names, a portal
// that parsed to a canonical address), never a crash.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/exporters/configfs_util.h"
#include "agent/exporters/lio_exporter.h"
#include "common/fs.h"
#include "fuzz_temp_dir.h"
#include "fuzz_tree.h"

namespace {

namespace stdfs = std::filesystem;
using pillar::fuzz::Link;
using pillar::fuzz::Write;

constexpr char kVolume[] = "demo/pvc-1";

const std::string& Root() { return pillar::fuzz::TempDir("lio-configfs"); }

// A directory entry name from the input, or `fallback` when it cannot be one.
std::string Name(const std::string& v, const char* fallback) {
  if (v.empty() || v == "." || v == ".." || v.size() > 200 ||
      v.find_first_of(std::string("/\0", 2)) != std::string::npos) {
    return fallback;
  }
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> v = pillar::fuzz::Lines(data, size, 15);

  // A fresh tree each run: names from the input change the shape.
  const std::string target = Root() + "/target";
  std::error_code ec;
  stdfs::remove_all(target, ec);
  const std::string iqn = pillar::TargetName(pillar::kDefaultIqnPrefix, kVolume);
  const std::string backstore =
      target + "/core/" + pillar::agent::LioExporter::kHba + "/" +
      pillar::TargetName(pillar::agent::LioExporter::kBackstorePrefix, kVolume);
  const std::string tpg = target + "/iscsi/" + iqn + "/tpgt_1";
  const std::string initiator = Name(v[6], "iqn.2026-12.example:node-a");
  const std::string mapped = Name(v[7], "lun_0");
  const std::string acl = tpg + "/acls/" + initiator;
  stdfs::create_directories(backstore);
  stdfs::create_directories(tpg + "/attrib");
  stdfs::create_directories(tpg + "/lun/lun_0");
  stdfs::create_directories(tpg + "/np/" + Name(v[5], "10.0.0.1:3260"));
  stdfs::create_directories(acl + "/" + mapped);
  stdfs::create_directories(acl + "/auth");
  Write(tpg + "/attrib/generate_node_acls", v[0]);
  Write(tpg + "/attrib/authentication", v[1]);
  Write(tpg + "/attrib/demo_mode_write_protect", v[2]);
  Write(backstore + "/udev_path", v[3]);
  Write(backstore + "/enable", v[4]);
  Link(v[8].empty() ? "../../../../../core/" + std::string(pillar::agent::LioExporter::kHba) + "/" +
                          stdfs::path(backstore).filename().string()
                    : v[8],
       tpg + "/lun/lun_0/device");
  Link(v[9].empty() ? "../../../lun/lun_0" : v[9], acl + "/" + mapped + "/lun");
  Write(acl + "/" + mapped + "/write_protect", v[10]);
  Write(acl + "/auth/userid", v[11]);
  Write(acl + "/auth/password", v[12]);
  Write(acl + "/auth/userid_mutual", v[13]);
  Write(tpg + "/enable", v[14]);

  pillar::PosixFs fs;
  pillar::agent::LioExporter lio(fs, Root());
  auto got = lio.Get(kVolume);
  if (got.ok() && got->has_value()) {
    const auto& e = **got;
    if (e.target_id != iqn || e.agent_volume_id != kVolume) std::abort();
    for (const auto& host : e.allowed_hosts) {
      if (host.empty() || host.find('/') != std::string::npos) std::abort();
    }
    if (!e.params.bind_address.empty() &&
        pillar::agent::configfs::CanonicalIp(e.params.bind_address) != e.params.bind_address) {
      std::abort();  // a portal is reported only as a canonical address
    }
    if (e.params.port < 0 || e.params.port > 99999) std::abort();
  }
  auto list = lio.List();
  if (list.ok()) {
    for (const auto& e : *list) {
      if (e.agent_volume_id != kVolume) std::abort();  // the only target there
    }
  }
  return 0;
}
