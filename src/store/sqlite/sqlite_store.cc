#include "store/sqlite/sqlite_store.h"

#include <utility>

#include "common/uuid.h"
#include "store/sqlite/sqlite_watch.h"

namespace pillar::store {
namespace {

std::string Conflict(const Object& in, const Object& stored, const std::string& verb) {
  return "conflict: " + verb + " of " + Describe(in.kind, in.name) + " at resourceVersion " +
         in.resource_version + ", but the stored resourceVersion is " + stored.resource_version +
         "; get it again and retry";
}

Status CheckIdentity(const Object& in, const Object& stored, const std::string& verb) {
  if (!in.uid.empty() && in.uid != stored.uid) {
    return Aborted("conflict: " + verb + " of " + Describe(in.kind, in.name) + " with uid " +
                   in.uid + ", but the stored object is another lifecycle (uid " + stored.uid +
                   ", resourceVersion " + stored.resource_version + ")");
  }
  if (in.resource_version != stored.resource_version) return Aborted(Conflict(in, stored, verb));
  return Status::Ok();
}

// deletionTimestamp is the store's alone: Update never writes it.
StatusOr<bool> ApplySpec(const Object& in, Object& next) {
  bool spec_changed = in.spec != next.spec;
  bool changed = spec_changed || in.labels != next.labels;
  next.spec = in.spec;
  next.labels = in.labels;
  if (spec_changed) ++next.generation;
  return changed;
}

StatusOr<bool> ApplyStatus(const Object& in, Object& next) {
  bool changed = in.status != next.status;
  next.status = in.status;
  return changed;
}

}  // namespace

StatusOr<std::unique_ptr<SqliteStore>> SqliteStore::Open(const SqliteStoreOptions& options) {
  if (options.poll_interval.count() <= 0) {
    return InvalidArgument("store poll interval must be positive");
  }
  SqliteTables::Options t;
  t.path = options.path;
  t.busy_timeout = options.busy_timeout;
  t.history_limit = options.history_limit;
  ASSIGN_OR_RETURN(auto tables, SqliteTables::Open(t));
  return std::unique_ptr<SqliteStore>(new SqliteStore(std::move(tables), options));
}

SqliteStore::SqliteStore(std::shared_ptr<SqliteTables> tables, const SqliteStoreOptions& options)
    : tables_(std::move(tables)),
      poll_interval_(options.poll_interval),
      clock_(options.clock != nullptr ? *options.clock : system_clock_) {}

StatusOr<Object> SqliteStore::Get(const std::string& kind, const std::string& name) {
  RETURN_IF_ERROR(ValidateKind(kind));
  RETURN_IF_ERROR(ValidateName("name", name));
  std::optional<Object> found;
  Status done = tables_->Read([&]() -> Status {
    ASSIGN_OR_RETURN(found, tables_->SelectObject(kind, name));
    return Status::Ok();
  });
  RETURN_IF_ERROR(done);
  if (!found) return NotFound(Describe(kind, name) + " not found");
  return std::move(*found);
}

StatusOr<ListResult> SqliteStore::List(const std::string& kind,
                                       const std::optional<LabelSelector>& selector) {
  RETURN_IF_ERROR(ValidateKind(kind));
  if (selector) RETURN_IF_ERROR(ValidateLabels(*selector).Annotate("label selector"));
  ListResult result;
  Status done = tables_->Read([&]() -> Status {
    ASSIGN_OR_RETURN(result.items, tables_->SelectObjects(kind, selector));
    ASSIGN_OR_RETURN(int64_t revision, tables_->Revision());
    result.resource_version = std::to_string(revision);
    return Status::Ok();
  });
  RETURN_IF_ERROR(done);
  return result;
}

StatusOr<Object> SqliteStore::Create(const Object& in) {
  RETURN_IF_ERROR(ValidateObject(in));
  const std::string what = Describe(in.kind, in.name);
  if (!in.resource_version.empty()) {
    return InvalidArgument("resourceVersion must not be set to create " + what);
  }
  if (in.deletion_timestamp) {
    return InvalidArgument("deletionTimestamp must not be set to create " + what);
  }
  Object out = in;
  out.uid = NewUuid();
  out.generation = 1;
  out.creation_timestamp = FormatRfc3339(clock_.Now());
  Status done = tables_->Write([&]() -> Status {
    ASSIGN_OR_RETURN(auto existing, tables_->SelectObject(in.kind, in.name));
    if (existing) {
      return AlreadyExists(what + " already exists (uid " + existing->uid + ")");
    }
    ASSIGN_OR_RETURN(int64_t revision, tables_->NextRevision());
    out.resource_version = std::to_string(revision);
    RETURN_IF_ERROR(tables_->PutObject(out));
    return tables_->AppendEvent(EventType::kAdded, out);
  });
  RETURN_IF_ERROR(done);
  return out;
}

StatusOr<Object> SqliteStore::CompareAndSwap(const Object& in, const char* verb,
                                             const Apply& apply) {
  RETURN_IF_ERROR(ValidateObject(in));
  if (in.resource_version.empty()) {
    return InvalidArgument(std::string("resourceVersion is required to ") + verb + " " +
                           Describe(in.kind, in.name) + ": every update is a compare-and-swap");
  }
  Object result;
  Status done = tables_->Write([&]() -> Status {
    ASSIGN_OR_RETURN(auto stored, tables_->SelectObject(in.kind, in.name));
    if (!stored) return NotFound(Describe(in.kind, in.name) + " not found");
    RETURN_IF_ERROR(CheckIdentity(in, *stored, verb));
    Object next = *stored;
    ASSIGN_OR_RETURN(bool changed, apply(in, next));
    if (!changed) {
      result = std::move(*stored);
      return Status::Ok();
    }
    ASSIGN_OR_RETURN(int64_t revision, tables_->NextRevision());
    next.resource_version = std::to_string(revision);
    RETURN_IF_ERROR(tables_->PutObject(next));
    RETURN_IF_ERROR(tables_->AppendEvent(EventType::kModified, next));
    result = std::move(next);
    return Status::Ok();
  });
  RETURN_IF_ERROR(done);
  return result;
}

StatusOr<Object> SqliteStore::Update(const Object& in) {
  return CompareAndSwap(in, "update", ApplySpec);
}

StatusOr<Object> SqliteStore::UpdateStatus(const Object& in) {
  return CompareAndSwap(in, "update status", ApplyStatus);
}

Status SqliteStore::Delete(const std::string& kind, const std::string& name,
                           const Preconditions& pre) {
  RETURN_IF_ERROR(ValidateKind(kind));
  RETURN_IF_ERROR(ValidateName("name", name));
  const std::string what = Describe(kind, name);
  return tables_->Write([&]() -> Status {
    ASSIGN_OR_RETURN(auto stored, tables_->SelectObject(kind, name));
    if (!stored) return NotFound(what + " not found");
    if (pre.uid && *pre.uid != stored->uid) {
      return Aborted("precondition failed: delete of " + what + " with uid " + *pre.uid +
                     ", but the stored uid is " + stored->uid);
    }
    if (pre.resource_version && *pre.resource_version != stored->resource_version) {
      return Aborted("conflict: delete of " + what + " at resourceVersion " +
                     *pre.resource_version + ", but the stored resourceVersion is " +
                     stored->resource_version);
    }
    Object last = std::move(*stored);
    ASSIGN_OR_RETURN(int64_t revision, tables_->NextRevision());
    last.resource_version = std::to_string(revision);
    RETURN_IF_ERROR(tables_->RemoveObject(kind, name));
    return tables_->AppendEvent(EventType::kDeleted, last);
  });
}

StatusOr<std::unique_ptr<WatchHandle>> SqliteStore::Watch(const std::string& kind,
                                                          const std::string& from_resource_version,
                                                          EventHandler on_event,
                                                          ErrorHandler on_error) {
  RETURN_IF_ERROR(ValidateKind(kind));
  ASSIGN_OR_RETURN(int64_t from_revision,
                   ParseRevision(from_resource_version, "watch of " + kind + " from"));
  if (!on_event) return InvalidArgument("watch of " + kind + " needs an event handler");
  int64_t compacted = 0;
  Status done = tables_->Read([&]() -> Status {
    ASSIGN_OR_RETURN(compacted, tables_->Compacted());
    return Status::Ok();
  });
  RETURN_IF_ERROR(done);
  if (from_revision < compacted) {
    return OutOfRange("revision compacted: watch of " + kind + " from revision " +
                      std::to_string(from_revision) + ", but the history starts after revision " +
                      std::to_string(compacted) + "; relist");
  }
  return std::unique_ptr<WatchHandle>(new SqliteWatch(
      tables_, kind, from_revision, std::move(on_event), std::move(on_error), poll_interval_));
}

StatusOr<int64_t> SqliteStore::Revision() {
  int64_t revision = 0;
  Status done = tables_->Read([&]() -> Status {
    ASSIGN_OR_RETURN(revision, tables_->Revision());
    return Status::Ok();
  });
  RETURN_IF_ERROR(done);
  return revision;
}

Status SqliteStore::Compact(int64_t revision) {
  return tables_->Write([&] { return tables_->CompactTo(revision); });
}

}  // namespace pillar::store
