// The public operations of backend.h written once for every backend that
// keeps an ownership mark on its objects: each validates its arguments,
// finds the object, decides on its mark (backend.h's ownership rules) and
// only then calls a per-backend step, which does that backend's work and no
// checking. `Row` is what a backend reads about one object (an lvs row, a
// zfs list row, a file pool's volume); the steps get it back as found.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/backends/backend.h"
#include "agent/backends/backend_util.h"
#include "common/status.h"

namespace pillar::agent {

template <typename Row>
class MarkedBackend : public Backend {
 public:
  StatusOr<BackendVolume> Create(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                 const std::map<std::string, std::string>& params,
                                 const std::string& owner_uid,
                                 const std::optional<VolumeRoot>& root) final {
    RETURN_IF_ERROR(CheckCreate(name, size_bytes, mode, params, owner_uid, root));
    std::unique_lock<std::mutex> lock(mu_);
    RETURN_IF_ERROR(PrepareCreate(size_bytes, mode, params));
    ASSIGN_OR_RETURN(std::optional<Row> existing, FindRow(name));
    if (!existing) return DoCreate(name, size_bytes, mode, params, owner_uid, root, lock);
    RETURN_IF_ERROR(CheckIsVolume(name, *existing, /*creating=*/true));
    BackendVolume vol = ToVolume(*existing);
    RETURN_IF_ERROR(
        backend_util::CheckCreateOwner(Object(name, *existing), vol.owner_uid, owner_uid));
    RETURN_IF_ERROR(backend_util::CheckExistingMatches(Id(name), vol, mode, size_bytes));
    RETURN_IF_ERROR(backend_util::CheckSameOrigin(Id(name), vol.origin, ""));
    return ResumeCreate(*existing, lock);
  }

  StatusOr<BackendVolume> CreateFrom(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                     const std::map<std::string, std::string>& params,
                                     const std::string& owner_uid,
                                     const std::optional<VolumeRoot>& root,
                                     const VolumeSource& source) final {
    RETURN_IF_ERROR(CheckCreate(name, size_bytes, mode, params, owner_uid, root));
    const bool from_snapshot = source.kind == VolumeSource::Kind::kSnapshot;
    RETURN_IF_ERROR(from_snapshot ? backend_util::CheckSnapshotName(source.name)
                                  : backend_util::CheckVolumeName(source.name));
    RETURN_IF_ERROR(backend_util::CheckSourceUid(source.source_uid));
    const std::string origin = OriginOf(pool(), source.kind, source.name);
    if (!from_snapshot && source.name == name) {
      return InvalidArgument("volume " + Id(name) + " cannot be a copy of itself");
    }
    RETURN_IF_ERROR(CheckCopies(source));
    std::unique_lock<std::mutex> lock(mu_);
    RETURN_IF_ERROR(PrepareCreate(size_bytes, mode, params));
    ASSIGN_OR_RETURN(std::optional<Row> existing, FindRow(name));
    if (existing) {
      // The source is not needed again (it may be gone by now): a retry
      // finds the volume it made.
      RETURN_IF_ERROR(CheckIsVolume(name, *existing, /*creating=*/true));
      BackendVolume vol = ToVolume(*existing);
      RETURN_IF_ERROR(
          backend_util::CheckCreateOwner(Object(name, *existing), vol.owner_uid, owner_uid));
      RETURN_IF_ERROR(backend_util::CheckSameOrigin(Id(name), vol.origin, origin));
      if (vol.mode == mode && vol.size_bytes < size_bytes) {
        // A create cut short between the copy and its growth.
        return DoExpand(*existing, size_bytes, lock);
      }
      RETURN_IF_ERROR(backend_util::CheckExistingMatches(Id(name), vol, mode, size_bytes));
      return ResumeCreate(*existing, lock);
    }
    if (from_snapshot) {
      ASSIGN_OR_RETURN(BackendSnapshot snap, FindSnapshot(source.name));
      // The mark before a single byte is read.
      RETURN_IF_ERROR(backend_util::CheckOwner("copy", SnapshotObject(snap), snap.owner_uid,
                                               source.source_uid));
      RETURN_IF_ERROR(backend_util::CheckSourceFits(Id(name), origin, mode, size_bytes, snap.mode,
                                                    snap.size_bytes));
      return DoCreateFromSnapshot(name, size_bytes, mode, params, owner_uid, snap, source.detached,
                                  lock);
    }
    ASSIGN_OR_RETURN(Row row, FindVolume(source.name));
    BackendVolume src = ToVolume(row);
    RETURN_IF_ERROR(backend_util::CheckOwner("copy", Object(source.name, row), src.owner_uid,
                                             source.source_uid));
    if (!src.pending.empty()) {
      return FailedPrecondition("volume " + Id(source.name) + " is not complete (" + src.pending +
                                "); it cannot be copied yet");
    }
    RETURN_IF_ERROR(backend_util::CheckSourceFits(Id(name), origin, mode, size_bytes, src.mode,
                                                  src.size_bytes));
    return DoCloneVolume(name, size_bytes, mode, params, owner_uid, row, source.detached, lock);
  }

