#include "store/kube/kube_store.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "api/crd.h"
#include "api/types.h"
#include "common/log.h"

namespace pillar::store {
namespace {

std::string PercentEncode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) != 0 || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// A JSON pointer token (RFC 6901): '~' is "~0", '/' is "~1".
std::string JsonPointerToken(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

bool IsDnsLabelChar(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// Kubernetes label rules: a key is [prefix/]name, name <= 63 of
// [A-Za-z0-9_.-] starting and ending alphanumeric; a value the same or empty.
bool IsLabelName(std::string_view s, bool allow_empty) {
  if (s.empty()) return allow_empty;
  if (s.size() > 63) return false;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(s.front()) || !alnum(s.back())) return false;
  return std::all_of(s.begin(), s.end(),
                     [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

Status ValidateKubeLabels(const Labels& labels) {
  for (const auto& [key, value] : labels) {
    std::string_view name = key;
    if (size_t slash = key.find('/'); slash != std::string::npos) {
      RETURN_IF_ERROR(ValidateKubeName("label key prefix", key.substr(0, slash)));
      name = std::string_view(key).substr(slash + 1);
    }
    if (!IsLabelName(name, false)) {
      return InvalidArgument("label key \"" + key +
                             "\" is not a Kubernetes label key (<= 63 of [A-Za-z0-9_.-], "
                             "alphanumeric at both ends)");
    }
    if (!IsLabelName(value, true)) {
      return InvalidArgument("label " + key + " value \"" + value +
                             "\" is not a Kubernetes label value");
    }
  }
  return Status::Ok();
}

Status ValidateForKube(const Object& o) {
  RETURN_IF_ERROR(ValidateObject(o));
  RETURN_IF_ERROR(ValidateKubeName("name", o.name));
  RETURN_IF_ERROR(ValidateKubeLabels(o.labels));
  // Refused here, whole, rather than half-sent.
  RETURN_IF_ERROR(DumpJson(o.spec, Describe(o.kind, o.name) + " spec").status());
  RETURN_IF_ERROR(DumpJson(o.status, Describe(o.kind, o.name) + " status").status());
  return Status::Ok();
}

// A 404 names the object the way the other backends do.
Status Named(const Status& s, const std::string& kind, const std::string& name,
             const std::string& verb) {
  if (s.code() == Code::kNotFound) return NotFound(Describe(kind, name) + " not found");
  if (s.code() == Code::kAlreadyExists) {
    return AlreadyExists(Describe(kind, name) + " already exists");
  }
  return s.Annotate(verb + " " + Describe(kind, name));
}

std::optional<EventType> EventTypeOf(const std::string& type) {
  if (type == "ADDED") return EventType::kAdded;
  if (type == "MODIFIED") return EventType::kModified;
  if (type == "DELETED") return EventType::kDeleted;
  return std::nullopt;
}

}  // namespace

KubeStoreOptions PillarKubeOptions() {
  KubeStoreOptions o;
  for (const char* kind : {api::kKindVolume, api::kKindAgent, api::kKindNode, api::kKindSnapshot}) {
    const api::ResourceNames* names = api::FindResource(kind);
    o.kinds[kind] = {api::kGroup, api::kVersion, names != nullptr ? names->plural : ""};
  }
  return o;
}

Status ValidateKubeName(std::string_view field, std::string_view name) {
  bool ok = !name.empty() && name.size() <= 253;
  size_t start = 0;
  while (ok && start <= name.size()) {
    size_t dot = name.find('.', start);
    std::string_view label = name.substr(start, dot == std::string_view::npos ? dot : dot - start);
    ok = !label.empty() && IsDnsLabelChar(label.front()) && IsDnsLabelChar(label.back()) &&
         std::all_of(label.begin(), label.end(),
                     [](char c) { return IsDnsLabelChar(c) || c == '-'; });
    if (dot == std::string_view::npos) break;
    start = dot + 1;
  }
  if (!ok) {
    return InvalidArgument(std::string(field) + " \"" + std::string(name) +
                           "\" is not a Kubernetes object name (a DNS-1123 subdomain: lowercase "
                           "letters, digits, '-' and '.', alphanumeric at each end, <= 253)");
  }
  return Status::Ok();
}

StatusOr<Object> FromKubeJson(const std::string& kind, const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument(kind + " from the API server is not an object");
  nlohmann::json doc = j;
  doc["kind"] = kind;  // what the resource is, whatever the body says
  auto meta = doc.find("metadata");
  if (meta == doc.end() || !meta->is_object()) {
    return InvalidArgument(kind + " from the API server has no metadata");
  }
  // Kubernetes drops empty maps; Kubernetes' extra metadata is not ours.
  nlohmann::json m = nlohmann::json::object();
  for (const char* key : {"name", "uid", "resourceVersion", "generation", "creationTimestamp",
                          "deletionTimestamp", "labels"}) {
    if (auto it = meta->find(key); it != meta->end()) m[key] = *it;
  }
  doc["metadata"] = m;
  auto o = FromJson(doc);
  if (!o.ok()) {
    std::string name = m.value("name", nlohmann::json("?")).is_string()
                           ? m.value("name", std::string("?"))
                           : std::string("?");
    return InvalidArgument("malformed " + Describe(kind, name) +
                           " from the API server: " + o.status().message());
  }
  if (o->resource_version.empty() || o->uid.empty()) {
    return InvalidArgument("malformed " + Describe(kind, o->name) +
                           " from the API server: no uid or resourceVersion");
  }
  return o;
}

KubeStore::KubeStore(std::shared_ptr<kube::Client> client, KubeStoreOptions options)
    : client_(std::move(client)), options_(std::move(options)) {}

StatusOr<std::unique_ptr<KubeStore>> KubeStore::Open(const std::string& kubeconfig,
                                                     KubeStoreOptions options) {
  ASSIGN_OR_RETURN(kube::Config config, kube::LoadConfig(kubeconfig));
  ASSIGN_OR_RETURN(std::unique_ptr<kube::Client> client, kube::Client::Create(std::move(config)));
  return std::make_unique<KubeStore>(std::shared_ptr<kube::Client>(std::move(client)),
                                     std::move(options));
}

StatusOr<const KubeResource*> KubeStore::Resource(const std::string& kind) const {
  RETURN_IF_ERROR(ValidateKind(kind));
  auto it = options_.kinds.find(kind);
  if (it == options_.kinds.end() || it->second.plural.empty()) {
    return InvalidArgument("kind " + kind + " has no Kubernetes resource in this store");
  }
  return &it->second;
}

StatusOr<std::string> KubeStore::CollectionPath(const std::string& kind) const {
  ASSIGN_OR_RETURN(const KubeResource* r, Resource(kind));
  return "/apis/" + r->group + "/" + r->version + "/" + r->plural;
}

StatusOr<std::string> KubeStore::ObjectPath(const std::string& kind,
                                            const std::string& name) const {
  ASSIGN_OR_RETURN(std::string collection, CollectionPath(kind));
  RETURN_IF_ERROR(ValidateName("name", name));
  RETURN_IF_ERROR(ValidateKubeName("name", name));
  return collection + "/" + name;
}

StatusOr<Object> KubeStore::Get(const std::string& kind, const std::string& name) {
  ASSIGN_OR_RETURN(std::string path, ObjectPath(kind, name));
  auto got = client_->Call("GET", path);
  if (!got.ok()) return Named(got.status(), kind, name, "get");
  return FromKubeJson(kind, *got);
}

StatusOr<ListResult> KubeStore::List(const std::string& kind,
                                     const std::optional<LabelSelector>& selector) {
  ASSIGN_OR_RETURN(std::string path, CollectionPath(kind));
  std::string query = "?limit=" + std::to_string(std::max(1, options_.page_size));
  if (selector && !selector->empty()) {
    RETURN_IF_ERROR(ValidateLabels(*selector).Annotate("label selector"));
    RETURN_IF_ERROR(ValidateKubeLabels(*selector).Annotate("label selector"));
    std::string sel;
    for (const auto& [k, v] : *selector) sel += (sel.empty() ? "" : ",") + k + "=" + v;
    query += "&labelSelector=" + PercentEncode(sel);
  } else if (selector) {
    RETURN_IF_ERROR(ValidateLabels(*selector).Annotate("label selector"));
  }
  ListResult result;
  std::string next;
  do {
    std::string page = path + query + (next.empty() ? "" : "&continue=" + PercentEncode(next));
    auto got = client_->Call("GET", page);
    if (!got.ok()) return got.status().Annotate("list " + kind);
    const nlohmann::json& body = *got;
    auto meta = body.find("metadata");
    auto items = body.find("items");
    if (meta == body.end() || !meta->is_object() || items == body.end() ||
        !(items->is_array() || items->is_null())) {
      return InvalidArgument("list " + kind + ": the API server's answer has no items/metadata");
    }
    if (result.resource_version.empty()) {
      // Every page is of the first page's snapshot.
      result.resource_version = meta->value("resourceVersion", std::string());
    }
    next = meta->value("continue", std::string());
    if (items->is_array()) {
      for (const auto& item : *items) {
        auto o = FromKubeJson(kind, item);
        if (!o.ok()) {
          log::Error("store: skipping an object the API server sent malformed",
                     {{"kind", kind}, {"error", o.status().ToString()}});
          continue;
        }
        result.items.push_back(std::move(o).value());
      }
    }
  } while (!next.empty());
  if (result.resource_version.empty()) {
    return InvalidArgument("list " + kind + ": the API server's answer has no resourceVersion");
  }
  std::sort(result.items.begin(), result.items.end(),
            [](const Object& a, const Object& b) { return a.name < b.name; });
  return result;
}

StatusOr<Object> KubeStore::Create(const Object& in) {
  RETURN_IF_ERROR(ValidateForKube(in));
  const std::string what = Describe(in.kind, in.name);
  if (!in.resource_version.empty()) {
    return InvalidArgument("resourceVersion must not be set to create " + what);
  }
  if (in.deletion_timestamp) {
    return InvalidArgument("deletionTimestamp must not be set to create " + what);
  }
  ASSIGN_OR_RETURN(const KubeResource* r, Resource(in.kind));
  ASSIGN_OR_RETURN(std::string path, CollectionPath(in.kind));
  nlohmann::json body = {{"apiVersion", r->group + "/" + r->version},
                         {"kind", in.kind},
                         {"metadata", {{"name", in.name}}},
                         {"spec", in.spec}};
  if (!in.labels.empty()) body["metadata"]["labels"] = in.labels;
  auto created = client_->Call("POST", path, body);
  if (!created.ok()) return Named(created.status(), in.kind, in.name, "create");
  ASSIGN_OR_RETURN(Object out, FromKubeJson(in.kind, *created));
  if (in.status.empty()) return out;

  // The status subresource ignores status on create: write it now, and take
  // the object back if that fails, so a create is whole or not at all.
  Object with_status = out;
  with_status.status = in.status;
  auto written = UpdateStatus(with_status);
  if (written.ok()) return written;
  Status undo = Delete(in.kind, in.name, {.uid = out.uid});
  if (!undo.ok() && undo.code() != Code::kNotFound) {
    log::Error("store: a created object whose status could not be written is left behind",
               {{"object", what}, {"uid", out.uid}, {"error", undo.ToString()}});
  }
  return written.status().Annotate("create " + what + " (status)");
}

StatusOr<Object> KubeStore::Patch(const Object& in, bool status, const Object* base) {
  RETURN_IF_ERROR(ValidateForKube(in));
  const char* verb = status ? "update status" : "update";
  const std::string what = Describe(in.kind, in.name);
  if (in.resource_version.empty()) {
    return InvalidArgument(std::string("resourceVersion is required to ") + verb + " " + what +
                           ": every update is a compare-and-swap");
  }
  if (base != nullptr && (base->kind != in.kind || base->name != in.name ||
                          base->resource_version != in.resource_version ||
                          (!in.uid.empty() && base->uid != in.uid) || base->uid.empty())) {
    return InvalidArgument(std::string(verb) + " of " + what +
                           ": the base it was made from must be the same object (kind, name, "
                           "uid) at the same resourceVersion");
  }
  ASSIGN_OR_RETURN(Object stored,
                   base != nullptr ? StatusOr<Object>(*base) : Get(in.kind, in.name));
  if (!in.uid.empty() && in.uid != stored.uid) {
    return Aborted("conflict: " + std::string(verb) + " of " + what + " with uid " + in.uid +
                   ", but the stored object is another lifecycle (uid " + stored.uid +
                   ", resourceVersion " + stored.resource_version + ")");
  }
  auto conflict = [&](const std::string& now) {
    return Aborted("conflict: " + std::string(verb) + " of " + what + " at resourceVersion " +
                   in.resource_version + ", but the stored resourceVersion is " + now +
                   "; get it again and retry");
  };
  if (in.resource_version != stored.resource_version) return conflict(stored.resource_version);

  nlohmann::json ops = nlohmann::json::array();
  ops.push_back({{"op", "test"}, {"path", "/metadata/uid"}, {"value", stored.uid}});
  ops.push_back(
      {{"op", "test"}, {"path", "/metadata/resourceVersion"}, {"value", in.resource_version}});
  if (status) {
    if (in.status == stored.status) return stored;  // nothing to write
    if (stored.status.empty() || in.status.empty()) {
      ops.push_back({{"op", "add"}, {"path", "/status"}, {"value", in.status}});
    } else {
      // Field by field, so the patch says what changed (a repair of the
      // export record is exactly the runbook's "add /status/exportSpec").
      for (const auto& [key, value] : in.status.items()) {
        if (!stored.status.contains(key) || stored.status[key] != value) {
          ops.push_back(
              {{"op", "add"}, {"path", "/status/" + JsonPointerToken(key)}, {"value", value}});
        }
      }
      for (const auto& [key, value] : stored.status.items()) {
        if (!in.status.contains(key)) {
          ops.push_back({{"op", "remove"}, {"path", "/status/" + JsonPointerToken(key)}});
        }
      }
    }
  } else {
    if (in.spec == stored.spec && in.labels == stored.labels) return stored;
    if (in.spec != stored.spec)
      ops.push_back({{"op", "add"}, {"path", "/spec"}, {"value", in.spec}});
    if (in.labels != stored.labels) {
      if (in.labels.empty()) {
        ops.push_back({{"op", "remove"}, {"path", "/metadata/labels"}});
      } else {
        ops.push_back({{"op", "add"}, {"path", "/metadata/labels"}, {"value", in.labels}});
      }
    }
  }
  ASSIGN_OR_RETURN(std::string path, ObjectPath(in.kind, in.name));
  if (status) path += "/status";
  auto patched = client_->Patch(path, ops, "application/json-patch+json");
  if (!patched.ok()) {
    // A failed test operation (the object moved since it was read) is a conflict.
    if (patched.status().code() != Code::kNotFound) {
      auto now = Get(in.kind, in.name);
      if (now.ok() && now->resource_version != in.resource_version) {
        return conflict(now->resource_version);
      }
    }
    return Named(patched.status(), in.kind, in.name, verb);
  }
  return FromKubeJson(in.kind, *patched);
}

StatusOr<Object> KubeStore::Update(const Object& in) { return Patch(in, false); }

StatusOr<Object> KubeStore::UpdateStatus(const Object& in) { return Patch(in, true); }

StatusOr<Object> KubeStore::UpdateStatusFrom(const Object& base, const Object& next) {
  return Patch(next, true, &base);
}

Status KubeStore::Delete(const std::string& kind, const std::string& name,
                         const Preconditions& pre) {
  ASSIGN_OR_RETURN(std::string path, ObjectPath(kind, name));
  nlohmann::json body = {{"apiVersion", "v1"}, {"kind", "DeleteOptions"}};
  if (pre.uid) body["preconditions"]["uid"] = *pre.uid;
  if (pre.resource_version) body["preconditions"]["resourceVersion"] = *pre.resource_version;
  auto done = client_->Call("DELETE", path, body);
  if (done.ok()) return Status::Ok();
  if (done.status().code() == Code::kAborted) {
    return Aborted("precondition failed: delete of " + Describe(kind, name) + ": " +
                   done.status().message());
  }
  return Named(done.status(), kind, name, "delete");
}

namespace {

// One watch: a thread that keeps a watch request open, resuming from the
// last version seen, until stopped or the history is gone.
class KubeWatch : public WatchHandle {
 public:
  struct State {
    std::shared_ptr<kube::Client> client;
    std::string kind;
    std::string path;  // the collection
    std::string version;
    EventHandler on_event;
    ErrorHandler on_error;
    KubeStoreOptions options;
    std::atomic<bool> stop{false};
    std::mutex mu;
    std::condition_variable cv;
  };

  explicit KubeWatch(std::shared_ptr<State> state) : state_(std::move(state)) {
    thread_ = std::thread([state = state_] { Run(state); });
  }

  ~KubeWatch() override {
    {
      std::lock_guard lock(state_->mu);
      state_->stop = true;
    }
    state_->cv.notify_all();
    if (thread_.get_id() == std::this_thread::get_id()) {
      thread_.detach();  // destroyed by its own handler: Run sees stop and returns
    } else {
      thread_.join();
    }
  }
  KubeWatch(const KubeWatch&) = delete;
  KubeWatch& operator=(const KubeWatch&) = delete;

 private:
  static void Run(const std::shared_ptr<State>& st);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

void KubeWatch::Run(const std::shared_ptr<State>& st) {
  auto fail = [&](const Status& s) {
    log::Warn("store watch ended",
              {{"kind", st->kind}, {"resourceVersion", st->version}, {"error", s.ToString()}});
    if (st->on_error && !st->stop) st->on_error(s);
  };
  auto gone = [&](const std::string& why) {
    return OutOfRange("compacted: watch of " + st->kind + " from resourceVersion " + st->version +
                      ": " + why + "; relist");
  };
  std::chrono::milliseconds wait = st->options.retry_base;
  while (!st->stop) {
    std::string path = st->path + "?watch=1&allowWatchBookmarks=true&resourceVersion=" +
                       PercentEncode(st->version) +
                       "&timeoutSeconds=" + std::to_string(st->options.watch_timeout.count());
    std::optional<Status> ended;  // set by an ERROR event
    bool progressed = false;
    Status s = st->client->Watch(
        path,
        [&](const nlohmann::json& line) {
          if (st->stop) return false;
          std::string type = line.value("type", std::string());
          auto object = line.find("object");
          if (object == line.end() || !object->is_object()) {
            log::Error("store watch: an event without an object", {{"kind", st->kind}});
            return true;
          }
          if (type == "ERROR") {
            int code = object->value("code", 0);
            std::string message = object->value("message", std::string());
            ended =
                code == 410 ? gone(message) : Unavailable("watch of " + st->kind + ": " + message);
            return false;
          }
          std::string version;
          if (auto m = object->find("metadata"); m != object->end() && m->is_object()) {
            version = m->value("resourceVersion", std::string());
          }
          if (type == "BOOKMARK") {
            if (!version.empty()) st->version = version;
            return true;
          }
          std::optional<EventType> event_type = EventTypeOf(type);
          auto o = FromKubeJson(st->kind, *object);
          if (!event_type || !o.ok()) {
            log::Error("store watch: skipping an event the API server sent malformed",
                       {{"kind", st->kind},
                        {"type", type},
                        {"error", o.ok() ? "unknown type" : o.status().ToString()}});
            if (!version.empty()) st->version = version;
            return true;
          }
          Event e;
          e.type = *event_type;
          e.object = std::move(o).value();
          st->version = e.object.resource_version;
          progressed = true;
          st->on_event(e);
          return !st->stop;
        },
        &st->stop);
    if (st->stop) return;
    if (ended) {
      if (ended->code() == Code::kOutOfRange) return fail(*ended);
      s = *ended;
    }
    switch (s.code()) {
      case Code::kOk:  // the server ended the request (timeoutSeconds): resume
        wait = st->options.retry_base;
        continue;
      case Code::kOutOfRange:
        return fail(gone(s.message()));
      case Code::kCancelled:
        return;
      case Code::kPermissionDenied:
      case Code::kUnauthenticated:
      case Code::kNotFound:
      case Code::kInvalidArgument:
        return fail(s.Annotate("watch of " + st->kind));
      default:  // a cut stream, a bad line, the server away: resume after a pause
        log::Warn("store watch interrupted; resuming",
                  {{"kind", st->kind}, {"resourceVersion", st->version}, {"error", s.ToString()}});
        break;
    }
    if (progressed) wait = st->options.retry_base;
    std::unique_lock lock(st->mu);
    st->cv.wait_for(lock, wait, [&] { return st->stop.load(); });
    wait = std::min(wait * 2, st->options.retry_max);
  }
}

}  // namespace

StatusOr<std::unique_ptr<WatchHandle>> KubeStore::Watch(const std::string& kind,
                                                        const std::string& from_resource_version,
                                                        EventHandler on_event,
                                                        ErrorHandler on_error) {
  ASSIGN_OR_RETURN(std::string path, CollectionPath(kind));
  if (from_resource_version.empty()) {
    return InvalidArgument("watch of " + kind +
                           " needs a resourceVersion to start from (a List's)");
  }
  if (!on_event) return InvalidArgument("watch of " + kind + " needs an event handler");
  auto state = std::make_shared<KubeWatch::State>();
  state->client = client_;
  state->kind = kind;
  state->path = path;
  state->version = from_resource_version;
  state->on_event = std::move(on_event);
  state->on_error = std::move(on_error);
  state->options = options_;
  return std::unique_ptr<WatchHandle>(new KubeWatch(std::move(state)));
}

}  // namespace pillar::store
