// Fakes for the node plugin's OS interfaces, and builders of sysfs trees laid
// out the way the kernel lays them out (symlinks included), so the real
// sysfs readers run unchanged on a temporary directory.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/fake_exec.h"
#include "node/attach/nvme_fabrics.h"
#include "node/format.h"
#include "node/mounter.h"

namespace pillar::node::testing {

// The kernel's NVMe-oF connect device as the node tests see it: each write
// is recorded in the FakeExec's call list as "nvme-fabrics <options>" (one
// list then shows the order of everything the node did) and answered by the
// FakeExec's handler for {"nvme-fabrics"}: exit 0 connects, anything else
// fails the write with `err` as the errno's text.
class ExecFabrics : public Fabrics {
 public:
  explicit ExecFabrics(pillar::testing::FakeExec& exec) : exec_(exec) {}
  StatusOr<std::string> Connect(const std::string& options) override {
    auto r = exec_.Run(Command{{"nvme-fabrics", options}, {}, {}});
    if (!r.ok()) return r.status();
    if (r->exit_code != 0) return Unavailable("write to /dev/nvme-fabrics: " + r->err);
    return std::string("instance=0,cntlid=1");
  }

 private:
  pillar::testing::FakeExec& exec_;
};

// Claims of fake devices: granted unless the device is listed as busy;
// `on_claim` runs while a claim is held (to change the device under it).
class FakeDeviceClaimer : public DeviceClaimer {
 public:
  StatusOr<std::unique_ptr<Claim>> ClaimExclusive(const std::string& device) override {
    claimed.push_back(device);
    if (busy.count(device) != 0) return FailedPrecondition(device + " is in use");
    if (on_claim) on_claim(device);
    return std::unique_ptr<Claim>(std::make_unique<Claim>());
  }
  std::set<std::string> busy;
  std::vector<std::string> claimed;
  std::function<void(const std::string&)> on_claim;
};

// Steady time moves only when someone sleeps, so deadline loops are exact.
class FakeClock : public Clock {
 public:
  std::chrono::system_clock::time_point Now() override {
    return std::chrono::system_clock::time_point(elapsed_);
  }
  std::chrono::steady_clock::time_point SteadyNow() override {
    return std::chrono::steady_clock::time_point(elapsed_);
  }
  void SleepFor(std::chrono::milliseconds d) override { elapsed_ += d; }
  std::chrono::milliseconds elapsed() const { return elapsed_; }

 private:
  std::chrono::milliseconds elapsed_{0};
};

inline void WriteText(const std::string& path, const std::string& content) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << content;
}

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void Link(const std::string& target, const std::string& link) {
  std::filesystem::create_directories(std::filesystem::path(link).parent_path());
  std::filesystem::remove(link);  // re-adding after a removal replaces the link
  std::filesystem::create_directory_symlink(target, link);
}

// /sys as the kernel (6.1, native NVMe multipath) shows an NVMe-oF/TCP host.
class NvmeSysfsBuilder {
 public:
  explicit NvmeSysfsBuilder(std::string root) : root_(std::move(root)) {}

  void AddSubsystem(int n, const std::string& nqn) {
    std::string dir = root_ + "/devices/virtual/nvme-subsystem/nvme-subsys" + std::to_string(n);
    WriteText(dir + "/subsysnqn", nqn + "\n");
    WriteText(dir + "/subsystype", "nvm\n");
    WriteText(dir + "/iopolicy", "numa\n");
    Link("../../devices/virtual/nvme-subsystem/nvme-subsys" + std::to_string(n),
         root_ + "/class/nvme-subsystem/nvme-subsys" + std::to_string(n));
  }

  void AddController(int subsys, int ctrl, const std::string& nqn, const std::string& traddr,
                     int port, const std::string& state = "live") {
    std::string name = "nvme" + std::to_string(ctrl);
    std::string dir = root_ + "/devices/virtual/nvme-fabrics/ctl/" + name;
    WriteText(dir + "/subsysnqn", nqn + "\n");
    WriteText(dir + "/transport", "tcp\n");
    WriteText(dir + "/address",
              "traddr=" + traddr + ",trsvcid=" + std::to_string(port) + ",src_addr=192.0.2.2\n");
    WriteText(dir + "/state", state + "\n");
    WriteText(dir + "/cntlid", "1\n");
    WriteText(dir + "/dev", "243:" + std::to_string(ctrl) + "\n");
    Link("../../devices/virtual/nvme-fabrics/ctl/" + name, root_ + "/class/nvme/" + name);
    Link("../../nvme-fabrics/ctl/" + name, root_ + "/devices/virtual/nvme-subsystem/nvme-subsys" +
                                               std::to_string(subsys) + "/" + name);
  }

