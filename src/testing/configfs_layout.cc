#include "testing/configfs_layout.h"

namespace pillar::testing::configfs_layout {

bool AllDigits(const std::string& s) {
  if (s.empty() || s.size() > 10) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

bool NumberIn(const std::string& s, unsigned long lo, unsigned long hi) {
  if (!AllDigits(s)) return false;
  unsigned long v = std::stoul(s);
  return v >= lo && v <= hi;
}

bool PrefixedNumber(const std::string& s, const std::string& prefix, unsigned long hi) {
  return s.compare(0, prefix.size(), prefix) == 0 && NumberIn(s.substr(prefix.size()), 0, hi);
}

bool AnyQualifiedName(const std::string& s) { return !s.empty() && s.size() <= 223; }
bool AnyName(const std::string& s) { return !s.empty() && s.size() <= 255; }

const KindSpec& Spec(Kind kind) {
  static const Layout kLayout = [] {
    Layout m;
    m[Kind::kNone] = {};
    m[Kind::kStatistics] = {};
    m[Kind::kRoot] = {{}, {{"nvmet", Kind::kNvmet}, {"target", Kind::kTarget}}};
    AddNvmetLayout(m);
    AddLioLayout(m);
    return m;
  }();
  auto it = kLayout.find(kind);
  return it == kLayout.end() ? kLayout.at(Kind::kNone) : it->second;
}

const AttrSpec* FindAttr(Kind kind, const std::string& name) {
  for (const auto& a : Spec(kind).attrs) {
    if (name == a.name) return &a;
  }
  return nullptr;
}

std::optional<Kind> DefaultGroup(Kind parent, const std::string& name) {
  for (const auto& [n, k] : Spec(parent).defaults) {
    if (name == n) return k;
  }
  return std::nullopt;
}

}  // namespace pillar::testing::configfs_layout