  StatusOr<BackendVolume> Expand(const std::string& name, int64_t size_bytes,
                                 const std::string& owner_uid) final {
    RETURN_IF_ERROR(CheckName(name));
    RETURN_IF_ERROR(backend_util::CheckSize(Id(name), size_bytes));
    RETURN_IF_ERROR(backend_util::CheckOwnerUid(owner_uid));
    std::unique_lock<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(Row row, FindVolume(name));
    RETURN_IF_ERROR(
        backend_util::CheckOwner("expand", Object(name, row), ToVolume(row).owner_uid, owner_uid));
    return DoExpand(row, size_bytes, lock);
  }

  Status Delete(const std::string& name, const std::string& owner_uid) final {
    RETURN_IF_ERROR(CheckName(name));
    RETURN_IF_ERROR(backend_util::CheckOwnerUid(owner_uid));
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(std::optional<Row> row, FindRow(name));
    if (row) {
      RETURN_IF_ERROR(CheckIsVolume(name, *row, /*creating=*/false));
      RETURN_IF_ERROR(backend_util::CheckOwner("delete", Object(name, *row),
                                               ToVolume(*row).owner_uid, owner_uid));
    }
    return DoDelete(name, row);
  }

  Status SetOwner(const std::string& name, const std::string& owner_uid) final {
    RETURN_IF_ERROR(CheckName(name));
    RETURN_IF_ERROR(backend_util::CheckOwnerUid(owner_uid));
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(Row row, FindVolume(name));
    ASSIGN_OR_RETURN(bool needed, backend_util::NeedsOwnerMark(Object(name, row),
                                                               ToVolume(row).owner_uid, owner_uid));
    if (!needed) return Status::Ok();
    return WriteMark(row, owner_uid);
  }

  StatusOr<BackendVolume> Get(const std::string& name) final {
    RETURN_IF_ERROR(CheckName(name));
    ASSIGN_OR_RETURN(Row row, FindVolume(name));
    return ToVolume(row);
  }

  StatusOr<std::vector<BackendVolume>> List() final {
    RETURN_IF_ERROR(CheckConfig());
    return ListVolumes();
  }

  StatusOr<PoolCapacity> Capacity() final {
    RETURN_IF_ERROR(CheckConfig());
    return ReadCapacity();
  }

  StatusOr<std::string> Expose(const std::string& name, VolumeMode mode) final {
    RETURN_IF_ERROR(CheckName(name));
    RETURN_IF_ERROR(backend_util::CheckMode(*this, mode));
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(Row row, FindVolume(name));
    VolumeMode found = ToVolume(row).mode;
    if (found != mode) {
      return FailedPrecondition("volume " + Id(name) + " is " + VolumeModeName(found) +
                                ", cannot expose it as " + VolumeModeName(mode));
    }
    return DoExpose(row);
  }

  Status Unexpose(const std::string& name) final {
    RETURN_IF_ERROR(CheckName(name));
    std::lock_guard<std::mutex> lock(mu_);
    return DoUnexpose(name);
  }

  StatusOr<BackendSnapshot> CreateSnapshot(const std::string& volume, const std::string& volume_uid,
                                           const std::string& name, const std::string& snapshot_uid,
                                           bool detached) final {
    RETURN_IF_ERROR(CheckName(volume));
    RETURN_IF_ERROR(backend_util::CheckSnapshotName(name));
    RETURN_IF_ERROR(backend_util::CheckSourceUid(volume_uid));
    RETURN_IF_ERROR(backend_util::CheckOwnerUid(snapshot_uid));
    RETURN_IF_ERROR(CheckSnapshots(detached));
    std::unique_lock<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(std::optional<BackendSnapshot> existing, FindSnapshotRow(name));
    if (existing) {
      RETURN_IF_ERROR(backend_util::CheckExistingSnapshot(SnapshotObject(*existing), *existing,
                                                          volume, snapshot_uid, detached));
      return *existing;
    }
    ASSIGN_OR_RETURN(Row row, FindVolume(volume));
    BackendVolume src = ToVolume(row);
    // The mark before a single byte is read.
    RETURN_IF_ERROR(
        backend_util::CheckOwner("snapshot", Object(volume, row), src.owner_uid, volume_uid));
    if (!src.pending.empty()) {
      return FailedPrecondition("volume " + Id(volume) + " is not complete (" + src.pending +
                                "); it cannot be snapshotted yet");
    }
    return DoCreateSnapshot(row, name, snapshot_uid, detached, lock);
  }

