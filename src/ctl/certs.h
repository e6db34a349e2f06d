// `pillarctl certs`: a CA and per-role certificates carrying the
// pillar-csi://<role>/<name> URI SAN the agent and registry admit callers by
// (common/peer_identity.h). OpenSSL's library, no shell.
#pragma once

#include <string>
#include <vector>

#include "common/peer_identity.h"
#include "common/status.h"

namespace pillar::ctl {

// Writes DIR/ca.crt and DIR/ca.key (0600): a self-signed EC P-256 CA.
// ALREADY_EXISTS when either file is there (a CA is never overwritten).
Status IssueCa(const std::string& dir, const std::string& common_name, int days);

struct LeafRequest {
  Role role = Role::kNode;
  std::string name;                    // the URI's <name>; also the subject CN
  std::vector<std::string> dns_names;  // extra SANs for a server certificate
  std::vector<std::string> ip_addresses;
  int days = 365;
};

// Signs a certificate for `req` with the CA in `ca_dir` and writes
// DIR/tls.crt, DIR/tls.key (0600) and DIR/ca.crt: the shape of a Kubernetes
// TLS Secret and of pillar's --*-tls-* flags. ALREADY_EXISTS when tls.crt or
// tls.key is there (rotate into a new directory, then swap).
Status IssueLeaf(const std::string& ca_dir, const std::string& dir, const LeafRequest& req);

}  // namespace pillar::ctl
