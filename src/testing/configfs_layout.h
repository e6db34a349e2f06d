// The configfs layouts ConfigfsSim simulates, as tables: for each kind of
// group (the kernel's config_item_type) its attributes with their default
// values, its default sub-groups, the child groups a mkdir may make in it and
// the kind of item a link in it must point at. The nvmet table is in
// nvmet_layout.cc, the LIO (target_core + iSCSI fabric) one in lio_layout.cc.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace pillar::testing::configfs_layout {

enum class Kind {
  kNone,
  kRoot,
  kStatistics,  // statistics groups: present, contents not simulated
  // nvmet
  kNvmet,
  kNvmetSubsystems,
  kNvmetSubsys,
  kNvmetNamespaces,
  kNvmetNs,
  kNvmetAllowedHosts,
  kNvmetPassthru,
  kNvmetPorts,
  kNvmetPort,
  kNvmetPortSubsystems,
  kNvmetReferrals,
  kNvmetReferral,
  kNvmetAnaGroups,
  kNvmetAnaGroup,
  kNvmetHosts,
  kNvmetHost,
  // LIO core
  kTarget,
  kCore,
  kCoreAlua,
  kCoreLuGps,
  kCoreLuGp,
  kHba,
  kDevice,
  kDevAttrib,
  kDevPr,
  kDevAlua,
  kDevTgPtGp,
  kDevWwn,
  // LIO iSCSI fabric
  kIscsi,
  kIscsiDiscoveryAuth,
  kIscsiWwn,
  kTpg,
  kTpgAcls,
  kTpgAttrib,
  kTpgAuth,
  kTpgLun,
  kTpgNp,
  kTpgParam,
  kLun,
  kNp,
  kNodeAcl,
  kNaclAttrib,
  kNaclAuth,
  kNaclParam,
  kMappedLun,
};

enum class Access { kRw, kRo, kWo };

struct AttrSpec {
  const char* name;
  const char* value;  // "{name}", "{serial}", "{uuid}" are filled in at mkdir
  Access access = Access::kRw;
};

using NameCheck = bool (*)(const std::string&);

struct KindSpec {
  std::vector<AttrSpec> attrs;
  std::vector<std::pair<const char*, Kind>> defaults;  // default groups
  Kind made = Kind::kNone;        // kind of user-made child groups (make_group)
  NameCheck made_name = nullptr;  // the kernel's check of a new group's name
  const char* made_rule = "";
  Kind link_to = Kind::kNone;  // allow_link: the kind a link here must point at
};

using Layout = std::map<Kind, KindSpec>;

// Each adds its module's kinds, from the module's root group down.
void AddNvmetLayout(Layout& layout);  // root group "nvmet"
void AddLioLayout(Layout& layout);    // root group "target"

// The spec of a kind (kNone's, empty, for a kind no table has).
const KindSpec& Spec(Kind kind);
const AttrSpec* FindAttr(Kind kind, const std::string& name);
// The kind of `name` when it is a default group of `parent`.
std::optional<Kind> DefaultGroup(Kind parent, const std::string& name);

// Name checks the tables and the simulator's rules share.
bool AllDigits(const std::string& s);  // 1-10 decimal digits
bool NumberIn(const std::string& s, unsigned long lo, unsigned long hi);
bool PrefixedNumber(const std::string& s, const std::string& prefix, unsigned long hi);
bool AnyQualifiedName(const std::string& s);  // an NQN or IQN: 1-223 bytes
bool AnyName(const std::string& s);           // 1-255 bytes

}  // namespace pillar::testing::configfs_layout
