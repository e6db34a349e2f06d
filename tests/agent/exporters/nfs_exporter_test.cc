#include "agent/exporters/nfs_exporter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>

#include "common/fake_exec.h"
#include "common/temp_dir.h"
#include "common/validate.h"

namespace pillar::agent {
namespace {

using pillar::testing::FakeExec;
using pillar::testing::TempDir;
using ::testing::AllOf;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

// Captured from nfs-utils 2.6.2 (Debian 12) `exportfs -v` after a series of
// `exportfs -o` calls: paths longer than 14 characters put the client on the
// next line after two tabs, shorter ones are padded to 14 columns and a tab;
// the anonymous client prints as <world>; one path's clients are not
// necessarily adjacent.
constexpr const char* kCaptured =
    "/tmp/nonexist \t10.1.1.1(sync,wdelay,hide,no_subtree_check,sec=sys,rw,root_squash,"
    "no_all_squash)\n"
    "/tmp/nx       \t10.1.1.1(sync,wdelay,hide,no_subtree_check,fsid=1,sec=sys,rw,root_squash,"
    "no_all_squash)\n"
    "/tmp/nfsx/sp ace\n"
    "\t\t10.1.1.1(sync,wdelay,hide,no_subtree_check,fsid=2,sec=sys,rw,root_squash,"
    "no_all_squash)\n"
    "/tmp/nfsx/short\n"
    "\t\t10.0.0.1(sync,wdelay,hide,no_subtree_check,fsid=12345,sec=sys,ro,root_squash,"
    "no_all_squash)\n"
    "/tmp/nfsx/short\n"
    "\t\tfd00::2(sync,wdelay,hide,no_subtree_check,sec=sys,rw,root_squash,no_all_squash)\n"
    "/tmp/nfsx/a-very-long-directory-name/vol1\n"
    "\t\t10.0.0.0/24(sync,wdelay,hide,no_subtree_check,"
    "fsid=8d9c1a6e-1b2f-4c1e-9b6e-2f6d7a8b9c0d,sec=sys,rw,no_root_squash,no_all_squash)\n"
    "/tmp/nx       \t10.2.0.0/16(sync,wdelay,hide,no_subtree_check,fsid=4,sec=sys,rw,"
    "root_squash,no_all_squash)\n"
    "/tmp/nfsx/a-very-long-directory-name/vol1\n"
    "\t\t<world>(sync,wdelay,hide,no_subtree_check,fsid=7,sec=sys,rw,no_root_squash,"
    "no_all_squash)\n";

std::vector<std::string> Opts(const std::string& csv) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t c = csv.find(',', start);
    out.push_back(csv.substr(start, c == std::string::npos ? c : c - start));
    if (c == std::string::npos) return out;
    start = c + 1;
  }
}

TEST(ParseExportfsVerboseTest, CapturedOutput) {
  auto got = ParseExportfsVerbose(kCaptured);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->size(), 8u);
  EXPECT_EQ((*got)[0],
            (ExportfsEntry{"/tmp/nonexist", "10.1.1.1",
                           Opts("sync,wdelay,hide,no_subtree_check,sec=sys,rw,root_squash,"
                                "no_all_squash")}));
  EXPECT_EQ((*got)[1].path, "/tmp/nx");
  EXPECT_EQ((*got)[2].path, "/tmp/nfsx/sp ace");
  EXPECT_EQ((*got)[3].path, "/tmp/nfsx/short");
  EXPECT_EQ((*got)[3].client, "10.0.0.1");
  EXPECT_EQ((*got)[4].client, "fd00::2");
  EXPECT_EQ((*got)[5].client, "10.0.0.0/24");
  EXPECT_EQ((*got)[5].options[4], "fsid=8d9c1a6e-1b2f-4c1e-9b6e-2f6d7a8b9c0d");
  EXPECT_EQ((*got)[6], (ExportfsEntry{"/tmp/nx", "10.2.0.0/16",
                                      Opts("sync,wdelay,hide,no_subtree_check,fsid=4,sec=sys,rw,"
                                           "root_squash,no_all_squash")}));
  EXPECT_EQ((*got)[7].path, "/tmp/nfsx/a-very-long-directory-name/vol1");
  EXPECT_EQ((*got)[7].client, "*");
}

TEST(ParseExportfsVerboseTest, EmptyTableAndExactlyFourteenColumns) {
  auto empty = ParseExportfsVerbose("");
  ASSERT_TRUE(empty.ok());
  EXPECT_THAT(*empty, IsEmpty());
  auto got = ParseExportfsVerbose("/srv/abcdefghi\t*(rw)\n/a\t10.0.0.1\n");
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_THAT(*got, ElementsAre(ExportfsEntry{"/srv/abcdefghi", "*", {"rw"}},
                                ExportfsEntry{"/a", "10.0.0.1", {}}));
}

TEST(ParseExportfsVerboseTest, MalformedOutputIsInternalNamingTheLine) {
  for (const char* bad : {
           "\t\t10.0.0.1(rw)\n",                      // client without a path
           "/srv/a-long-path-here\n",                 // path without a client
           "/srv/a-long-path-here\n/srv/b\t*(rw)\n",  // two paths in a row
           "/srv/a-long-path-here\n\n\t\t*(rw)\n",    // blank line in between
           "/srv/a\t10.0.0.1(rw\n",                   // unterminated options
           "/srv/a\t(rw)\n",                          // no client
           "/srv/a\t10.0.0.1(rw,,sync)\n",            // empty option
           "/srv/a\t\n",                              // nothing after the tab
           "/srv/a\tbad client(rw)\n",                // whitespace in a client
           "Export list for x:\n",                    // not exportfs -v at all
       }) {
    auto got = ParseExportfsVerbose(bad);
    ASSERT_FALSE(got.ok()) << bad;
    EXPECT_EQ(got.status().code(), Code::kInternal) << bad;
    EXPECT_NE(got.status().message().find("line "), std::string::npos) << got.status().message();
  }
}

