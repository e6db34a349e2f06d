// The Store over the Kubernetes API server: each kind is a cluster-scoped
// custom resource, so `kubectl get pvst` shows what the controller recorded.
//
//   Get / List      GET the object / the collection (paged, one snapshot)
//   Create          POST, then the status through the status subresource
//                   (a create cannot set status there); if that second write
//                   fails the object is deleted again (uid precondition)
//   Update          JSON patch of spec and labels, UpdateStatus of status, each
//                   led by `test` operations on uid and resourceVersion: a
//                   compare-and-swap, and nothing else of the object (its
//                   annotations, finalizers, managedFields) is touched
//   Delete          DELETE with uid / resourceVersion preconditions
//   Watch           watch=1 with bookmarks from a resourceVersion; a stream
//                   the server ends or that breaks is resumed from the last
//                   version seen; 410 Gone is OUT_OF_RANGE (relist)
//
// Bad input from the server (an object without metadata, a spec that is not
// an object, a line that is not JSON) is an error for that object, logged
// with its name; a List skips it and a watch goes on without it.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>

#include "kube/client.h"
#include "store/store.h"

namespace pillar::store {

struct KubeResource {
  std::string group;    // "pillar-csi.bhyoo.com"
  std::string version;  // "v1alpha1"
  std::string plural;   // "pillarvolumestates"
};

struct KubeStoreOptions {
  std::map<std::string, KubeResource> kinds;  // kind -> its resource
  // How long one watch request may stay open before the server ends it (and
  // the watch resumes with a new request).
  std::chrono::seconds watch_timeout{300};
  // The wait after a failed watch request, doubled up to max on each failure.
  std::chrono::milliseconds retry_base{200};
  std::chrono::milliseconds retry_max{std::chrono::seconds(10)};
  // Objects per page of a List.
  int page_size = 500;
};

// pillar's own kinds in pillar-csi.bhyoo.com/v1alpha1.
KubeStoreOptions PillarKubeOptions();

// A Kubernetes object name (DNS-1123 subdomain): INVALID_ARGUMENT naming
// `field` otherwise.
Status ValidateKubeName(std::string_view field, std::string_view name);

class KubeStore : public Store {
 public:
  KubeStore(std::shared_ptr<kube::Client> client, KubeStoreOptions options);
  // "" = in-cluster; otherwise a kubeconfig.
  static StatusOr<std::unique_ptr<KubeStore>> Open(const std::string& kubeconfig,
                                                   KubeStoreOptions options = PillarKubeOptions());

  StatusOr<Object> Get(const std::string& kind, const std::string& name) override;
  StatusOr<ListResult> List(const std::string& kind,
                            const std::optional<LabelSelector>& selector = {}) override;
  StatusOr<Object> Create(const Object& object) override;
  StatusOr<Object> Update(const Object& object) override;
  StatusOr<Object> UpdateStatus(const Object& object) override;
  // One request: the patch is made from `base`, led by tests of its uid and
  // resourceVersion, with no read before it.
  StatusOr<Object> UpdateStatusFrom(const Object& base, const Object& next) override;
  Status Delete(const std::string& kind, const std::string& name,
                const Preconditions& preconditions = {}) override;
  StatusOr<std::unique_ptr<WatchHandle>> Watch(const std::string& kind,
                                               const std::string& from_resource_version,
                                               EventHandler on_event,
                                               ErrorHandler on_error = nullptr) override;

  kube::Client& client() { return *client_; }

 private:
  StatusOr<const KubeResource*> Resource(const std::string& kind) const;
  StatusOr<std::string> CollectionPath(const std::string& kind) const;
  StatusOr<std::string> ObjectPath(const std::string& kind, const std::string& name) const;
  // Update and UpdateStatus: read (unless the caller's `base` stands for the
  // stored object), compare, then a JSON patch led by tests.
  StatusOr<Object> Patch(const Object& in, bool status, const Object* base = nullptr);

  std::shared_ptr<kube::Client> client_;
  KubeStoreOptions options_;
};

// The Kubernetes JSON of an object of `kind` -> Object; INVALID_ARGUMENT
// naming the field when the server's object is malformed.
StatusOr<Object> FromKubeJson(const std::string& kind, const nlohmann::json& j);

}  // namespace pillar::store
