// The nvmet configfs readers: every attribute and link target of one export
// comes from the input (one value per line), on a real directory tree shaped
// like /sys/kernel/config/nvmet. Whatever the kernel (or someone else)
// left there, Get and List give an error or a description of pillar's
// export, never a crash; the shared configfs helpers never accept a
// relative backing path.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "agent/exporters/configfs_util.h"
#include "agent/exporters/nvmet_exporter.h"
#include "common/fs.h"
#include "fuzz_temp_dir.h"
#include "fuzz_tree.h"

namespace {

namespace stdfs = std::filesystem;
using pillar::fuzz::Link;
using pillar::fuzz::Write;

constexpr char kVolume[] = "demo/pvc-1";

const std::string& Root() { return pillar::fuzz::TempDir("configfs"); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> v = pillar::fuzz::Lines(data, size, 10);
  for (const auto& value : v) {
    if (pillar::agent::configfs::BackingPath("device_path", value).ok() &&
        (value.empty() || value[0] != '/')) {
      std::abort();
    }
    (void)pillar::agent::configfs::CanonicalIp(value);
  }

  const std::string nvmet = Root() + "/nvmet";
  const std::string nqn = pillar::TargetName(pillar::kDefaultNqnPrefix, kVolume);
  const std::string subsys = nvmet + "/subsystems/" + nqn;
  const std::string port = nvmet + "/ports/1";
  stdfs::create_directories(subsys + "/namespaces/1");
  stdfs::create_directories(subsys + "/allowed_hosts");
  stdfs::create_directories(port + "/subsystems");
  stdfs::create_directories(nvmet + "/hosts");
  Write(subsys + "/attr_allow_any_host", v[0]);
  Write(subsys + "/namespaces/1/device_path", v[1]);
  Write(subsys + "/namespaces/1/enable", v[2]);
  Write(port + "/addr_trtype", v[3]);
  Write(port + "/addr_adrfam", v[4]);
  Write(port + "/addr_traddr", v[5]);
  Write(port + "/addr_trsvcid", v[6]);
  Write(port + "/param_inline_data_size", v[7]);
  Link("../../../../hosts/" + v[8], subsys + "/allowed_hosts/host-a");
  Link(v[9].empty() ? "../../../subsystems/" + nqn : v[9], port + "/subsystems/" + nqn);

  pillar::PosixFs fs;
  pillar::agent::NvmetExporter nvmet_exporter(fs, Root());
  auto got = nvmet_exporter.Get(kVolume);
  if (got.ok() && got->has_value()) {
    if ((*got)->target_id != nqn) std::abort();
    for (const auto& host : (*got)->allowed_hosts) {
      if (host.empty() || host.find('/') != std::string::npos) std::abort();
    }
  }
  auto list = nvmet_exporter.List();
  if (list.ok()) {
    for (const auto& e : *list) {
      if (e.agent_volume_id != kVolume) std::abort();  // the only subsystem there
    }
  }
  return 0;
}