TEST(NfsFsidTest, StableUuidPerVolume) {
  EXPECT_EQ(NfsFsid("tank/pvc-1"), "ca80c14c-32e7-8253-9950-efcecbfe6e5f");
  EXPECT_EQ(NfsFsid("tank/pvc-1"), NfsFsid("tank/pvc-1"));
  EXPECT_NE(NfsFsid("tank/pvc-1"), NfsFsid("tank/pvc-2"));
  EXPECT_TRUE(validate::Uuid("fsid", NfsFsid("vg0/lv.a-b")).ok());
  EXPECT_EQ(NfsExportOptions("tank/pvc-1"),
            "rw,sync,subtree_check,root_squash,fsid=ca80c14c-32e7-8253-9950-efcecbfe6e5f");
  EXPECT_EQ(NfsExportOptions("tank/pvc-1", /*root_squash=*/false),
            "rw,sync,subtree_check,no_root_squash,fsid=ca80c14c-32e7-8253-9950-efcecbfe6e5f");
  EXPECT_EQ(NfsExportOptions("tank/pvc-1", /*root_squash=*/true, /*subtree_check=*/false),
            "rw,sync,no_subtree_check,root_squash,fsid=ca80c14c-32e7-8253-9950-efcecbfe6e5f");
}

// /proc/self/mountinfo of a storage node: / on ext4, a ZFS dataset at its
// root, a bind mount of a subdirectory, and a mount point with an escape.
constexpr const char* kMountInfo =
    "22 1 254:1 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "40 22 0:45 / /tank/pvc-2 rw shared:20 - zfs tank/pvc-2 rw,xattr,noacl\n"
    "41 22 254:1 /srv/pool/a /mnt/a rw,relatime shared:1 - ext4 /dev/vda rw\n"
    "42 22 0:46 / /srv/with\\040space rw - tmpfs tmpfs rw\n"
    "43 22 0:47 / /mnt/stacked rw - tmpfs tmpfs rw\n"
    "44 43 254:1 /srv /mnt/stacked rw - ext4 /dev/vda rw\n"
    "45 22 0:48 / /mnt/ok-again rw - tmpfs tmpfs rw\n";

TEST(IsFilesystemRootTest, OnlyTheVisibleMountOfAFileSystemsOwnRoot) {
  EXPECT_TRUE(IsFilesystemRoot(kMountInfo, "/tank/pvc-2"));  // a dataset, exported at its root
  EXPECT_TRUE(IsFilesystemRoot(kMountInfo, "/"));
  EXPECT_TRUE(IsFilesystemRoot(kMountInfo, "/mnt/ok-again"));
  // A directory inside a file system: the escape subtree_check closes.
  EXPECT_FALSE(IsFilesystemRoot(kMountInfo, "/srv/pool/a"));
  EXPECT_FALSE(IsFilesystemRoot(kMountInfo, "/tank/pvc-2/sub"));
  // A bind mount of a subdirectory is a mount point but not a root.
  EXPECT_FALSE(IsFilesystemRoot(kMountInfo, "/mnt/a"));
  // The mount made last is the one knfsd sees.
  EXPECT_FALSE(IsFilesystemRoot(kMountInfo, "/mnt/stacked"));
  EXPECT_FALSE(IsFilesystemRoot(kMountInfo, "/srv/with"));
  EXPECT_FALSE(IsFilesystemRoot("", "/tank/pvc-2"));
  EXPECT_FALSE(IsFilesystemRoot("garbage\n40 22 0:45 /\n", "/tank/pvc-2"));
}

TEST(ValidateExportPathTest, AcceptsPlainAbsoluteDirectoriesOnly) {
  for (const char* ok : {"/tank/pvc-1", "/srv/nfs/Vol_1.a+b", "/a"}) {
    EXPECT_TRUE(ValidateExportPath("p", ok).ok()) << ok;
  }
  for (std::string bad :
       {std::string(""), std::string("/"), std::string("tank/pvc"), std::string("/tank/"),
        std::string("/tank//pvc"), std::string("/tank/../etc"), std::string("/tank/./x"),
        std::string("/tank/a b"), std::string("/tank/a\tb"), std::string("/tank/a\nb"),
        std::string("/tank/\"a\""), std::string("/tank/a'b"), std::string("/tank/a\\040b"),
        std::string("/tank/a#b"), std::string("/tank/a(rw)"), std::string("/tank/a:b"),
        std::string("/tank/a\0b", 8), "/" + std::string(4095, 'a')}) {
    Status s = ValidateExportPath("p", bad);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << bad;
  }
}

// Counts the writes an Fs receives, so "writes nothing" can be asserted.
class CountingFs : public PosixFs {
 public:
  Status WriteFile(const std::string& path, const std::string& content) override {
    ++writes;
    return PosixFs::WriteFile(path, content);
  }
  Status WriteFileAtomic(const std::string& path, const std::string& content) override {
    ++writes;
    return PosixFs::WriteFileAtomic(path, content);
  }
  Status MakeDirs(const std::string& path) override {
    ++writes;
    return PosixFs::MakeDirs(path);
  }
  Status Unlink(const std::string& path) override {
    ++writes;
    return PosixFs::Unlink(path);
  }
  int writes = 0;
};

// knfsd's export table as nfs-utils 2.6.2 keeps and prints it: `exportfs -o`
// adds or replaces one client of a path, `-u` removes one (or fails like the
// real tool), `-v` prints in the real layout.
class SimExportfs {
 public:
  explicit SimExportfs(FakeExec& exec) {
    exec.On({"exportfs", "-v"}, [this](const Command&) -> StatusOr<ExecResult> {
      return ExecResult{0, Print(), ""};
    });
    exec.On({"exportfs", "-o"}, [this](const Command& c) -> StatusOr<ExecResult> {
      auto [client, path] = Split(c.argv.at(3));
      Set(path, client, Printed(c.argv.at(2)));
      WriteEtab();
      return ExecResult{0, "", ""};
    });
    // Several client:path arguments at once; one not found is reported and
    // the rest are still removed, as nfs-utils does.
    exec.On({"exportfs", "-u"}, [this](const Command& c) -> StatusOr<ExecResult> {
      std::string err;
      for (size_t i = 2; i < c.argv.size(); ++i) {
        auto [client, path] = Split(c.argv[i]);
        bool found = false;
        for (auto it = table_.begin(); it != table_.end(); ++it) {
          if (it->path == path && it->client == client) {
            table_.erase(it);
            found = true;
            break;
          }
        }
        if (!found) err += "exportfs: Could not find '" + c.argv[i] + "' to unexport.\n";
      }
      WriteEtab();
      return ExecResult{err.empty() ? 0 : 1, "", err};
    });
    // Every line of the served exports files, their options replacing a
    // client's, every other entry of the table kept (nfs-utils' -a).
    exec.On({"exportfs", "-a"}, [this](const Command&) -> StatusOr<ExecResult> {
      ++runs_of_a;
      if (files_.empty()) return ExecResult{0, "", ""};
      for (const auto& f : std::filesystem::directory_iterator(files_)) {
        std::ifstream in(f.path());
        std::string line;
        while (std::getline(in, line)) {
          if (line.empty() || line[0] == '#') continue;
          std::istringstream tokens(line);
          std::string path, spec;
          tokens >> path;
          while (tokens >> spec) {
            size_t paren = spec.find('(');
            Set(path, spec.substr(0, paren),
                Printed(spec.substr(paren + 1, spec.size() - paren - 2)));
          }
        }
      }
      WriteEtab();
      return ExecResult{0, "", ""};
    });
  }

