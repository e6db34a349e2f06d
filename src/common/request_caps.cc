#include "common/request_caps.h"

#include <string>
#include <vector>

#include "common/caps.h"

namespace pillar {
namespace {

namespace pb = google::protobuf;

Status Walk(const pb::Message& msg, const std::string& prefix) {
  const pb::Reflection* refl = msg.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  refl->ListFields(msg, &fields);  // only the fields that are set
  for (const pb::FieldDescriptor* f : fields) {
    std::string path = prefix.empty() ? f->name() : prefix + "." + f->name();
    if (f->is_repeated()) {
      int n = refl->FieldSize(msg, f);
      RETURN_IF_ERROR(caps::CheckCount(path, f->name(), static_cast<size_t>(n)));
      // Map entries hold scalars here; messages in lists may nest more lists.
      if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE && !f->is_map()) {
        for (int i = 0; i < n; ++i) {
          RETURN_IF_ERROR(
              Walk(refl->GetRepeatedMessage(msg, f, i), path + "[" + std::to_string(i) + "]"));
        }
      }
    } else if (f->cpp_type() == pb::FieldDescriptor::CPPTYPE_MESSAGE) {
      RETURN_IF_ERROR(Walk(refl->GetMessage(msg, f), path));
    }
  }
  return Status::Ok();
}

}  // namespace

Status CheckRequestCaps(const google::protobuf::Message& request) { return Walk(request, ""); }

}  // namespace pillar
