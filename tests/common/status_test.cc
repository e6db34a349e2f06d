#include "common/status.h"

#include <gtest/gtest.h>

namespace pillar {
namespace {

StatusOr<int> Half(int v) {
  if (v % 2 != 0) return InvalidArgument("odd value " + std::to_string(v));
  return v / 2;
}

Status UseHalf(int v, int* out) {
  ASSIGN_OR_RETURN(*out, Half(v));
  RETURN_IF_ERROR(Status::Ok());
  return Status::Ok();
}

TEST(StatusTest, CarriesCodeAndMessage) {
  Status s = NotFound("volume tank/v1");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Code::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: volume tank/v1");
  EXPECT_EQ(s.Annotate("agent").message(), "agent: volume tank/v1");
  EXPECT_TRUE(Status::Ok().Annotate("x").ok());
}

TEST(StatusTest, StatusOrPropagates) {
  int out = 0;
  EXPECT_TRUE(UseHalf(8, &out).ok());
  EXPECT_EQ(out, 4);
  Status s = UseHalf(3, &out);
  EXPECT_EQ(s.code(), Code::kInvalidArgument);
  EXPECT_EQ(s.message(), "odd value 3");
}

}  // namespace
}  // namespace pillar