  Status DeleteSnapshot(const std::string& name, const std::string& snapshot_uid) final {
    RETURN_IF_ERROR(CheckConfig());
    RETURN_IF_ERROR(backend_util::CheckSnapshotName(name));
    RETURN_IF_ERROR(backend_util::CheckOwnerUid(snapshot_uid));
    std::lock_guard<std::mutex> lock(mu_);
    ASSIGN_OR_RETURN(std::optional<BackendSnapshot> snap, FindSnapshotRow(name));
    if (!snap || snap->deleted) return Status::Ok();
    RETURN_IF_ERROR(
        backend_util::CheckOwner("delete", SnapshotObject(*snap), snap->owner_uid, snapshot_uid));
    return DoDeleteSnapshot(*snap);
  }

  StatusOr<BackendSnapshot> GetSnapshot(const std::string& name) final {
    RETURN_IF_ERROR(CheckConfig());
    RETURN_IF_ERROR(backend_util::CheckSnapshotName(name));
    return FindSnapshot(name);
  }

  StatusOr<std::vector<BackendSnapshot>> ListSnapshots() final {
    RETURN_IF_ERROR(CheckConfig());
    ASSIGN_OR_RETURN(std::vector<BackendSnapshot> all, ListSnapshotRows());
    std::vector<BackendSnapshot> out;
    for (auto& snap : all) {
      if (!snap.deleted) out.push_back(std::move(snap));
    }
    return out;
  }

 protected:
  // "<pool>/<name>", as messages name a volume.
  std::string Id(const std::string& name) const { return pool() + "/" + name; }

  // The row of a volume of this backend: NOT_FOUND when nothing has the
  // name, CheckIsVolume's refusal when something does but is no volume.
  StatusOr<Row> FindVolume(const std::string& name) {
    ASSIGN_OR_RETURN(std::optional<Row> row, FindRow(name));
    if (!row) return NotFoundError(name);
    RETURN_IF_ERROR(CheckIsVolume(name, *row, /*creating=*/false));
    return std::move(*row);
  }

  // "zfs pool p: snapshot p/s", as messages name a snapshot.
  std::string SnapshotObject(const BackendSnapshot& snap) const {
    return kind() + " pool " + pool() + ": snapshot " + Id(snap.name);
  }

  // The snapshot `name`: NOT_FOUND when there is none or it was deleted.
  StatusOr<BackendSnapshot> FindSnapshot(const std::string& name) {
    ASSIGN_OR_RETURN(std::optional<BackendSnapshot> snap, FindSnapshotRow(name));
    if (!snap || snap->deleted) return NotFound("snapshot " + Id(name) + " not found");
    return std::move(*snap);
  }

  // Serializes the operations, so a check and the change it allows are one
  // step (a step may release it for slow work; see LvmBackend).
  std::mutex mu_;

  // --- The per-backend steps. They run only after the checks above. ---

  // INVALID_ARGUMENT when the backend's configuration (pool, directory) is
  // not valid; every operation checks it first and then runs nothing.
  virtual Status CheckConfig() const = 0;
  // INVALID_ARGUMENT for a parameter the backend does not take. By default
  // it takes none.
  virtual Status CheckParams(VolumeMode /*mode*/,
                             const std::map<std::string, std::string>& params) const {
    return backend_util::CheckParamKeys(kind(), params, {});
  }
  // Runs under the lock before a create looks for the object: the last
  // checks of the request and any pool upkeep.
  virtual Status PrepareCreate(int64_t /*size_bytes*/, VolumeMode /*mode*/,
                               const std::map<std::string, std::string>& /*params*/) {
    return Status::Ok();
  }
  // The object named `name`, whatever it is; nullopt when there is none.
  virtual StatusOr<std::optional<Row>> FindRow(const std::string& name) = 0;
  // The refusal when `row` is not a volume of this backend (an LV of another
  // type, say); a create answers ALREADY_EXISTS, other operations
  // FAILED_PRECONDITION.
  virtual Status CheckIsVolume(const std::string& /*name*/, const Row& /*row*/,
                               bool /*creating*/) const {
    return Status::Ok();
  }
  virtual Status NotFoundError(const std::string& name) const {
    return NotFound("volume " + Id(name) + " not found");
  }
  // The volume `row` describes; its owner_uid is the object's mark.
  virtual BackendVolume ToVolume(const Row& row) const = 0;
  // What messages call the object, e.g. "lvm pool vg: LV v".
  virtual std::string Object(const std::string& name, const Row& row) const = 0;