  void SetControllerState(int ctrl, const std::string& state) {
    WriteText(root_ + "/devices/virtual/nvme-fabrics/ctl/nvme" + std::to_string(ctrl) + "/state",
              state + "\n");
  }

  // The multipath head nvme<subsys>n<instance> carrying `nsid`, and the hidden
  // per-path node nvme<subsys>c<ctrl>n<instance> under the controller.
  void AddNamespace(int subsys, int instance, int ctrl, int64_t nsid, int64_t sectors = 2097152) {
    std::string head = "nvme" + std::to_string(subsys) + "n" + std::to_string(instance);
    std::string sdir = "devices/virtual/nvme-subsystem/nvme-subsys" + std::to_string(subsys);
    std::string hdir = root_ + "/" + sdir + "/" + head;
    WriteText(hdir + "/nsid", std::to_string(nsid) + "\n");
    WriteText(hdir + "/size", std::to_string(sectors) + "\n");
    WriteText(hdir + "/dev", "259:" + std::to_string(instance) + "\n");
    Link("../../nvme-subsys" + std::to_string(subsys), hdir + "/device");
    Link("../" + sdir + "/" + head, root_ + "/block/" + head);
    std::string path = "nvme" + std::to_string(subsys) + "c" + std::to_string(ctrl) + "n" +
                       std::to_string(instance);
    std::string cdir = "devices/virtual/nvme-fabrics/ctl/nvme" + std::to_string(ctrl);
    std::string pdir = root_ + "/" + cdir + "/" + path;
    WriteText(pdir + "/nsid", std::to_string(nsid) + "\n");
    WriteText(pdir + "/size", std::to_string(sectors) + "\n");
    WriteText(pdir + "/ana_state", "optimized\n");
    Link("../../nvme" + std::to_string(ctrl), pdir + "/device");
    Link("../" + cdir + "/" + path, root_ + "/block/" + path);
  }

  void RemoveNamespace(int subsys, int instance) {
    std::filesystem::remove(root_ + "/block/nvme" + std::to_string(subsys) + "n" +
                            std::to_string(instance));
  }

  void RemoveSubsystem(int n) {
    std::filesystem::remove(root_ + "/class/nvme-subsystem/nvme-subsys" + std::to_string(n));
  }

 private:
  std::string root_;
};

// /sys of an open-iscsi initiator with one session per call.
class IscsiSysfsBuilder {
 public:
  explicit IscsiSysfsBuilder(std::string root) : root_(std::move(root)) {}

  void AddSession(int sid, int host, const std::string& iqn, const std::string& addr, int port,
                  const std::string& state = "LOGGED_IN") {
    std::string s = "session" + std::to_string(sid);
    std::string base = "devices/platform/host" + std::to_string(host) + "/" + s;
    std::string cls = root_ + "/" + base + "/iscsi_session/" + s;
    WriteText(cls + "/targetname", iqn + "\n");
    WriteText(cls + "/state", state + "\n");
    WriteText(cls + "/tpgt", "1\n");
    Link("../../../" + s, cls + "/device");
    Link("../../" + base + "/iscsi_session/" + s, root_ + "/class/iscsi_session/" + s);
    std::string c = "connection" + std::to_string(sid) + ":0";
    std::string conn = root_ + "/" + base + "/" + c + "/iscsi_connection/" + c;
    WriteText(conn + "/persistent_address", addr + "\n");
    WriteText(conn + "/persistent_port", std::to_string(port) + "\n");
    WriteText(conn + "/address", addr + "\n");
    WriteText(conn + "/port", std::to_string(port) + "\n");
    Link("../../" + base + "/" + c + "/iscsi_connection/" + c,
         root_ + "/class/iscsi_connection/" + c);
    hosts_[sid] = host;
  }

  void AddLun(int sid, int64_t lun, const std::string& disk, int64_t sectors = 2097152) {
    int host = hosts_[sid];
    std::string h = std::to_string(host);
    std::string base = "devices/platform/host" + h + "/session" + std::to_string(sid);
    std::string sdev = h + ":0:0:" + std::to_string(lun);
    std::string bdir = root_ + "/" + base + "/target" + h + ":0:0/" + sdev + "/block/" + disk;
    WriteText(bdir + "/size", std::to_string(sectors) + "\n");
    WriteText(bdir + "/dev", "8:16\n");
    Link("../" + base + "/target" + h + ":0:0/" + sdev + "/block/" + disk,
         root_ + "/block/" + disk);
  }

 private:
  std::string root_;
  std::map<int, int> hosts_;
};

inline std::string EscapeMountField(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == ' ') {
      out += "\\040";
    } else if (c == '\t') {
      out += "\\011";
    } else if (c == '\n') {
      out += "\\012";
    } else if (c == '\\') {
      out += "\\134";
    } else {
      out += c;
    }
  }
  return out;
}

