#include "common/grpc_peer.h"

#include <grpc/grpc_security_constants.h>

#include "common/grpc_status.h"
#include "common/log.h"

namespace pillar {
namespace {

std::vector<std::string> Property(const grpc::AuthContext& ctx, const char* name) {
  std::vector<std::string> out;
  for (const auto& v : ctx.FindPropertyValues(name)) out.emplace_back(v.data(), v.size());
  return out;
}

class PolicyProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit PolicyProcessor(RpcPolicy policy) : policy_(std::move(policy)) {}

  // Runs inline on the transport's thread: it only reads memory.
  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& md, grpc::AuthContext* ctx, OutputMetadata*,
                       OutputMetadata*) override {
    std::string method;
    if (auto it = md.find(":path"); it != md.end())
      method.assign(it->second.data(), it->second.size());
    if (ctx == nullptr) return {grpc::StatusCode::UNAUTHENTICATED, "no peer certificate"};
    Status s = policy_.Admit(method, PeerIdentityOf(*ctx));
    if (!s.ok()) {
      log::Warn("call refused", {{"service", policy_.service()},
                                 {"method", method},
                                 {"peer", DescribePeer(*ctx)},
                                 {"error", s.ToString()}});
    }
    return ToGrpc(s);
  }

 private:
  RpcPolicy policy_;
};

}  // namespace

StatusOr<PeerIdentity> PeerIdentityOf(const grpc::AuthContext& ctx) {
  if (!ctx.IsPeerAuthenticated()) return Unauthenticated("the caller presented no certificate");
  return IdentityFromUris(Property(ctx, GRPC_PEER_URI_PROPERTY_NAME));
}

std::string DescribePeer(const grpc::AuthContext& ctx) {
  auto id = PeerIdentityOf(ctx);
  if (id.ok()) return id->Uri();
  auto cn = Property(ctx, GRPC_X509_CN_PROPERTY_NAME);
  if (!cn.empty()) return "CN=" + cn.front();
  return "unauthenticated";
}

std::shared_ptr<grpc::AuthMetadataProcessor> PolicyEnforcer(RpcPolicy policy) {
  return std::make_shared<PolicyProcessor>(std::move(policy));
}

}  // namespace pillar
