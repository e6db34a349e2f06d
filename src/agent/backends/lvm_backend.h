// Backends "lvm" (linear LVs) and "lvm-thin" (thin LVs in one thin pool) on
// a volume group, driven through the lvm2 CLI and its JSON reports. Block
// mode only: an LV is a device, and there is no directory to serve.
//
// Only LVs of this backend's own type count as its volumes: for "lvm" plain
// linear LVs, for "lvm-thin" thin LVs of its thin pool. Any other LV with a
// requested name (the thin pool itself, a snapshot, a RAID LV) is refused and
// never changed, so a request can never remove or resize what it did not make.
// Ownership (backend.h) is an LV tag "pillar-csi.volume-uid.<uid>" (lvm
// allows [A-Za-z0-9_+.-] in tags, which a UUID fits), added at lvcreate.
//
// Zeroing (linear LVs): the extents lvcreate or lvextend hands out may hold a
// deleted volume's data, and lvcreate --zero clears only their first 4 KiB.
// So every byte of a new LV, and every byte an expand adds, is zeroed
// (blkdiscard --zeroout: BLKZEROOUT, write-zeroes where the device offers it)
// before the volume is reported complete. The pending work is a tag
// "pillar-csi.zero-from.<byte>": lvcreate adds it with the LV (byte 0), an
// expand adds it (the old size) before lvextend; it advances after each
// chunk and goes when the LV's end is reached. An LV carrying it reports
// BackendVolume::pending, is never exposed, and a retried Create or Expand
// finishes it, so a crash at any point never serves old data. Thin LVs read
// zeros until written: no tag, nothing to do.
//
// Snapshots (lvm-thin only): a thin snapshot LV (`lvcreate --snapshot` of
// the volume, no size) tagged "pillar-csi.snapshot-uid.<uid>" and
// "pillar-csi.snapshot-of.<volume>", with the activation-skip flag set so it
// stays inactive (a restore reads it through a new thin snapshot of it, which
// needs no activation). A volume made from a snapshot or another volume is a
// thin snapshot of it without the flag, tagged like a volume plus
// "pillar-csi.origin-snapshot.<name>" or "pillar-csi.origin-volume.<name>",
// grown by lvextend when asked larger. Thin snapshots share blocks but never
// hold each other: deleting an origin, a snapshot or a copy is an lvremove
// that waits for nothing, and every copy is as detached as it gets. Linear
// LVM takes no snapshots: FAILED_PRECONDITION naming why.
//
// Concurrency: mu_ (MarkedBackend's) covers the LV table (lvs, lvcreate, lvextend, lvremove)
// but not a zeroing, which may take minutes; callers serialise operations on
// one volume (AgentCore holds a lock per volume), so no other change of the
// same LV can interleave with it.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/backends/backend.h"
#include "agent/backends/marked_backend.h"
#include "common/exec.h"

namespace pillar::agent {

// One row of `lvs`, as parsed.
struct LvmRow {
  std::string name;
  int64_t size_bytes = 0;
  std::string attr;  // lv_attr, e.g. "-wi-a-----"
  std::string pool_lv;
  int64_t extent_bytes = 0;
  std::string owner_uid;  // from the ownership tag; "" when untagged
  // From the zeroing tag: bytes from here to the end are not zeroed yet.
  std::optional<int64_t> zero_from;
  std::string snapshot_uid;  // a snapshot's mark; "" for anything else
  std::string snapshot_of;   // the volume a snapshot was taken of
  std::string origin;        // BackendVolume::origin, from an origin tag
  int64_t time_unix = 0;     // lv_time (snapshot listings only)
};

class LvmBackend : public MarkedBackend<LvmRow> {
 public:
  // `vg` (the pool name) should pass validate::PoolName without '/', and a
  // non-empty `thin_pool` (an LV of vg) validate::VolumeName; an empty one
  // makes a linear backend. Every operation re-checks them and runs nothing
  // when they are invalid.
  LvmBackend(std::string vg, std::string thin_pool, Exec& exec)
      : vg_(std::move(vg)), thin_pool_(std::move(thin_pool)), exec_(exec) {}

  const std::string& pool() const override { return vg_; }
  std::string kind() const override { return thin_pool_.empty() ? "lvm" : "lvm-thin"; }
  std::vector<VolumeMode> modes() const override { return {VolumeMode::kBlock}; }

  // Create takes no parameters; LVM rounds the size up to whole extents.
  // Expand rounds the request up to whole extents before it is compared, so
  // a retried Expand of an already-rounded volume is a no-op, not a shrink.
  // Capacity, linear: the VG's size and free space; thin: the thin pool's
  // data size and its unused part (thin volumes may promise more than that).
  // Expose activates the LV if it is inactive; returns /dev/<vg>/<name>.
  // Unexpose leaves the LV active: deactivating is not needed to stop serving
  // it, and would fail or surprise anything else that holds it open.

