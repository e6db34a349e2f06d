// The CustomResourceDefinitions of pillar's kinds, built from the one API
// definition in api/types.h: what the schemas refuse is what the design
// forbids (an exportSpec without bindAddress, a port outside 0-65535...).
// deploy/crds/*.yaml is this output (`pillarctl crds`), kept in the repository
// and checked against it by a test; the controller installs the same objects.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace pillar::api {

struct ResourceNames {
  std::string kind;      // "PillarVolumeState"
  std::string plural;    // "pillarvolumestates"
  std::string singular;  // "pillarvolumestate"
  std::vector<std::string> short_names;
};

// The resource names of every kind, in a stable order.
const std::vector<ResourceNames>& AllResources();
// nullptr when `kind` is not one of pillar's.
const ResourceNames* FindResource(const std::string& kind);

// apiextensions.k8s.io/v1 CustomResourceDefinition objects, one per kind.
std::vector<nlohmann::json> CustomResourceDefinitions();

// The YAML document of one CRD, as kept in deploy/crds/.
std::string CrdYaml(const nlohmann::json& crd);

}  // namespace pillar::api
