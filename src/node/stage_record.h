// What this node staged, one JSON file per volume under the state directory,
// written atomically: a restarted plugin unstages, heals and reports on what
// it staged before, and decides "last user of this subsystem" from them.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/fs.h"
#include "node/attach/attacher.h"

namespace pillar::node {

struct StageRecord {
  std::string volume_id;
  std::string staging_path;
  RemoteTarget target;
  bool block = false;   // access type block (no file system at staging)
  std::string fs_type;  // the file system found or made (mount access)
  std::vector<std::string> mount_flags;
  bool read_only = false;
  std::string device;  // "/dev/nvme0n1" once attached
  // "attaching" is written before any connect, so a crash mid-stage still
  // leaves a record that NodeUnstage can clean up; "staged" when done.
  std::string state;
};

std::string StageRecordToJson(const StageRecord& r);
StatusOr<StageRecord> StageRecordFromJson(const std::string& text);

class StageRecordStore {
 public:
  // dir: <state-dir>/volumes
  StageRecordStore(Fs& fs, std::string dir) : fs_(fs), dir_(std::move(dir)) {}

  Status Init();  // creates the directory
  // NOT_FOUND when the volume has no record.
  StatusOr<StageRecord> Get(const std::string& volume_id);
  Status Put(const StageRecord& r);
  Status Delete(const std::string& volume_id);  // absent is OK
  // Every readable record; unreadable files are skipped with a warning so one
  // corrupt file does not hide the others.
  std::vector<StageRecord> List();

 private:
  std::string PathFor(const std::string& volume_id) const;

  Fs& fs_;
  std::string dir_;
};

}  // namespace pillar::node