  // Creates a volume where nothing has the name, marked with owner_uid.
  virtual StatusOr<BackendVolume> DoCreate(const std::string& name, int64_t size_bytes,
                                           VolumeMode mode,
                                           const std::map<std::string, std::string>& params,
                                           const std::string& owner_uid,
                                           const std::optional<VolumeRoot>& root,
                                           std::unique_lock<std::mutex>& lock) = 0;
  // Create found owner_uid's matching volume: finishes what an earlier
  // create left pending, and returns it.
  virtual StatusOr<BackendVolume> ResumeCreate(const Row& row,
                                               std::unique_lock<std::mutex>& lock) = 0;
  // Grows owner_uid's volume; `lock` is held on entry.
  virtual StatusOr<BackendVolume> DoExpand(const Row& row, int64_t size_bytes,
                                           std::unique_lock<std::mutex>& lock) = 0;
  // Removes the volume `row` (owner_uid's), or what a half-finished delete
  // left when there is none.
  virtual Status DoDelete(const std::string& name, const std::optional<Row>& row) = 0;
  // Marks the unmarked volume `row` as owner_uid's.
  virtual Status WriteMark(const Row& row, const std::string& owner_uid) = 0;
  virtual StatusOr<std::vector<BackendVolume>> ListVolumes() = 0;
  virtual StatusOr<PoolCapacity> ReadCapacity() = 0;
  // Serves `row`, whose mode is the one asked for.
  virtual StatusOr<std::string> DoExpose(const Row& row) = 0;
  virtual Status DoUnexpose(const std::string& name) = 0;

  // --- Snapshot steps, run after the checks of the public operations. ---

  // FAILED_PRECONDITION naming why, when the backend takes no snapshots
  // (detached: no detached ones) at all.
  virtual Status CheckSnapshots(bool /*detached*/) const { return Status::Ok(); }
  // The same for a volume made from `source`.
  virtual Status CheckCopies(const VolumeSource& /*source*/) const { return Status::Ok(); }
  // The snapshot `name`, deleted ones included; nullopt when there is none.
  virtual StatusOr<std::optional<BackendSnapshot>> FindSnapshotRow(const std::string& name) = 0;
  // Every snapshot, deleted ones included.
  virtual StatusOr<std::vector<BackendSnapshot>> ListSnapshotRows() = 0;
  // Snapshots volume_uid's volume `row` where no snapshot has the name.
  virtual StatusOr<BackendSnapshot> DoCreateSnapshot(const Row& row, const std::string& name,
                                                     const std::string& snapshot_uid, bool detached,
                                                     std::unique_lock<std::mutex>& lock) = 0;
  // Deletes snapshot_uid's snapshot (see Backend::DeleteSnapshot).
  virtual Status DoDeleteSnapshot(const BackendSnapshot& snap) = 0;
  // Creates `name` (nothing has it) from the snapshot, whose mark, mode and
  // size were checked; size_bytes >= snap.size_bytes.
  virtual StatusOr<BackendVolume> DoCreateFromSnapshot(
      const std::string& name, int64_t size_bytes, VolumeMode mode,
      const std::map<std::string, std::string>& params, const std::string& owner_uid,
      const BackendSnapshot& snap, bool detached, std::unique_lock<std::mutex>& lock) = 0;
  // The same from the volume `source`.
  virtual StatusOr<BackendVolume> DoCloneVolume(const std::string& name, int64_t size_bytes,
                                                VolumeMode mode,
                                                const std::map<std::string, std::string>& params,
                                                const std::string& owner_uid, const Row& source,
                                                bool detached,
                                                std::unique_lock<std::mutex>& lock) = 0;

 private:
  // Every argument of a Create or CreateFrom, before anything is looked at.
  Status CheckCreate(const std::string& name, int64_t size_bytes, VolumeMode mode,
                     const std::map<std::string, std::string>& params, const std::string& owner_uid,
                     const std::optional<VolumeRoot>& root) const {
    RETURN_IF_ERROR(CheckName(name));
    RETURN_IF_ERROR(backend_util::CheckSize(Id(name), size_bytes));
    RETURN_IF_ERROR(backend_util::CheckMode(*this, mode));
    RETURN_IF_ERROR(backend_util::CheckRoot(Id(name), mode, root));
    RETURN_IF_ERROR(CheckParams(mode, params));
    return backend_util::CheckOwnerUid(owner_uid);
  }

  Status CheckName(const std::string& name) const {
    RETURN_IF_ERROR(CheckConfig());
    return backend_util::CheckVolumeName(name);
  }
};

}  // namespace pillar::agent