  // Where `exportfs -a` reads its files.
  void ServeFiles(const std::string& dir) { files_ = dir; }
  int runs_of_a = 0;

  // How nfs-utils prints the options pillar passes.
  // (Subtree checking shows as the absence of no_subtree_check.)
  static std::string Printed(const std::string& given) {
    std::string fsid = given.substr(given.find("fsid="));
    for (std::string check : {"subtree_check", "no_subtree_check"}) {
      for (std::string mode : {"root_squash", "no_root_squash"}) {
        if (given.rfind("rw,sync," + check + "," + mode + ",", 0) != 0) continue;
        return std::string("sync,wdelay,hide,") +
               (check == "no_subtree_check" ? "no_subtree_check," : "") + fsid + ",sec=sys,rw," +
               mode + ",no_all_squash";
      }
    }
    return given;
  }

  // Keeps the table in `path` too, rewritten as nfs-utils does: a new file
  // renamed over the old one on every change.
  void KeepEtab(const std::string& path) {
    etab_ = path;
    WriteEtab();
  }
  void WriteEtab() const {
    if (etab_.empty()) return;
    {
      std::ofstream tmp(etab_ + ".tmp");
      for (const auto& e : table_) tmp << e.path << "\t" << e.client << "(" << e.opts << ")\n";
    }
    std::filesystem::rename(etab_ + ".tmp", etab_);
  }

  void Set(const std::string& path, const std::string& client, const std::string& opts) {
    for (auto& e : table_) {
      if (e.path == path && e.client == client) {
        e.opts = opts;
        return;
      }
    }
    table_.push_back({path, client, opts});
  }

  std::string Print() const {
    std::string out;
    for (const auto& e : table_) {
      std::string host = e.client == "*" ? "<world>" : e.client;
      if (e.path.size() > 14) {
        out += e.path + "\n\t\t" + host;
      } else {
        out += e.path + std::string(14 - e.path.size(), ' ') + "\t" + host;
      }
      out += "(" + e.opts + ")\n";
    }
    return out;
  }

  std::map<std::string, std::string> ClientsOf(const std::string& path) const {
    std::map<std::string, std::string> out;
    for (const auto& e : table_) {
      if (e.path == path) out[e.client] = e.opts;
    }
    return out;
  }

 private:
  struct Entry {
    std::string path, client, opts;
  };
  static std::pair<std::string, std::string> Split(const std::string& arg) {
    if (arg[0] == '[') {
      size_t close = arg.find("]:");
      return {arg.substr(1, close - 1), arg.substr(close + 2)};
    }
    size_t colon = arg.find(':');
    return {arg.substr(0, colon), arg.substr(colon + 1)};
  }
  std::vector<Entry> table_;
  std::string etab_;
  std::string files_;
};

constexpr const char* kVol = "tank/pvc-1";

class NfsExporterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs_.MakeDirs(dir_.Sub("tank/pvc-1")).ok());
    ASSERT_TRUE(fs_.MakeDirs(dir_.Sub("tank/pvc-2")).ok());
    ASSERT_TRUE(fs_.MakeDirs(dir_.Sub("nfsd")).ok());
    fs_.writes = 0;
  }

  std::string Path(const std::string& rel = "tank/pvc-1") const { return dir_.Sub(rel); }
  std::string ExportsDir() const { return dir_.Sub("exports.d"); }
  std::string File(const std::string& stem = "tank:2fpvc-1") const {
    return ExportsDir() + "/pillar-" + stem + ".exports";
  }
  std::string Opts() const { return NfsExportOptions(kVol); }
  std::string Printed() const { return PrintedOf(kVol); }
  static std::string PrintedOf(const std::string& id) {
    return SimExportfs::Printed(NfsExportOptions(id));
  }

  KernelExport Want(std::set<std::string> hosts, bool acl = true) const {
    KernelExport w;
    w.agent_volume_id = kVol;
    w.target_id = Path();
    w.backing = Path();
    w.params.bind_address = "192.0.2.10";
    w.params.port = 2049;
    w.params.acl_enabled = acl;
    w.allowed_hosts = std::move(hosts);
    return w;
  }

  std::string Content(const std::string& clients_line) const {
    std::string out =
        "# Managed by pillar-csi; exportfs -r restores this export. Do not edit.\n"
        "# pillar agent-volume-id=tank/pvc-1 path=" +
        Path() + " bind-address=192.0.2.10 port=2049\n";
    if (!clients_line.empty()) out += Path() + " " + clients_line + "\n";
    return out;
  }

  TempDir dir_;
  CountingFs fs_;
  FakeExec exec_;
  SimExportfs table_{exec_};
  NfsExporter exporter_{exec_, fs_, ExportsDir(), dir_.Sub("nfsd"), dir_.Sub("mountinfo")};
};

TEST_F(NfsExporterTest, ApplyCreatesFileThenExportsEachClient) {
  std::vector<std::string> changes;
  Status s = exporter_.Apply(Want({"10.0.0.2", "10.0.0.1"}), &changes);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("exportfs -v", "exportfs -o " + Opts() + " 10.0.0.1:" + Path(),
                          "exportfs -o " + Opts() + " 10.0.0.2:" + Path()));
  EXPECT_EQ(*fs_.ReadFile(File()), Content("10.0.0.1(" + Opts() + ") 10.0.0.2(" + Opts() + ")"));
  EXPECT_THAT(changes, ElementsAre("nfs " + Path() + ": wrote " + File(),
                                   "nfs " + Path() + ": exported to 10.0.0.1",
                                   "nfs " + Path() + ": exported to 10.0.0.2"));
}

