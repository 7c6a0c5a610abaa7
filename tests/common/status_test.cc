// common/status.h: Status and Result, the error values that cross module seams.
#include "common/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace pagoda {
namespace {

Status FailIfNegative(int v) {
  if (v < 0) return InvalidArgument("v: expected >= 0, got " + std::to_string(v));
  return Status::Ok();
}

Result<int> Double(int v) {
  PAGODA_RETURN_IF_ERROR(FailIfNegative(v));
  return 2 * v;
}

Result<int> Quadruple(int v) {
  PAGODA_ASSIGN_OR_RETURN(int twice, Double(v));
  return 2 * twice;
}

TEST(StatusTest, OkAndErrorCarryCodeAndMessage) {
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  const Status s = NotFound("model.gguf: no such file");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: model.gguf: no such file");
}

TEST(StatusTest, WithPrefixKeepsTheCodeAndLeavesOkAlone) {
  const Status s = InvalidArgument("bad").WithPrefix("config.yaml");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "config.yaml: bad");
  EXPECT_TRUE(Status::Ok().WithPrefix("x").ok());
}

TEST(ResultTest, MacrosPropagateTheFirstError) {
  Result<int> ok = Quadruple(3);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, 12);
  Result<int> bad = Quadruple(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "v: expected >= 0, got -1");
}

TEST(ResultTest, HoldsMoveOnlyValues) {
  Result<std::unique_ptr<int>> r = std::make_unique<int>(7);
  ASSERT_TRUE(r.ok());
  std::unique_ptr<int> p = std::move(r).value();
  EXPECT_EQ(*p, 7);
}

}  // namespace
}  // namespace pagoda
