// csi-call: a tiny generic client for the e2e tests. Calls one method of the
// CSI Identity, Controller or Node service, or of pillar's NodeRegistry, with
// a JSON request, and prints the JSON response.
//
//   csi-call --endpoint unix:///csi/csi.sock CreateVolume '{"name":"v1",...}'
//   csi-call --endpoint 10.99.0.1:9600 RegisterNode '{"identity":{...}}'
//   csi-call --endpoint unix:///csi/csi.sock csi.v1.Node/NodeGetInfo '{}'
//
// On success the response is printed on stdout (JSON, proto field names in
// lowerCamelCase, defaults included) and the exit code is 0. On a gRPC error
// "CODE_NAME: message" goes to stderr and the exit code is the gRPC code
// number (1..16). Usage errors exit with 64, a bad request JSON with 65.
// Options: --timeout SECONDS (default 120), --list (print every method).
#include <google/protobuf/descriptor.h>
#include <google/protobuf/dynamic_message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/support/byte_buffer.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "csi/v1/csi.pb.h"
#include "pillar/registry/v1/registry.pb.h"

namespace {

namespace pb = google::protobuf;

// The services this client knows; the first one that has the method wins.
const char* const kServices[] = {"csi.v1.Identity", "csi.v1.Controller", "csi.v1.Node",
                                 "pillar.registry.v1.NodeRegistry"};

const char* CodeName(int code) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  return code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
}

void Usage() {
  std::cerr << "usage: csi-call --endpoint unix:///path|HOST:PORT [--timeout S]\n"
               "                [--metadata KEY=VALUE]... METHOD 'JSON'\n"
               "       csi-call --list\n"
               "METHOD: a method name of csi.v1.Identity/Controller/Node or\n"
               "pillar.registry.v1.NodeRegistry, optionally as Service/Method.\n";
}

const pb::MethodDescriptor* FindMethod(const std::string& name) {
  const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
  std::string service, method = name;
  if (size_t slash = name.rfind('/'); slash != std::string::npos) {
    service = name.substr(0, slash);
    method = name.substr(slash + 1);
    if (!service.empty() && service[0] == '/') service = service.substr(1);
  }
  for (const char* s : kServices) {
    if (!service.empty() && service != s) continue;
    const pb::ServiceDescriptor* sd = pool->FindServiceByName(s);
    if (sd == nullptr) continue;
    if (const pb::MethodDescriptor* md = sd->FindMethodByName(method)) return md;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  // Make sure the generated descriptors are linked in and registered.
  (void)csi::v1::CreateVolumeRequest::descriptor();
  (void)pillar::registry::v1::NodeIdentity::descriptor();

  std::string endpoint;
  int timeout_s = 120;
  std::vector<std::string> rest;
  std::vector<std::pair<std::string, std::string>> metadata;  // e.g. authorization=Bearer ...
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--endpoint" && i + 1 < argc) {
      endpoint = argv[++i];
    } else if (a == "--timeout" && i + 1 < argc) {
      timeout_s = std::atoi(argv[++i]);
    } else if (a.rfind("--endpoint=", 0) == 0) {
      endpoint = a.substr(11);
    } else if (a.rfind("--timeout=", 0) == 0) {
      timeout_s = std::atoi(a.c_str() + 10);
    } else if (a == "--metadata" && i + 1 < argc) {
      std::string kv = argv[++i];
      size_t eq = kv.find('=');
      if (eq == std::string::npos || eq == 0) {
        std::cerr << "csi-call: --metadata wants KEY=VALUE, got \"" << kv << "\"\n";
        return 64;
      }
      metadata.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
    } else if (a == "--list") {
      const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
      for (const char* s : kServices) {
        const pb::ServiceDescriptor* sd = pool->FindServiceByName(s);
        for (int m = 0; sd != nullptr && m < sd->method_count(); ++m) {
          std::cout << s << "/" << sd->method(m)->name() << "\n";
        }
      }
      return 0;
    } else if (a == "-h" || a == "--help") {
      Usage();
      return 0;
    } else {
      rest.push_back(a);
    }
  }
  if (endpoint.empty() || rest.empty() || rest.size() > 2 || timeout_s <= 0) {
    Usage();
    return 64;
  }
  const pb::MethodDescriptor* md = FindMethod(rest[0]);
  if (md == nullptr) {
    std::cerr << "csi-call: unknown method \"" << rest[0] << "\" (see --list)\n";
    return 64;
  }
  if (md->client_streaming() || md->server_streaming()) {
    std::cerr << "csi-call: streaming methods are not supported\n";
    return 64;
  }

  pb::DynamicMessageFactory factory(pb::DescriptorPool::generated_pool());
  std::unique_ptr<pb::Message> req(factory.GetPrototype(md->input_type())->New());
  std::unique_ptr<pb::Message> resp(factory.GetPrototype(md->output_type())->New());
  std::string json = rest.size() > 1 ? rest[1] : "{}";
  if (json.empty()) json = "{}";
  auto st = pb::util::JsonStringToMessage(json, req.get());
  if (!st.ok()) {
    std::cerr << "csi-call: bad request JSON for " << md->input_type()->full_name() << ": "
              << st.ToString() << "\n";
    return 65;
  }
  std::string wire;
  if (!req->SerializeToString(&wire)) {
    std::cerr << "csi-call: cannot serialize the request\n";
    return 65;
  }

  // unix:///path is taken by gRPC as is; anything else is HOST:PORT.
  auto channel = grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(timeout_s));
  ctx.set_wait_for_ready(false);
  for (const auto& [key, value] : metadata) ctx.AddMetadata(key, value);
  grpc::Slice slice(wire);
  grpc::ByteBuffer request_buf(&slice, 1);
  grpc::ByteBuffer response_buf;
  grpc::CompletionQueue cq;
  std::string path = "/" + md->service()->full_name() + "/" + md->name();
  auto call = stub.PrepareUnaryCall(&ctx, path, request_buf, &cq);
  call->StartCall();
  grpc::Status status;
  call->Finish(&response_buf, &status, reinterpret_cast<void*>(1));
  void* tag = nullptr;
  bool ok = false;
  if (!cq.Next(&tag, &ok) || !ok) {
    std::cerr << "csi-call: the call did not complete\n";
    return 2;
  }
  if (!status.ok()) {
    std::cerr << CodeName(status.error_code()) << ": " << status.error_message() << "\n";
    return static_cast<int>(status.error_code());
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (!response_buf.Dump(&slices).ok()) {
    std::cerr << "csi-call: cannot read the response\n";
    return 2;
  }
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  if (!resp->ParseFromString(bytes)) {
    std::cerr << "csi-call: cannot parse the response as " << md->output_type()->full_name()
              << "\n";
    return 2;
  }
  pb::util::JsonPrintOptions opts;
  opts.always_print_primitive_fields = true;
  std::string out;
  st = pb::util::MessageToJsonString(*resp, &out, opts);
  if (!st.ok()) {
    std::cerr << "csi-call: cannot print the response: " << st.ToString() << "\n";
    return 2;
  }
  std::cout << out << "\n";
  return 0;
}