TEST_F(NfsExporterTest, ApplyWithoutDriftOnlyObservesAndWritesNothing) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1", "10.0.0.2"}), nullptr).ok());
  exec_.ClearCalls();
  fs_.writes = 0;
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1", "10.0.0.2"}), &changes).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v"));
  EXPECT_EQ(fs_.writes, 0);
  EXPECT_THAT(changes, IsEmpty());
}

TEST_F(NfsExporterTest, OneMissingClientIsOneExportAndOtherPathsAreUntouched) {
  table_.Set("/srv/other", "10.0.0.3", "sync,wdelay,hide,no_subtree_check,sec=sys,ro");
  table_.Set(Path(), "10.0.0.1", Printed());
  table_.Set(Path("tank/pvc-2"), "10.0.0.2", PrintedOf("tank/pvc-2"));
  ASSERT_TRUE(fs_.MakeDirs(ExportsDir()).ok());
  ASSERT_TRUE(
      fs_.WriteFileAtomic(File(), Content("10.0.0.1(" + Opts() + ") 10.0.0.2(" + Opts() + ")"))
          .ok());
  fs_.writes = 0;
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1", "10.0.0.2"}), &changes).ok());
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("exportfs -v", "exportfs -o " + Opts() + " 10.0.0.2:" + Path()));
  EXPECT_EQ(fs_.writes, 0);
  EXPECT_THAT(changes, ElementsAre("nfs " + Path() + ": exported to 10.0.0.2"));
  EXPECT_EQ(table_.ClientsOf("/srv/other").size(), 1u);
  EXPECT_EQ(table_.ClientsOf(Path("tank/pvc-2")).size(), 1u);
}

TEST_F(NfsExporterTest, AnExtraClientIsOneUnexportOfThisPathOnly) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  table_.Set(Path(), "10.0.0.9", Printed());                            // added out of band
  table_.Set(Path("tank/pvc-2"), "10.0.0.9", PrintedOf("tank/pvc-2"));  // another volume's client
  exec_.ClearCalls();
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), &changes).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u 10.0.0.9:" + Path()));
  EXPECT_THAT(changes, ElementsAre("nfs " + Path() + ": unexported from 10.0.0.9"));
  EXPECT_EQ(table_.ClientsOf(Path("tank/pvc-2")).count("10.0.0.9"), 1u);
}

TEST_F(NfsExporterTest, RemovalsRunBeforeAdditions) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  exec_.ClearCalls();
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.2"}), nullptr).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u 10.0.0.1:" + Path(),
                                             "exportfs -o " + Opts() + " 10.0.0.2:" + Path()));
  EXPECT_EQ(*fs_.ReadFile(File()), Content("10.0.0.2(" + Opts() + ")"));
}

TEST_F(NfsExporterTest, DriftedOptionsAreReExported) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  std::string ro = "sync,wdelay,hide,no_subtree_check,fsid=" + NfsFsid(kVol) +
                   ",sec=sys,ro,root_squash,no_all_squash";
  table_.Set(Path(), "10.0.0.1", ro);
  auto before = exporter_.Get(kVol);
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  ASSERT_EQ((*before)->drift.size(), 1u);  // so the reconciler re-applies
  EXPECT_NE((*before)->drift[0].find("client 10.0.0.1 has options " + ro), std::string::npos)
      << (*before)->drift[0];
  exec_.ClearCalls();
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), &changes).ok());
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("exportfs -v", "exportfs -o " + Opts() + " 10.0.0.1:" + Path()));
  EXPECT_THAT(changes,
              ElementsAre("nfs " + Path() + ": re-exported to 10.0.0.1 (options were " + ro + ")"));
  EXPECT_EQ(table_.ClientsOf(Path())["10.0.0.1"], Printed());
}

TEST_F(NfsExporterTest, AclOffExportsToTheWorldOnly) {
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}, /*acl=*/false), &changes).ok());
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("exportfs -v", "exportfs -o " + Opts() + " *:" + Path()));
  EXPECT_EQ(*fs_.ReadFile(File()), Content("*(" + Opts() + ")"));
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_FALSE((*got)->params.acl_enabled);
  EXPECT_THAT((*got)->allowed_hosts, IsEmpty());
  EXPECT_TRUE((*got)->enabled);
  EXPECT_THAT((*got)->drift, IsEmpty());
  // A host exported besides "*" is drift that Apply removes.
  table_.Set(Path(), "10.0.0.7", Printed());
  EXPECT_EQ((*exporter_.Get(kVol))->drift.size(), 1u);
  exec_.ClearCalls();
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}, /*acl=*/false), nullptr).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u 10.0.0.7:" + Path()));
  // Turning the ACL on narrows to the hosts: "*" goes before any host is added.
  exec_.ClearCalls();
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u *:" + Path(),
                                             "exportfs -o " + Opts() + " 10.0.0.1:" + Path()));
}

TEST_F(NfsExporterTest, EmptyAclAdmitsNobodyAndWritesNoExportLine) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  exec_.ClearCalls();
  ASSERT_TRUE(exporter_.Apply(Want({}), nullptr).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u 10.0.0.1:" + Path()));
  // A path with no client in an exports file would mean "everyone".
  EXPECT_EQ(*fs_.ReadFile(File()), Content(""));
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  EXPECT_TRUE((*got)->params.acl_enabled);
  EXPECT_THAT((*got)->allowed_hosts, IsEmpty());
  EXPECT_TRUE((*got)->enabled);
}

TEST_F(NfsExporterTest, Ipv6ClientsAreBracketedOnlyOnTheCommandLine) {
  ASSERT_TRUE(exporter_.Apply(Want({"fd00::2", "fd00:1::/64"}), nullptr).ok());
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("exportfs -v", "exportfs -o " + Opts() + " [fd00:1::/64]:" + Path(),
                          "exportfs -o " + Opts() + " [fd00::2]:" + Path()));
  EXPECT_EQ(*fs_.ReadFile(File()), Content("fd00:1::/64(" + Opts() + ") fd00::2(" + Opts() + ")"));
  exec_.ClearCalls();
  ASSERT_TRUE(exporter_.Apply(Want({"fd00::2"}), nullptr).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u [fd00:1::/64]:" + Path()));
}

