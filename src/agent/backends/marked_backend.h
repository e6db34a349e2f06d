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
    RETURN_IF_ERROR(CheckName(name));
    RETURN_IF_ERROR(backend_util::CheckSize(Id(name), size_bytes));
    RETURN_IF_ERROR(backend_util::CheckMode(*this, mode));
    RETURN_IF_ERROR(backend_util::CheckRoot(Id(name), mode, root));
    RETURN_IF_ERROR(CheckParams(mode, params));
    RETURN_IF_ERROR(backend_util::CheckOwnerUid(owner_uid));
    std::unique_lock<std::mutex> lock(mu_);
    RETURN_IF_ERROR(PrepareCreate(size_bytes, mode, params));
    ASSIGN_OR_RETURN(std::optional<Row> existing, FindRow(name));
    if (!existing) return DoCreate(name, size_bytes, mode, params, owner_uid, root, lock);
    RETURN_IF_ERROR(CheckIsVolume(name, *existing, /*creating=*/true));
    BackendVolume vol = ToVolume(*existing);
    RETURN_IF_ERROR(
        backend_util::CheckCreateOwner(Object(name, *existing), vol.owner_uid, owner_uid));
    RETURN_IF_ERROR(backend_util::CheckExistingMatches(Id(name), vol, mode, size_bytes));
    return ResumeCreate(*existing, lock);
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

 private:
  Status CheckName(const std::string& name) const {
    RETURN_IF_ERROR(CheckConfig());
    return backend_util::CheckVolumeName(name);
  }
};

}  // namespace pillar::agent