  // The ownership tag of a uid, and the uid in a row's lv_tags ("a,b,c"):
  // "" without one, INVALID_ARGUMENT for a malformed or second one.
  static std::string OwnerTag(const std::string& uid);
  static StatusOr<std::string> OwnerFromTags(const std::string& tags);
  // The zeroing tag of a byte offset, and the offset in lv_tags: nullopt
  // without one, INVALID_ARGUMENT for a malformed or second one.
  static std::string ZeroTag(int64_t from);
  static StatusOr<std::optional<int64_t>> ZeroFromTags(const std::string& tags);

  // lv_time as lvs prints it ("2026-12-06 23:04:58 +0100") in seconds since
  // the epoch; nullopt when it is not in that form.
  static std::optional<int64_t> ParseLvTime(const std::string& text);

  // How much one blkdiscard call zeroes before the tag records the progress.
  static constexpr int64_t kZeroChunkBytes = int64_t{4} << 30;

 protected:
  Status CheckConfig() const override;
  StatusOr<std::optional<LvmRow>> FindRow(const std::string& name) override;
  // Only LVs of this backend's own type are its volumes.
  Status CheckIsVolume(const std::string& name, const LvmRow& row, bool creating) const override;
  BackendVolume ToVolume(const LvmRow& row) const override;
  std::string Object(const std::string& name, const LvmRow& /*row*/) const override {
    return kind() + " pool " + vg_ + ": LV " + name;
  }
  StatusOr<BackendVolume> DoCreate(const std::string& name, int64_t size_bytes, VolumeMode mode,
                                   const std::map<std::string, std::string>& params,
                                   const std::string& owner_uid,
                                   const std::optional<VolumeRoot>& root,
                                   std::unique_lock<std::mutex>& lock) override;
  // Finishes the zeroing a create left undone.
  StatusOr<BackendVolume> ResumeCreate(const LvmRow& row,
                                       std::unique_lock<std::mutex>& lock) override;
  StatusOr<BackendVolume> DoExpand(const LvmRow& found, int64_t size_bytes,
                                   std::unique_lock<std::mutex>& lock) override;
  Status DoDelete(const std::string& name, const std::optional<LvmRow>& row) override;
  Status WriteMark(const LvmRow& row, const std::string& owner_uid) override;
  StatusOr<std::vector<BackendVolume>> ListVolumes() override;
  StatusOr<PoolCapacity> ReadCapacity() override;
  // Refuses an LV whose zeroing is pending.
  StatusOr<std::string> DoExpose(const LvmRow& row) override;
  Status DoUnexpose(const std::string& /*name*/) override { return Status::Ok(); }

  Status CheckSnapshots(bool detached) const override;
  Status CheckCopies(const VolumeSource& source) const override;
  StatusOr<std::optional<BackendSnapshot>> FindSnapshotRow(const std::string& name) override;
  StatusOr<std::vector<BackendSnapshot>> ListSnapshotRows() override;
  StatusOr<BackendSnapshot> DoCreateSnapshot(const LvmRow& row, const std::string& name,
                                             const std::string& snapshot_uid, bool detached,
                                             std::unique_lock<std::mutex>& lock) override;
  Status DoDeleteSnapshot(const BackendSnapshot& snap) override;
  StatusOr<BackendVolume> DoCreateFromSnapshot(const std::string& name, int64_t size_bytes,
                                               VolumeMode mode,
                                               const std::map<std::string, std::string>& params,
                                               const std::string& owner_uid,
                                               const BackendSnapshot& snap, bool detached,
                                               std::unique_lock<std::mutex>& lock) override;
  StatusOr<BackendVolume> DoCloneVolume(const std::string& name, int64_t size_bytes,
                                        VolumeMode mode,
                                        const std::map<std::string, std::string>& params,
                                        const std::string& owner_uid, const LvmRow& source,
                                        bool detached, std::unique_lock<std::mutex>& lock) override;

 private:
  bool IsSnapshot(const LvmRow& row) const;
  // Snapshot LVs with their creation time (lvs with lv_time).
  StatusOr<std::vector<LvmRow>> ListSnapshotLvs();
  BackendSnapshot ToSnapshot(const LvmRow& row) const;
  // A thin snapshot of `source` (an LV of the VG) named `name`, marked as
  // owner_uid's volume made from `origin_tag`, grown to size_bytes.
  StatusOr<BackendVolume> ThinCopy(const std::string& name, int64_t size_bytes,
                                   const std::string& owner_uid, const std::string& source,
                                   const std::string& origin_tag,
                                   std::unique_lock<std::mutex>& lock);
  std::string DevicePath(const std::string& name) const { return "/dev/" + vg_ + "/" + name; }
  bool IsOurs(const LvmRow& row) const;

  StatusOr<std::vector<LvmRow>> ListRows();
  // Releases `lock` and zeroes what a new LV still has to (see FinishZeroing).
  StatusOr<BackendVolume> FinishCreate(LvmRow row, std::unique_lock<std::mutex>& lock);
  // Zeroes row's LV from its zero_from to its end, chunk by chunk, then
  // removes the tag. Runs without mu_ (see the header comment).
  Status FinishZeroing(const LvmRow& row);

  const std::string vg_;
  const std::string thin_pool_;
  Exec& exec_;
};

}  // namespace pillar::agent
