#include "store/store.h"

#include <cstdint>
#include <utility>

namespace pillar::store {
namespace {

bool IsControl(char c) {
  auto u = static_cast<unsigned char>(c);
  return u < 0x20 || u == 0x7f;
}

// Names and labels end up in JSON (event rows, the Kubernetes backend).
bool IsUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xe  ? 3
                 : (c >> 3) == 0x1e ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0x7f >> len);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += len;
  }
  return true;
}

Status ValidateText(std::string_view field, std::string_view value, size_t max_len) {
  if (value.empty()) return InvalidArgument(std::string(field) + " must not be empty");
  if (value.size() > max_len) {
    return InvalidArgument(std::string(field) + " is " + std::to_string(value.size()) +
                           " bytes, longer than " + std::to_string(max_len));
  }
  for (char c : value) {
    if (c == '\0' || IsControl(c)) {
      return InvalidArgument(std::string(field) + " contains a NUL or control character");
    }
  }
  if (!IsUtf8(value)) return InvalidArgument(std::string(field) + " is not valid UTF-8");
  return Status::Ok();
}

StatusOr<std::string> GetString(const nlohmann::json& j, const char* key, bool required) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) return InvalidArgument(std::string(key) + " is missing");
    return std::string();
  }
  if (!it->is_string()) return InvalidArgument(std::string(key) + " is not a string");
  return it->get<std::string>();
}

StatusOr<int64_t> GetInt(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return InvalidArgument(std::string(key) + " is missing");
  if (!it->is_number_integer()) return InvalidArgument(std::string(key) + " is not an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX) {
    return InvalidArgument(std::string(key) + " is out of range");
  }
  return it->get<int64_t>();
}

}  // namespace

const char* EventTypeName(EventType type) {
  switch (type) {
    case EventType::kAdded:
      return "ADDED";
    case EventType::kModified:
      return "MODIFIED";
    case EventType::kDeleted:
      return "DELETED";
  }
  return "UNKNOWN";
}

Status ValidateKind(std::string_view kind) {
  if (kind.empty()) return InvalidArgument("kind must not be empty");
  if (kind.size() > 63) return InvalidArgument("kind is longer than 63 bytes");
  if (kind[0] < 'A' || kind[0] > 'Z') {
    return InvalidArgument("kind must start with an upper-case letter");
  }
  for (char c : kind) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) return InvalidArgument("kind may contain only letters and digits");
  }
  return Status::Ok();
}

Status ValidateName(std::string_view field, std::string_view name) {
  RETURN_IF_ERROR(ValidateText(field, name, 253));
  if (name.find('/') != std::string_view::npos) {
    return InvalidArgument(std::string(field) + " must not contain '/'");
  }
  // Would be a path segment in the etcd and Kubernetes backends.
  if (name == "." || name == "..") {
    return InvalidArgument(std::string(field) + " must not be \".\" or \"..\"");
  }
  return Status::Ok();
}

Status ValidateLabels(const Labels& labels) {
  for (const auto& [key, value] : labels) {
    RETURN_IF_ERROR(ValidateText("label key", key, 317));
    if (value.size() > 253) {
      return InvalidArgument("label " + key + " has a value longer than 253 bytes");
    }
    for (char c : value) {
      if (c == '\0' || IsControl(c)) {
        return InvalidArgument("label " + key + " has a NUL or control character in its value");
      }
    }
    if (!IsUtf8(value)) return InvalidArgument("label " + key + " value is not valid UTF-8");
  }
  return Status::Ok();
}

Status ValidateObject(const Object& object) {
  RETURN_IF_ERROR(ValidateKind(object.kind));
  RETURN_IF_ERROR(ValidateName("name", object.name));
  RETURN_IF_ERROR(ValidateLabels(object.labels));
  if (!object.spec.is_object()) return InvalidArgument("spec must be a JSON object");
  if (!object.status.is_object()) return InvalidArgument("status must be a JSON object");
  return Status::Ok();
}

std::string Describe(const std::string& kind, const std::string& name) { return kind + "/" + name; }

bool MatchesSelector(const Labels& labels, const LabelSelector& selector) {
  for (const auto& [key, value] : selector) {
    auto it = labels.find(key);
    if (it == labels.end() || it->second != value) return false;
  }
  return true;
}

nlohmann::json ToJson(const Object& object) {
  nlohmann::json meta = {
      {"name", object.name},
      {"uid", object.uid},
      {"resourceVersion", object.resource_version},
      {"generation", object.generation},
      {"creationTimestamp", object.creation_timestamp},
  };
  if (object.deletion_timestamp) meta["deletionTimestamp"] = *object.deletion_timestamp;
  if (!object.labels.empty()) meta["labels"] = object.labels;
  return {
      {"kind", object.kind}, {"metadata", meta}, {"spec", object.spec}, {"status", object.status}};
}

StatusOr<Object> FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("object is not a JSON object");
  auto meta = j.find("metadata");
  if (meta == j.end() || !meta->is_object()) return InvalidArgument("metadata is missing");
  Object o;
  ASSIGN_OR_RETURN(o.kind, GetString(j, "kind", true));
  ASSIGN_OR_RETURN(o.name, GetString(*meta, "name", true));
  ASSIGN_OR_RETURN(o.uid, GetString(*meta, "uid", false));
  ASSIGN_OR_RETURN(o.resource_version, GetString(*meta, "resourceVersion", false));
  if (meta->contains("generation")) {
    ASSIGN_OR_RETURN(o.generation, GetInt(*meta, "generation"));
  }
  ASSIGN_OR_RETURN(o.creation_timestamp, GetString(*meta, "creationTimestamp", false));
  ASSIGN_OR_RETURN(std::string deletion, GetString(*meta, "deletionTimestamp", false));
  if (!deletion.empty()) o.deletion_timestamp = std::move(deletion);
  if (auto labels = meta->find("labels"); labels != meta->end() && !labels->is_null()) {
    if (!labels->is_object()) return InvalidArgument("labels is not an object");
    for (const auto& [key, value] : labels->items()) {
      if (!value.is_string()) return InvalidArgument("label " + key + " is not a string");
      o.labels[key] = value.get<std::string>();
    }
  }
  for (auto [key, field] : {std::pair{"spec", &o.spec}, std::pair{"status", &o.status}}) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_object()) return InvalidArgument(std::string(key) + " is not an object");
    *field = *it;
  }
  return o;
}

StatusOr<std::string> DumpJson(const nlohmann::json& j, std::string_view what) {
  try {
    return j.dump();
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument(std::string(what) + " cannot be serialized: " + e.what());
  }
}

}  // namespace pillar::store
