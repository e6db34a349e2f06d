#include "agent/credentials/credential_store.h"

#include <nlohmann/json.hpp>

#include "agent/exporters/exporter.h"
#include "common/validate.h"

namespace pillar::agent {

CredentialStore::CredentialStore(Fs& fs, std::string root) : fs_(fs), root_(std::move(root)) {}

std::string CredentialStore::PathOf(const std::string& agent_volume_id) const {
  // TargetName("x", id) is "x:<escaped>"; the escaped part has no '/'.
  return JoinPath(root_, TargetName("x", agent_volume_id).substr(2) + ".json");
}

StatusOr<bool> CredentialStore::Put(const std::string& agent_volume_id, Protocol protocol,
                                    const Credentials& c) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", agent_volume_id));
  ASSIGN_OR_RETURN(auto held, Get(agent_volume_id, protocol));
  if (held && *held == c) return false;
  nlohmann::json j = {{"protocol", ProtocolName(protocol)},
                      {"username", c.username},
                      {"secret", c.secret},
                      {"mutualUsername", c.mutual_username},
                      {"mutualSecret", c.mutual_secret}};
  std::lock_guard<std::mutex> lock(mu_);
  std::string path = PathOf(agent_volume_id);
  // WriteFileAtomic creates the file 0600 before any byte is written.
  Status s = fs_.MakeDirs(root_);
  if (s.ok()) s = fs_.WriteFileAtomic(path, j.dump() + "\n");
  if (!s.ok()) {
    return Internal("credentials of volume " + agent_volume_id + " cannot be written to " + path +
                    ": " + s.message());
  }
  return true;
}

StatusOr<std::optional<Credentials>> CredentialStore::Get(const std::string& agent_volume_id,
                                                          Protocol protocol) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", agent_volume_id));
  std::lock_guard<std::mutex> lock(mu_);
  std::string path = PathOf(agent_volume_id);
  auto text = fs_.ReadFile(path);
  if (!text.ok()) {
    if (text.status().code() == Code::kNotFound) return std::optional<Credentials>();
    return Internal("credentials file " + path + " cannot be read: " + text.status().message());
  }
  auto corrupt = [&](const std::string& why) {
    return Internal("credentials file " + path + " is corrupt: " + why);
  };
  nlohmann::json j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return corrupt("not a JSON object");
  Credentials c;
  for (auto [key, field] : {std::pair<const char*, std::string*>{"username", &c.username},
                            {"secret", &c.secret},
                            {"mutualUsername", &c.mutual_username},
                            {"mutualSecret", &c.mutual_secret}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string()) return corrupt(std::string(key) + " is not a string");
    *field = it->get<std::string>();
  }
  auto p = j.find("protocol");
  if (p == j.end() || !p->is_string() || p->get<std::string>() != ProtocolName(protocol)) {
    return corrupt(std::string("it is not for ") + ProtocolName(protocol));
  }
  return std::optional<Credentials>(std::move(c));
}

Status CredentialStore::Remove(const std::string& agent_volume_id) {
  RETURN_IF_ERROR(validate::AgentVolumeId("agent volume id", agent_volume_id));
  std::lock_guard<std::mutex> lock(mu_);
  return fs_.Unlink(PathOf(agent_volume_id));
}

}  // namespace pillar::agent
