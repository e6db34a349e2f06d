// The store of recorded intent: Kubernetes-style objects, every write a
// compare-and-swap on resourceVersion, and a watch from any retained
// resourceVersion. A resourceVersion is an opaque string, as Kubernetes says:
// compare two for equality only, never for order. Backends (SQLite, the
// Kubernetes API server) implement Store and pass the conformance suite in
// tests/store/store_conformance.h.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace pillar::store {

using Labels = std::map<std::string, std::string>;

struct Object {
  std::string kind;
  std::string name;
  // Set by the store. uid is new on every Create (one lifecycle);
  // resource_version changes on every write of the object ("" = none yet).
  std::string uid;
  std::string resource_version;
  int64_t generation = 0;          // 1 at Create, +1 on every spec change
  std::string creation_timestamp;  // RFC 3339 UTC
  // Set by the store only (Kubernetes: a delete waiting on finalizers); Create
  // refuses it and Update never writes it.
  std::optional<std::string> deletion_timestamp;
  Labels labels;
  nlohmann::json spec = nlohmann::json::object();
  nlohmann::json status = nlohmann::json::object();

  bool operator==(const Object&) const = default;
};

// Equality-based: an object matches when it has every key with that value.
using LabelSelector = Labels;

struct ListResult {
  std::vector<Object> items;     // sorted by name
  std::string resource_version;  // of this snapshot: Watch from it
};

struct Preconditions {
  std::optional<std::string> uid;
  std::optional<std::string> resource_version;
};

enum class EventType { kAdded, kModified, kDeleted };
const char* EventTypeName(EventType type);

struct Event {
  EventType type = EventType::kAdded;
  // The object after the write; for kDeleted its last state, with
  // resource_version set to that of the delete (as Kubernetes does).
  Object object;
};

using EventHandler = std::function<void(const Event&)>;
// Called at most once, after which the watch delivers nothing more:
// OUT_OF_RANGE when the watch fell behind the retained history (relist and
// watch again), another code when the backend failed.
using ErrorHandler = std::function<void(const Status&)>;

// Stops the watch on destruction; no handler runs after the destructor
// returns (unless it is called from inside a handler, which is allowed).
class WatchHandle {
 public:
  virtual ~WatchHandle() = default;
};

// Names are opaque strings of 1..253 bytes without NUL, '/', or other
// control characters, and never "." or ".."; kinds are [A-Z][A-Za-z0-9]*
// up to 63 bytes. Bad input is INVALID_ARGUMENT naming the field.
class Store {
 public:
  virtual ~Store() = default;

  // NOT_FOUND when absent.
  virtual StatusOr<Object> Get(const std::string& kind, const std::string& name) = 0;

  // Objects of `kind` (matching `selector` when given), one consistent snapshot.
  virtual StatusOr<ListResult> List(const std::string& kind,
                                    const std::optional<LabelSelector>& selector = {}) = 0;

  // Records spec, labels and status; sets uid, resource_version, generation=1
  // and creation_timestamp. resource_version must be empty and no
  // deletion_timestamp may be set. ALREADY_EXISTS when the name is taken.
  // Nothing is left behind when it fails.
  virtual StatusOr<Object> Create(const Object& object) = 0;

  // Compare-and-swap on resource_version (required): a stale version is
  // ABORTED "conflict" naming kind/name and both versions; a uid other than
  // the stored one (when set) is ABORTED too. Writes spec and labels, never
  // status. generation+1 only when spec changed. An
  // update that changes nothing writes nothing and returns the stored object,
  // so a level-triggered loop does not wake itself up.
  virtual StatusOr<Object> Update(const Object& object) = 0;

  // Like Update, but writes only status.
  virtual StatusOr<Object> UpdateStatus(const Object& object) = 0;

  // UpdateStatus of `next`, which the caller made from `base`: the object as
  // it last read it (same kind, name, uid and resourceVersion). A store may
  // then write what differs between the two without reading the object
  // again; it is still a compare-and-swap on that resourceVersion (a base
  // that is no longer current is ABORTED "conflict"). The default is
  // UpdateStatus(next).
  virtual StatusOr<Object> UpdateStatusFrom(const Object& base, const Object& next) {
    (void)base;
    return UpdateStatus(next);
  }

  // NOT_FOUND when absent, ABORTED when a precondition does not hold.
  virtual Status Delete(const std::string& kind, const std::string& name,
                        const Preconditions& preconditions = {}) = 0;

  // Delivers, in order on a background thread, every event of `kind` after
  // `from_resource_version` (a List's, or an object's or event's), then every
  // later one, until the handle is destroyed. Sees writes of other processes
  // on the same store. A version older than the retained history is
  // OUT_OF_RANGE "compacted", from Watch itself or through on_error (a
  // backend may only learn it from the stream): relist and watch from the
  // list's version. The store must outlive the handle's use of the handlers
  // only; handlers must not throw.
  virtual StatusOr<std::unique_ptr<WatchHandle>> Watch(const std::string& kind,
                                                       const std::string& from_resource_version,
                                                       EventHandler on_event,
                                                       ErrorHandler on_error = nullptr) = 0;
};

// Input checks shared by the backends.
Status ValidateKind(std::string_view kind);
Status ValidateName(std::string_view field, std::string_view name);
Status ValidateLabels(const Labels& labels);
// Kind, name, labels, and spec/status as JSON objects.
Status ValidateObject(const Object& object);

// "PillarVolumeState/pvc-1", for messages.
std::string Describe(const std::string& kind, const std::string& name);

bool MatchesSelector(const Labels& labels, const LabelSelector& selector);

// The Kubernetes layout: {kind, metadata{name, uid, resourceVersion (a
// string, as Kubernetes writes it), generation, creationTimestamp,
// deletionTimestamp, labels}, spec, status}. Used for event rows and by
// pillarctl; FromJson is INVALID_ARGUMENT on a malformed document.
nlohmann::json ToJson(const Object& object);
StatusOr<Object> FromJson(const nlohmann::json& j);

// Serializes JSON without throwing: INVALID_ARGUMENT naming `what` when a
// string in it is not valid UTF-8.
StatusOr<std::string> DumpJson(const nlohmann::json& j, std::string_view what);

}  // namespace pillar::store
