// The self-healing pass over every staged volume: a lost connection is
// reconnected, a connected target whose device is missing is rescanned
// (seed 003: the namespace notification that never came), an NFS staging
// mount that vanished is mounted again. It never disconnects, formats or
// unmounts anything, and it skips a volume an RPC is working on.
#pragma once

#include <map>
#include <mutex>
#include <string>

#include "node/attach/nfs.h"
#include "node/mounter.h"
#include "node/node_core.h"
#include "node/stage_record.h"
#include "node/volume_locks.h"

namespace pillar::node {

struct HealReport {
  int checked = 0;
  int healthy = 0;
  int repaired = 0;  // a repair step ran (its effect shows on the next pass)
  int skipped = 0;   // busy with an RPC
};

class SelfHealer {
 public:
  SelfHealer(StageRecordStore& records, Attachers attachers, Mounter& mounter, NfsMounter& nfs,
             VolumeLocks& volume_locks, NamedLocks& connection_locks)
      : records_(records),
        attachers_(attachers),
        mounter_(mounter),
        nfs_(nfs),
        volume_locks_(volume_locks),
        connection_locks_(connection_locks) {}

  HealReport RunOnce();

 private:
  // true when something was repaired.
  bool HealOne(const StageRecord& rec, const std::string& mountinfo);

  StageRecordStore& records_;
  Attachers attachers_;
  Mounter& mounter_;
  NfsMounter& nfs_;
  VolumeLocks& volume_locks_;
  NamedLocks& connection_locks_;
};

}  // namespace pillar::node