TEST_F(NfsExporterTest, InvalidRequestsRunNothingAndWriteNothing) {
  std::vector<KernelExport> bad;
  for (std::string host :
       {"*", "10.0.0.1; rm -rf /", "host.example", "10.0.0.0/33", "", "10.0.0.1(rw)"}) {
    bad.push_back(Want({"10.0.0.1", host}));
  }
  for (std::string path :
       {"relative/dir", "/tank/a b", "/tank/a\nb", "/tank/\"a\"", "/tank/../x", "/tank/x/", "/"}) {
    KernelExport w = Want({"10.0.0.1"});
    w.backing = w.target_id = path;
    bad.push_back(w);
  }
  KernelExport mismatch = Want({"10.0.0.1"});
  mismatch.target_id = Path("tank/pvc-2");
  bad.push_back(mismatch);
  KernelExport port = Want({"10.0.0.1"});
  port.params.port = 2050;
  bad.push_back(port);
  KernelExport bind = Want({"10.0.0.1"});
  bind.params.bind_address = "0.0.0.0 port=1";
  bad.push_back(bind);
  KernelExport capsule = Want({"10.0.0.1"});
  capsule.params.in_capsule_data_size = 8192;
  bad.push_back(capsule);
  KernelExport id = Want({"10.0.0.1"});
  id.agent_volume_id = "../etc";
  bad.push_back(id);
  for (const auto& w : bad) {
    std::vector<std::string> changes;
    Status s = exporter_.Apply(w, &changes);
    EXPECT_EQ(s.code(), Code::kInvalidArgument) << s.ToString();
    EXPECT_THAT(changes, IsEmpty());
  }
  EXPECT_THAT(exec_.CallLines(), IsEmpty());
  EXPECT_EQ(fs_.writes, 0);
  Status client = exporter_.Apply(Want({"10.0.0.1", "host.example"}), nullptr);
  EXPECT_NE(client.message().find("host.example"), std::string::npos) << client.message();
  KernelExport p2050 = Want({"10.0.0.1"});
  p2050.params.port = 2050;
  EXPECT_NE(exporter_.Apply(p2050, nullptr).message().find("2050"), std::string::npos);
}

TEST_F(NfsExporterTest, MissingDirectoryIsFailedPreconditionBeforeAnyCommand) {
  KernelExport w = Want({"10.0.0.1"});
  w.backing = w.target_id = Path("tank/gone");
  Status s = exporter_.Apply(w, nullptr);
  EXPECT_EQ(s.code(), Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find(Path("tank/gone")), std::string::npos);
  EXPECT_THAT(exec_.CallLines(), IsEmpty());
  EXPECT_EQ(fs_.writes, 0);
}

TEST_F(NfsExporterTest, PortZeroIsAcceptedAndBothAreReportedAsGiven) {
  KernelExport w = Want({"10.0.0.1"});
  w.params.port = 0;
  ASSERT_TRUE(exporter_.Apply(w, nullptr).ok());
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->params, (ExportParams{"192.0.2.10", 0, true, 0}));
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  EXPECT_EQ((*exporter_.Get(kVol))->params.port, 2049);
}

TEST_F(NfsExporterTest, GetReportsTheLiveExport) {
  auto none = exporter_.Get(kVol);
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1", "10.0.0.0/24"}), nullptr).ok());
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  const ActualExport& a = **got;
  EXPECT_EQ(a.agent_volume_id, kVol);
  EXPECT_EQ(a.target_id, Path());
  EXPECT_EQ(a.backing, Path());
  EXPECT_EQ(a.params, (ExportParams{"192.0.2.10", 2049, true, 0}));
  EXPECT_EQ(a.allowed_hosts, (std::set<std::string>{"10.0.0.0/24", "10.0.0.1"}));
  EXPECT_TRUE(a.enabled);
  EXPECT_THAT(a.drift, IsEmpty());
}

TEST_F(NfsExporterTest, LostFileIsFoundByFsidReportedDisabledAndRepaired) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  ASSERT_TRUE(fs_.Unlink(File()).ok());
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
  EXPECT_EQ((*got)->target_id, Path());
  EXPECT_EQ((*got)->allowed_hosts, (std::set<std::string>{"10.0.0.1"}));
  EXPECT_TRUE((*got)->enabled);
  ASSERT_EQ((*got)->drift.size(), 1u);
  EXPECT_NE((*got)->drift[0].find(File() + " is missing"), std::string::npos) << (*got)->drift[0];
  exec_.ClearCalls();
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), &changes).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v"));
  EXPECT_THAT(changes, ElementsAre("nfs " + Path() + ": wrote " + File()));
  EXPECT_THAT((*exporter_.Get(kVol))->drift, IsEmpty());
}

TEST_F(NfsExporterTest, MovedVolumeIsUnexportedFromItsOldDirectory) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  KernelExport moved = Want({"10.0.0.1"});
  moved.backing = moved.target_id = Path("tank/pvc-2");
  exec_.ClearCalls();
  ASSERT_TRUE(exporter_.Apply(moved, nullptr).ok());
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("exportfs -v", "exportfs -u 10.0.0.1:" + Path(),
                          "exportfs -o " + Opts() + " 10.0.0.1:" + Path("tank/pvc-2")));
  EXPECT_THAT(table_.ClientsOf(Path()), IsEmpty());
}

TEST_F(NfsExporterTest, CorruptFileIsInternalNamingIt) {
  ASSERT_TRUE(fs_.MakeDirs(ExportsDir()).ok());
  ASSERT_TRUE(fs_.WriteFileAtomic(File(), Path() + " *(rw)\n").ok());
  auto got = exporter_.Get(kVol);
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), Code::kInternal);
  EXPECT_NE(got.status().message().find(File()), std::string::npos) << got.status().message();
  ASSERT_TRUE(fs_.WriteFileAtomic(File(), "# pillar agent-volume-id=tank/other path=" + Path() +
                                              " bind-address=192.0.2.10 port=2049\n")
                  .ok());
  EXPECT_EQ(exporter_.Get(kVol).status().code(), Code::kInternal);
  EXPECT_EQ(exporter_.List().status().code(), Code::kInternal);
}

