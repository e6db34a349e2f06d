// The CSI controller under test: ControllerFixture's store and scripted
// agent (with a 100 GiB pool "tank"), a quiet reconciler (no periodic
// resync or epoch poll: a test drives them) and a leader gate it can flip.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>

#include "controller/controller_fixture.h"
#include "controller/csi_controller.h"
#include "controller/leader.h"

namespace pillar::controller::testing {

constexpr int64_t kGiB = 1LL << 30;

class SwitchableLeader : public LeaderGate {
 public:
  bool IsLeader() override { return leader_; }
  void Set(bool leader) { leader_ = leader; }

 private:
  std::atomic<bool> leader_{true};
};

class CsiFixture : public ControllerFixture {
 protected:
  void SetUp() override {
    ControllerFixture::SetUp();
    ReconcilerOptions quiet;
    quiet.resync_interval = std::chrono::hours(24);
    quiet.epoch_poll_interval = std::chrono::hours(24);
    reconciler_ = std::make_unique<ExportReconciler>(store(), agents_, clock_, quiet);
    csi_ = std::make_unique<CsiController>(store(), agents_, *reconciler_, leader_, clock_);
    agent_->AddPool("tank", 100 * kGiB, 40 * kGiB);
  }

  SwitchableLeader leader_;
  std::unique_ptr<ExportReconciler> reconciler_;
  std::unique_ptr<CsiController> csi_;
};

}  // namespace pillar::controller::testing
