#include "store/kube/crd_install.h"

#include <thread>

#include "api/crd.h"
#include "common/log.h"

namespace pillar::store {
namespace {

constexpr char kCrdPath[] = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

bool Established(const nlohmann::json& crd) {
  auto status = crd.find("status");
  if (status == crd.end() || !status->is_object()) return false;
  auto conditions = status->find("conditions");
  if (conditions == status->end() || !conditions->is_array()) return false;
  for (const auto& c : *conditions) {
    if (c.is_object() && c.value("type", "") == "Established" && c.value("status", "") == "True") {
      return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<CrdInstallResult> EnsureCrds(kube::Rest& rest, std::chrono::milliseconds timeout,
                                      std::chrono::milliseconds poll) {
  CrdInstallResult result;
  std::vector<std::string> names;
  for (const nlohmann::json& crd : api::CustomResourceDefinitions()) {
    const std::string name = crd["metadata"]["name"].get<std::string>();
    names.push_back(name);
    auto got = rest.Call("GET", std::string(kCrdPath) + "/" + name);
    if (got.ok()) {
      result.present.push_back(name);
      continue;
    }
    if (got.status().code() != Code::kNotFound) {
      return got.status().Annotate("read CustomResourceDefinition " + name);
    }
    auto created = rest.Call("POST", kCrdPath, crd);
    if (!created.ok() && created.status().code() != Code::kAlreadyExists) {
      return created.status().Annotate("create CustomResourceDefinition " + name);
    }
    if (created.ok()) {
      result.created.push_back(name);
      log::Info("installed CustomResourceDefinition", {{"crd", name}});
    } else {
      result.present.push_back(name);  // another replica created it first
    }
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (const std::string& name : names) {
    while (true) {
      auto got = rest.Call("GET", std::string(kCrdPath) + "/" + name);
      if (!got.ok()) return got.status().Annotate("read CustomResourceDefinition " + name);
      if (Established(*got)) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        return Unavailable("CustomResourceDefinition " + name + " is not Established after " +
                           std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(poll);
    }
  }
  return result;
}

}  // namespace pillar::store