TEST_F(NfsExporterTest, ListReportsPillarFilesOnly) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  KernelExport second = Want({}, /*acl=*/false);
  second.agent_volume_id = "tank/pvc-2";
  second.backing = second.target_id = Path("tank/pvc-2");
  ASSERT_TRUE(exporter_.Apply(second, nullptr).ok());
  ASSERT_TRUE(fs_.WriteFileAtomic(ExportsDir() + "/site.exports", "/srv *(ro)\n").ok());
  ASSERT_TRUE(fs_.WriteFileAtomic(ExportsDir() + "/pillar-Bad.exports", "junk\n").ok());
  table_.Set("/srv", "*", "ro");
  exec_.ClearCalls();
  auto list = exporter_.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  ASSERT_EQ(list->size(), 2u);
  std::map<std::string, ActualExport> by_id;
  for (auto& a : *list) by_id[a.agent_volume_id] = a;
  EXPECT_EQ(by_id["tank/pvc-1"].allowed_hosts, (std::set<std::string>{"10.0.0.1"}));
  EXPECT_FALSE(by_id["tank/pvc-2"].params.acl_enabled);
  EXPECT_EQ(by_id["tank/pvc-2"].target_id, Path("tank/pvc-2"));
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v"));  // one observation for all
}

TEST_F(NfsExporterTest, ListWithoutDirectoryIsEmpty) {
  auto list = exporter_.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_THAT(*list, IsEmpty());
  EXPECT_THAT(exec_.CallLines(), IsEmpty());
}

TEST_F(NfsExporterTest, RemoveUnexportsEveryClientAndDeletesTheFile) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1", "10.0.0.2"}), nullptr).ok());
  table_.Set(Path("tank/pvc-2"), "10.0.0.1", PrintedOf("tank/pvc-2"));
  exec_.ClearCalls();
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Remove(kVol, &changes).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u 10.0.0.1:" + Path(),
                                             "exportfs -u 10.0.0.2:" + Path()));
  EXPECT_FALSE(fs_.Exists(File()));
  EXPECT_THAT(changes, ElementsAre("nfs " + Path() + ": removed " + File(),
                                   "nfs " + Path() + ": unexported from 10.0.0.1",
                                   "nfs " + Path() + ": unexported from 10.0.0.2"));
  EXPECT_EQ(table_.ClientsOf(Path("tank/pvc-2")).size(), 1u);
  auto gone = exporter_.Get(kVol);
  ASSERT_TRUE(gone.ok());
  EXPECT_FALSE(gone->has_value());
  // Absent is success, and observing is all it does.
  exec_.ClearCalls();
  changes.clear();
  ASSERT_TRUE(exporter_.Remove(kVol, &changes).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v"));
  EXPECT_THAT(changes, IsEmpty());
}

TEST_F(NfsExporterTest, UnexportRaceWithTheToolIsTolerated) {
  FakeExec exec;
  exec.OnOutput({"exportfs", "-v"}, Path() + "\n\t\t10.0.0.1(" + Printed() + ")\n");
  exec.OnOutput({"exportfs", "-u"}, "", 1,
                "exportfs: Could not find '10.0.0.1:" + Path() + "' to unexport.\n");
  NfsExporter exporter(exec, fs_, ExportsDir(), dir_.Sub("nfsd"));
  EXPECT_TRUE(exporter.Remove(kVol, nullptr).ok());
  FakeExec failing;
  failing.OnOutput({"exportfs", "-v"}, Path() + "\n\t\t10.0.0.1(" + Printed() + ")\n");
  failing.OnOutput({"exportfs", "-u"}, "", 1, "exportfs: internal error\n");
  NfsExporter broken(failing, fs_, ExportsDir(), dir_.Sub("nfsd"));
  Status s = broken.Remove(kVol, nullptr);
  EXPECT_EQ(s.code(), Code::kInternal);
  EXPECT_NE(s.message().find("exportfs -u 10.0.0.1:" + Path()), std::string::npos) << s.message();
}

TEST_F(NfsExporterTest, FailingObservationFailsApplyBeforeAnyChange) {
  FakeExec exec;
  exec.OnOutput({"exportfs", "-v"}, "", 1, "exportfs: could not open etab\n");
  NfsExporter exporter(exec, fs_, ExportsDir(), dir_.Sub("nfsd"));
  Status s = exporter.Apply(Want({"10.0.0.1"}), nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(exec.CallLines(), ElementsAre("exportfs -v"));
  EXPECT_EQ(fs_.writes, 0);
}

TEST_F(NfsExporterTest, StateTokenTellsWhetherNfsdRuns) {
  EXPECT_EQ(exporter_.StateToken(), "");  // no threads file: nfsd module not loaded
  ASSERT_TRUE(fs_.WriteFile(dir_.Sub("nfsd/threads"), "0\n").ok());
  EXPECT_EQ(exporter_.StateToken(), "");
  ASSERT_TRUE(fs_.WriteFile(dir_.Sub("nfsd/threads"), "8\n").ok());
  EXPECT_EQ(exporter_.StateToken(), "nfsd");
  ASSERT_TRUE(fs_.WriteFile(dir_.Sub("nfsd/threads"), "garbage\n").ok());
  EXPECT_EQ(exporter_.StateToken(), "");
  EXPECT_THAT(exec_.CallLines(), IsEmpty());
}

TEST_F(NfsExporterTest, RootSquashByDefaultAndNoRootSquashOnlyWhenAskedFor) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  EXPECT_EQ(table_.ClientsOf(Path()).at("10.0.0.1"), Printed());
  EXPECT_NE(Printed().find(",root_squash,"), std::string::npos);
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got) << got.status().ToString();
  EXPECT_TRUE((*got)->params.root_squash);
  EXPECT_THAT((*got)->drift, IsEmpty());

  // The opt-out re-exports the live client and rewrites the file.
  KernelExport open = Want({"10.0.0.1"});
  open.params.root_squash = false;
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(open, &changes).ok());
  std::string unsquashed = NfsExportOptions(kVol, false);
  EXPECT_EQ(*fs_.ReadFile(File()), Content("10.0.0.1(" + unsquashed + ")"));
  EXPECT_EQ(table_.ClientsOf(Path()).at("10.0.0.1"), SimExportfs::Printed(unsquashed));
  EXPECT_THAT(changes, Contains(HasSubstr("re-exported to 10.0.0.1")));
  got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_FALSE((*got)->params.root_squash);

  // And back: a converged export makes no change.
  changes.clear();
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), &changes).ok());
  EXPECT_EQ(table_.ClientsOf(Path()).at("10.0.0.1"), Printed());
  changes.clear();
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), &changes).ok());
  EXPECT_THAT(changes, IsEmpty());
}

