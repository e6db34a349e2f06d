// Where the Kubernetes API is and who we are to it: a kubeconfig file or the
// ServiceAccount files of a pod.
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kube/client.h"

namespace pillar::kube {
namespace {

StatusOr<std::string> ReadFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return NotFound(what + " " + path + " does not exist");
    return Unavailable(what + " " + path + " cannot be read");
  }
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

StatusOr<std::string> Base64Decode(const std::string& in, const std::string& field) {
  static constexpr unsigned char kBad = 255;
  unsigned char table[256];
  std::fill(std::begin(table), std::end(table), kBad);
  const std::string alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (size_t i = 0; i < alphabet.size(); ++i) {
    table[static_cast<unsigned char>(alphabet[i])] = static_cast<unsigned char>(i);
  }
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  size_t pad = 0;
  for (char ch : in) {
    auto c = static_cast<unsigned char>(ch);
    if (c == '\n' || c == '\r' || c == ' ') continue;
    if (c == '=') {
      ++pad;
      continue;
    }
    if (pad > 0 || table[c] == kBad) return InvalidArgument(field + ": not base64");
    acc = (acc << 6) | table[c];
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (pad > 2 || out.empty()) return InvalidArgument(field + ": not base64");
  return out;
}

// One named entry of a kubeconfig list ("clusters", "users", "contexts").
StatusOr<YAML::Node> Named(const YAML::Node& root, const std::string& list, const std::string& name,
                           const std::string& inner) {
  const YAML::Node entries = root[list];
  if (entries && entries.IsSequence()) {
    for (const auto& e : entries) {
      if (e.IsMap() && e["name"] && e["name"].as<std::string>("") == name) {
        YAML::Node body = e[inner];
        if (!body || !body.IsMap()) {
          return InvalidArgument("kubeconfig " + list + "[" + name + "]." + inner + " is missing");
        }
        return body;
      }
    }
  }
  return InvalidArgument("kubeconfig " + list + ": no entry named \"" + name + "\"");
}

std::string Scalar(const YAML::Node& node, const char* key) {
  const YAML::Node v = node[key];
  return v && v.IsScalar() ? v.as<std::string>() : std::string();
}

// The PEM of `key-data` (base64) or of the file `key` (relative to `dir`).
StatusOr<std::string> DataOrFile(const YAML::Node& node, const std::string& key,
                                 const std::string& where, const std::filesystem::path& dir) {
  std::string data = Scalar(node, (key + "-data").c_str());
  if (!data.empty()) return Base64Decode(data, where + "." + key + "-data");
  std::string file = Scalar(node, key.c_str());
  if (file.empty()) return std::string();
  std::filesystem::path p(file);
  if (p.is_relative()) p = dir / p;
  return ReadFile(p.string(), where + "." + key);
}

}  // namespace

StatusOr<Config> LoadKubeconfig(const std::string& path, const std::string& context) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "kubeconfig"));
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig " + path + " is not YAML: " + e.what());
  }
  if (!root.IsMap()) return InvalidArgument("kubeconfig " + path + " is not a YAML map");
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  std::string ctx_name = context.empty() ? Scalar(root, "current-context") : context;
  if (ctx_name.empty()) return InvalidArgument("kubeconfig current-context is not set");
  try {
    ASSIGN_OR_RETURN(YAML::Node ctx, Named(root, "contexts", ctx_name, "context"));
    std::string cluster_name = Scalar(ctx, "cluster");
    std::string user_name = Scalar(ctx, "user");
    if (cluster_name.empty()) {
      return InvalidArgument("kubeconfig contexts[" + ctx_name + "].context.cluster is missing");
    }
    ASSIGN_OR_RETURN(YAML::Node cluster, Named(root, "clusters", cluster_name, "cluster"));
    Config c;
    const std::string cwhere = "kubeconfig clusters[" + cluster_name + "].cluster";
    c.server = Scalar(cluster, "server");
    if (c.server.rfind("https://", 0) != 0 && c.server.rfind("http://", 0) != 0) {
      return InvalidArgument(cwhere + ".server \"" + c.server + "\" is not an http(s) URL");
    }
    while (!c.server.empty() && c.server.back() == '/') c.server.pop_back();
    ASSIGN_OR_RETURN(c.ca_pem, DataOrFile(cluster, "certificate-authority", cwhere, dir));
    if (Scalar(cluster, "insecure-skip-tls-verify") == "true") {
      return InvalidArgument(cwhere +
                             ".insecure-skip-tls-verify: pillar always verifies the server");
    }
    if (!user_name.empty()) {
      ASSIGN_OR_RETURN(YAML::Node user, Named(root, "users", user_name, "user"));
      const std::string uwhere = "kubeconfig users[" + user_name + "].user";
      ASSIGN_OR_RETURN(c.client_cert_pem, DataOrFile(user, "client-certificate", uwhere, dir));
      ASSIGN_OR_RETURN(c.client_key_pem, DataOrFile(user, "client-key", uwhere, dir));
      if (c.client_cert_pem.empty() != c.client_key_pem.empty()) {
        return InvalidArgument(uwhere +
                               ": a client certificate needs its key, and a key its "
                               "certificate");
      }
      c.token = Scalar(user, "token");
      std::string token_file = Scalar(user, "tokenFile");
      if (!token_file.empty()) {
        std::filesystem::path p(token_file);
        if (p.is_relative()) p = dir / p;
        c.token_file = p.string();
      }
    }
    std::string ns = Scalar(ctx, "namespace");
    if (!ns.empty()) c.namespace_name = ns;
    return c;
  } catch (const YAML::Exception& e) {
    return InvalidArgument("kubeconfig " + path + ": " + e.what());
  }
}

StatusOr<Config> InClusterConfig(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return FailedPrecondition(
        "not in a pod (KUBERNETES_SERVICE_HOST/PORT unset): give a kubeconfig");
  }
  Config c;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  c.server = "https://" + h + ":" + port;
  ASSIGN_OR_RETURN(c.ca_pem, ReadFile(sa_dir + "/ca.crt", "in-cluster CA"));
  c.token_file = sa_dir + "/token";
  RETURN_IF_ERROR(ReadFile(c.token_file, "in-cluster token").status());
  auto ns = ReadFile(sa_dir + "/namespace", "in-cluster namespace");
  if (ns.ok()) {
    std::string n = *ns;
    while (!n.empty() && (n.back() == '\n' || n.back() == ' ')) n.pop_back();
    if (!n.empty()) c.namespace_name = n;
  }
  return c;
}

StatusOr<Config> LoadConfig(const std::string& kubeconfig) {
  if (kubeconfig.empty()) return InClusterConfig();
  return LoadKubeconfig(kubeconfig);
}

}  // namespace pillar::kube