// A mount table in memory, rendered as mountinfo text. Stat / StatVfs
// answers can be overridden per path to play a dead or denied mount.
class FakeMounter : public Mounter {
 public:
  struct Entry {
    std::string source, target, fs_type, root = "/", options = "rw,relatime";
  };

  void AddMount(Entry e) {
    std::lock_guard<std::mutex> lock(mu_);
    mounts_.push_back(std::move(e));
  }
  void SetStatErr(const std::string& path, int err) { stat_err_[path] = err; }
  void SetVfs(const std::string& path, VfsStat v) { vfs_[path] = v; }
  void SetUnmountErr(const std::string& path, UnmountMode mode, int err) {
    unmount_err_[{path, static_cast<int>(mode)}] = err;
  }
  // Stat errors that go away once the path is unmounted (the dead mount was
  // what failed, not the directory beneath it).
  bool clear_stat_err_on_unmount = true;

  std::vector<MountSpec> mount_calls;
  std::vector<std::pair<std::string, UnmountMode>> unmount_calls;
  std::vector<Entry> mounts() {
    std::lock_guard<std::mutex> lock(mu_);
    return mounts_;
  }
  bool IsMounted(const std::string& path) {
    for (const auto& m : mounts()) {
      if (m.target == path) return true;
    }
    return false;
  }

  StatusOr<std::string> ReadMountInfo() override {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out =
        "21 1 259:1 / / rw,relatime shared:1 - ext4 /dev/vda1 rw\n"
        "22 21 0:5 / /dev rw,nosuid shared:2 - devtmpfs udev rw,size=4029264k\n";
    int id = 100;
    for (const auto& m : mounts_) {
      std::string n = std::to_string(id++);
      out += n + " 21 0:" + n + " " + EscapeMountField(m.root) + " " + EscapeMountField(m.target) +
             " " + m.options + " shared:9 - " + m.fs_type + " " + EscapeMountField(m.source) +
             " rw\n";
    }
    return out;
  }

  Status Mount(const MountSpec& spec) override {
    mount_calls.push_back(spec);
    Entry e;
    e.target = spec.target;
    e.options = spec.read_only ? "ro,relatime" : "rw,relatime";
    if (spec.bind) {
      // A bind keeps the source's file system; a device node binds devtmpfs.
      std::lock_guard<std::mutex> lock(mu_);
      bool found = false;
      for (const auto& m : mounts_) {
        if (m.target == spec.source) {
          e.source = m.source;
          e.fs_type = m.fs_type;
          found = true;
        }
      }
      if (!found && spec.source.rfind("/dev/", 0) == 0) {
        e.source = "udev";
        e.fs_type = "devtmpfs";
        e.root = spec.source.substr(4);
      }
      mounts_.push_back(e);
      return Status::Ok();
    }
    e.source = spec.source;
    e.fs_type = spec.fs_type;
    AddMount(e);
    return Status::Ok();
  }

  int Unmount(const std::string& target, UnmountMode mode) override {
    unmount_calls.push_back({target, mode});
    if (auto it = unmount_err_.find({target, static_cast<int>(mode)}); it != unmount_err_.end()) {
      return it->second;
    }
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = mounts_.rbegin(); it != mounts_.rend(); ++it) {
      if (it->target == target) {
        mounts_.erase(std::next(it).base());
        if (clear_stat_err_on_unmount) stat_err_.erase(target);
        return 0;
      }
    }
    return EINVAL;
  }

  PathStat Stat(const std::string& path) override {
    PathStat out;
    if (auto it = stat_err_.find(path); it != stat_err_.end()) {
      out.err = it->second;
      return out;
    }
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
      out.err = errno;
      return out;
    }
    out.is_dir = S_ISDIR(st.st_mode);
    out.is_regular = S_ISREG(st.st_mode);
    out.is_block_device = S_ISBLK(st.st_mode);
    return out;
  }

  VfsStat StatVfs(const std::string& path) override {
    if (auto it = vfs_.find(path); it != vfs_.end()) return it->second;
    if (auto it = stat_err_.find(path); it != stat_err_.end()) return VfsStat{it->second};
    VfsStat v;
    v.total_bytes = 1 << 30;
    v.available_bytes = 1 << 29;
    v.used_bytes = 1 << 29;
    v.total_inodes = 65536;
    v.free_inodes = 65000;
    v.used_inodes = 536;
    return v;
  }

 private:
  std::mutex mu_;
  std::vector<Entry> mounts_;
  std::map<std::string, int> stat_err_;
  std::map<std::string, VfsStat> vfs_;
  std::map<std::pair<std::string, int>, int> unmount_err_;
};

}  // namespace pillar::node::testing