TEST_F(NfsExporterTest, AClientWithoutSquashingMakesTheExportUnsquashedAndIsDrift) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1", "10.0.0.2"}), nullptr).ok());
  table_.Set(Path(), "10.0.0.2", SimExportfs::Printed(NfsExportOptions(kVol, false)));
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_FALSE((*got)->params.root_squash);
  EXPECT_THAT((*got)->drift, Contains("clients differ in root squashing"));
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1", "10.0.0.2"}), nullptr).ok());
  EXPECT_EQ(table_.ClientsOf(Path()).at("10.0.0.2"), Printed());
}

// Issue 22 item 6: a file-pool volume is a directory of a shared file system;
// without subtree checking a client forges handles for the others' files.
TEST_F(NfsExporterTest, ADirectoryInsideAFileSystemIsExportedWithSubtreeChecking) {
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), &changes).ok());
  std::string checked = NfsExportOptions(kVol, true, /*subtree_check=*/true);
  EXPECT_THAT(exec_.CallLines(), Contains("exportfs -o " + checked + " 10.0.0.1:" + Path()));
  EXPECT_EQ(*fs_.ReadFile(File()), Content("10.0.0.1(" + checked + ")"));
  EXPECT_THAT(table_.ClientsOf(Path()).at("10.0.0.1"), Not(HasSubstr("no_subtree_check")));
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_THAT((*got)->drift, IsEmpty());
}

// An export pillar made before (no_subtree_check) is drift: the reconciler's
// next pass re-exports it checked, without a restart.
TEST_F(NfsExporterTest, AnUncheckedExportOfADirectoryIsDriftAndIsReExportedChecked) {
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  std::string unchecked = SimExportfs::Printed(NfsExportOptions(kVol, true, false));
  table_.Set(Path(), "10.0.0.1", unchecked);
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  ASSERT_EQ((*got)->drift.size(), 1u);
  EXPECT_THAT((*got)->drift[0], HasSubstr("not pillar's " + NfsExportOptions(kVol)));
  exec_.ClearCalls();
  std::vector<std::string> changes;
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), &changes).ok());
  EXPECT_THAT(exec_.CallLines(),
              ElementsAre("exportfs -v", "exportfs -o " + Opts() + " 10.0.0.1:" + Path()));
  EXPECT_THAT(changes, Contains(HasSubstr("re-exported to 10.0.0.1")));
  EXPECT_EQ(table_.ClientsOf(Path()).at("10.0.0.1"), Printed());
}

// A file system exported at its own root (a ZFS dataset) holds nothing
// outside the export: no subtree checking, and that is no drift either.
TEST_F(NfsExporterTest, AFileSystemRootIsExportedWithoutSubtreeChecking) {
  ASSERT_TRUE(fs_.WriteFileAtomic(dir_.Sub("mountinfo"),
                                  "22 1 254:1 / / rw - ext4 /dev/vda rw\n"
                                  "40 22 0:45 / " +
                                      Path() + " rw - zfs tank/pvc-1 rw\n")
                  .ok());
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  std::string unchecked = NfsExportOptions(kVol, true, /*subtree_check=*/false);
  EXPECT_THAT(exec_.CallLines(), Contains("exportfs -o " + unchecked + " 10.0.0.1:" + Path()));
  EXPECT_EQ(*fs_.ReadFile(File()), Content("10.0.0.1(" + unchecked + ")"));
  auto got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_THAT((*got)->drift, IsEmpty());
  // The same directory once the dataset is unmounted is a plain directory of
  // the parent file system: checked again.
  ASSERT_TRUE(
      fs_.WriteFileAtomic(dir_.Sub("mountinfo"), "22 1 254:1 / / rw - ext4 /dev/vda rw\n").ok());
  got = exporter_.Get(kVol);
  ASSERT_TRUE(got.ok() && *got);
  EXPECT_EQ((*got)->drift.size(), 1u);
  ASSERT_TRUE(exporter_.Apply(Want({"10.0.0.1"}), nullptr).ok());
  EXPECT_EQ(table_.ClientsOf(Path()).at("10.0.0.1"), Printed());
}

// Issue 26: while etab stays the same file, the table read last is the table:
// a converged apply and its read-back start no process; any change to etab,
// pillar's or anyone's, is read again.
TEST_F(NfsExporterTest, AConvergedApplyStartsNoProcessWhileEtabIsUnchanged) {
  std::string etab = dir_.Sub("etab");
  table_.KeepEtab(etab);
  NfsExporter cached(exec_, fs_, ExportsDir(), dir_.Sub("nfsd"), dir_.Sub("mountinfo"), etab);
  ASSERT_TRUE(cached.Apply(Want({"10.0.0.1"}), nullptr).ok());
  ASSERT_TRUE(cached.Get(kVol).ok());
  exec_.ClearCalls();
  for (int i = 0; i < 3; ++i) {
    std::vector<std::string> changes;
    ASSERT_TRUE(cached.Apply(Want({"10.0.0.1"}), &changes).ok());
    EXPECT_THAT(changes, IsEmpty());
    auto got = cached.Get(kVol);
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ((*got)->allowed_hosts, std::set<std::string>{"10.0.0.1"});
  }
  EXPECT_THAT(exec_.CallLines(), IsEmpty());

  // Someone else's exportfs rewrites etab: read again, and the drift seen.
  table_.Set(Path(), "10.0.0.9", Printed());
  table_.WriteEtab();
  auto got = cached.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->allowed_hosts, (std::set<std::string>{"10.0.0.1", "10.0.0.9"}));
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v"));

  // pillar's own change is never answered from the table read before it.
  exec_.ClearCalls();
  ASSERT_TRUE(cached.Apply(Want({"10.0.0.1"}), nullptr).ok());
  got = cached.Get(kVol);
  ASSERT_TRUE(got.ok() && got->has_value());
  EXPECT_EQ((*got)->allowed_hosts, std::set<std::string>{"10.0.0.1"});
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -u 10.0.0.9:" + Path(), "exportfs -v"));

  // No etab to stamp: exportfs -v on every read.
  std::filesystem::remove(etab);
  exec_.ClearCalls();
  ASSERT_TRUE(cached.Get(kVol).ok());
  ASSERT_TRUE(cached.Get(kVol).ok());
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -v"));
}

