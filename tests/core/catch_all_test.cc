// CatchAll (core/src/catch_all.h): an exception becomes an Internal error
// naming where it happened, whatever the callable returns.
#include "core/src/catch_all.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace batchcast {
namespace {

TEST(CatchAll, PassesResultsThrough) {
  EXPECT_TRUE(CatchAll("x", [] {}).ok());
  EXPECT_EQ(CatchAll("x", [] { return NotFoundError("gone"); }).code(), StatusCode::kNotFound);
  Result<int> r = CatchAll("x", []() -> Result<int> { return 7; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 7);
}

TEST(CatchAll, TurnsExceptionsIntoInternalErrors) {
  const Status v = CatchAll("the control thread", [] { throw std::runtime_error("boom"); });
  EXPECT_EQ(v.code(), StatusCode::kInternal);
  EXPECT_EQ(v.message(), "unexpected exception in the control thread: boom");
  const Status s = CatchAll("a worker", []() -> Status { throw 42; });
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_EQ(s.message(), "unexpected exception in a worker");
  Result<std::string> r =
      CatchAll("stats", []() -> Result<std::string> { throw std::bad_alloc(); });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("stats"), std::string::npos);
}

}  // namespace
}  // namespace batchcast