// Issue 26: a batch of NFS volumes costs one `exportfs -u` for every removal
// and one `exportfs -a` for every addition, not a process per client; the
// removals run first, the table is read once before and once after, and
// what the table held besides (a hand-made export) stays.
TEST_F(NfsExporterTest, ABatchRunsOneUnexportAndOneExportForAllItsVolumes) {
  ASSERT_TRUE(fs_.MakeDirs(dir_.Sub("tank/pvc-3")).ok());
  table_.ServeFiles(ExportsDir());
  table_.Set(Path(), "10.0.0.9", Printed());  // to remove
  table_.Set(Path("tank/pvc-2"), "10.0.0.2",  // options differ
             SimExportfs::Printed(NfsExportOptions("tank/pvc-2", false)));
  table_.Set(dir_.Sub("by-hand"), "10.0.0.7", "sync,rw,fsid=7");  // not pillar's

  KernelExport one = Want({"10.0.0.1"});
  KernelExport two = Want({"10.0.0.2", "10.0.0.3"});
  two.agent_volume_id = "tank/pvc-2";
  two.target_id = two.backing = Path("tank/pvc-2");
  KernelExport three = Want({}, /*acl=*/false);
  three.agent_volume_id = "tank/pvc-3";
  three.target_id = three.backing = Path("tank/pvc-3");
  std::vector<std::vector<std::string>> changes(3);
  std::vector<ApplyItem> items{
      {&one, &changes[0], {}}, {&two, &changes[1], {}}, {&three, &changes[2], {}}};
  exporter_.ApplyMany(items);
  for (const auto& item : items) EXPECT_TRUE(item.status.ok()) << item.status.ToString();

  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v", "exportfs -u 10.0.0.9:" + Path(),
                                             "exportfs -a", "exportfs -v"));
  EXPECT_EQ(table_.ClientsOf(Path()),
            (std::map<std::string, std::string>{{"10.0.0.1", Printed()}}));
  EXPECT_EQ(table_.ClientsOf(Path("tank/pvc-2")),
            (std::map<std::string, std::string>{{"10.0.0.2", PrintedOf("tank/pvc-2")},
                                                {"10.0.0.3", PrintedOf("tank/pvc-2")}}));
  EXPECT_EQ(table_.ClientsOf(Path("tank/pvc-3")),
            (std::map<std::string, std::string>{{"*", PrintedOf("tank/pvc-3")}}));
  EXPECT_EQ(table_.ClientsOf(dir_.Sub("by-hand")).size(), 1u);
  EXPECT_THAT(changes[0], ElementsAre("nfs " + Path() + ": wrote " + File(),
                                      "nfs " + Path() + ": unexported from 10.0.0.9",
                                      "nfs " + Path() + ": exported to 10.0.0.1"));
  ASSERT_EQ(changes[1].size(), 3u);
  EXPECT_THAT(changes[1][1], HasSubstr("re-exported to 10.0.0.2 (options were"));
  EXPECT_EQ(changes[1][2], "nfs " + Path("tank/pvc-2") + ": exported to 10.0.0.3");
  EXPECT_THAT(changes[2], ElementsAre(HasSubstr("wrote"), HasSubstr("exported to *")));

  // Converged: the table is read and nothing runs.
  exec_.ClearCalls();
  for (auto& c : changes) c.clear();
  exporter_.ApplyMany(items);
  for (const auto& item : items) EXPECT_TRUE(item.status.ok()) << item.status.ToString();
  EXPECT_THAT(exec_.CallLines(), ElementsAre("exportfs -v"));
  for (const auto& c : changes) EXPECT_THAT(c, IsEmpty());
  EXPECT_EQ(table_.runs_of_a, 1);
}

// One volume the batch cannot converge fails alone, naming what the tool
// said; a refused one (no directory) is refused before anything runs for it,
// and the others converge.
TEST_F(NfsExporterTest, AVolumeABatchCouldNotConvergeFailsAloneNamingWhatTheToolSaid) {
  table_.ServeFiles(ExportsDir());
  table_.Set(Path(), "10.0.0.9", Printed());
  KernelExport narrowed = Want({});
  KernelExport added = Want({"10.0.0.2"});
  added.agent_volume_id = "tank/pvc-2";
  added.target_id = added.backing = Path("tank/pvc-2");
  KernelExport missing = Want({"10.0.0.3"});
  missing.agent_volume_id = "tank/pvc-404";
  missing.target_id = missing.backing = Path("tank/pvc-404");
  // exportfs -a fails and exports nothing.
  exec_.OnOutput({"exportfs", "-a"}, "", 1, "exportfs: /etc/exports:3: syntax error\n");
  std::vector<std::vector<std::string>> changes(3);
  std::vector<ApplyItem> items{
      {&narrowed, &changes[0], {}}, {&added, &changes[1], {}}, {&missing, &changes[2], {}}};
  exporter_.ApplyMany(items);
  EXPECT_TRUE(items[0].status.ok()) << items[0].status.ToString();
  EXPECT_THAT(table_.ClientsOf(Path()), IsEmpty());
  EXPECT_EQ(items[1].status.code(), Code::kInternal);
  EXPECT_THAT(items[1].status.message(),
              AllOf(HasSubstr("tank/pvc-2"), HasSubstr("10.0.0.2 is not exported"),
                    HasSubstr("'exportfs -a' exited 1: exportfs: /etc/exports:3: syntax error")));
  EXPECT_EQ(items[2].status.code(), Code::kFailedPrecondition);
  EXPECT_FALSE(fs_.Exists(File("tank:2fpvc-404")));
}

}  // namespace
}  // namespace pillar::agent
