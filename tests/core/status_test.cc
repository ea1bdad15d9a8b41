// Tests of batchcast::Status, batchcast::Result<T> and the RETURN/ASSIGN macros.
#include "batchcast/core/status.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace batchcast {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_TRUE(Status::Ok().ok());
  EXPECT_EQ(Status::Ok(), Status());
}

TEST(StatusTest, OkCodeDropsTheMessage) {
  Status s(StatusCode::kOk, "ignored");
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.message(), "");
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s, Status::Ok());
}

TEST(StatusTest, CodeValuesAreStable) {
  // The numeric values travel in ERROR messages: never renumber.
  EXPECT_EQ(static_cast<int>(StatusCode::kOk), 0);
  EXPECT_EQ(static_cast<int>(StatusCode::kInvalidArgument), 1);
  EXPECT_EQ(static_cast<int>(StatusCode::kNotFound), 2);
  EXPECT_EQ(static_cast<int>(StatusCode::kUnavailable), 3);
  EXPECT_EQ(static_cast<int>(StatusCode::kDeadlineExceeded), 4);
  EXPECT_EQ(static_cast<int>(StatusCode::kResourceExhausted), 5);
  EXPECT_EQ(static_cast<int>(StatusCode::kCancelled), 6);
  EXPECT_EQ(static_cast<int>(StatusCode::kInternal), 7);
  EXPECT_EQ(static_cast<int>(StatusCode::kOutOfRange), 8);
  EXPECT_EQ(static_cast<int>(StatusCode::kDataLoss), 9);
  EXPECT_EQ(static_cast<int>(StatusCode::kPermissionDenied), 10);
}

TEST(StatusTest, CodeNames) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kInvalidArgument), "InvalidArgument");
  EXPECT_EQ(StatusCodeName(StatusCode::kNotFound), "NotFound");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnavailable), "Unavailable");
  EXPECT_EQ(StatusCodeName(StatusCode::kDeadlineExceeded), "DeadlineExceeded");
  EXPECT_EQ(StatusCodeName(StatusCode::kResourceExhausted), "ResourceExhausted");
  EXPECT_EQ(StatusCodeName(StatusCode::kCancelled), "Cancelled");
  EXPECT_EQ(StatusCodeName(StatusCode::kInternal), "Internal");
  EXPECT_EQ(StatusCodeName(StatusCode::kOutOfRange), "OutOfRange");
  EXPECT_EQ(StatusCodeName(StatusCode::kDataLoss), "DataLoss");
  EXPECT_EQ(StatusCodeName(StatusCode::kPermissionDenied), "PermissionDenied");
  // A value that is not a code (e.g. from a corrupted peer) still has a name.
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(200)), "Unknown");
}

TEST(StatusTest, Constructors) {
  struct Case {
    Status status;
    StatusCode code;
    const char* name;
  };
  const std::vector<Case> cases = {
      {InvalidArgumentError("m"), StatusCode::kInvalidArgument, "InvalidArgument"},
      {NotFoundError("m"), StatusCode::kNotFound, "NotFound"},
      {UnavailableError("m"), StatusCode::kUnavailable, "Unavailable"},
      {DeadlineExceededError("m"), StatusCode::kDeadlineExceeded, "DeadlineExceeded"},
      {ResourceExhaustedError("m"), StatusCode::kResourceExhausted, "ResourceExhausted"},
      {CancelledError("m"), StatusCode::kCancelled, "Cancelled"},
      {InternalError("m"), StatusCode::kInternal, "Internal"},
      {OutOfRangeError("m"), StatusCode::kOutOfRange, "OutOfRange"},
      {DataLossError("m"), StatusCode::kDataLoss, "DataLoss"},
      {PermissionDeniedError("m"), StatusCode::kPermissionDenied, "PermissionDenied"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_FALSE(c.status.ok());
    EXPECT_EQ(c.status.code(), c.code);
    EXPECT_EQ(c.status.message(), "m");
    EXPECT_EQ(c.status.ToString(), std::string(c.name) + ": m");
    EXPECT_EQ(c.status, Status(c.code, "m"));
  }
}

TEST(StatusTest, ToString) {
  EXPECT_EQ(NotFoundError("server 'demo' not found").ToString(),
            "NotFound: server 'demo' not found");
  EXPECT_EQ(InternalError("").ToString(), "Internal: ");
}

TEST(StatusTest, Equality) {
  EXPECT_EQ(NotFoundError("a"), NotFoundError("a"));
  EXPECT_FALSE(NotFoundError("a") == NotFoundError("b"));
  EXPECT_FALSE(NotFoundError("a") == InternalError("a"));
  EXPECT_FALSE(NotFoundError("a") == Status::Ok());
}

TEST(StatusTest, WithContext) {
  const Status s = UnavailableError("no heartbeat for 2000 ms");
  const Status c = s.WithContext("server 'demo'");
  EXPECT_EQ(c.code(), StatusCode::kUnavailable);
  EXPECT_EQ(c.message(), "server 'demo': no heartbeat for 2000 ms");
  EXPECT_EQ(c.ToString(), "Unavailable: server 'demo': no heartbeat for 2000 ms");
  // The original is unchanged.
  EXPECT_EQ(s.message(), "no heartbeat for 2000 ms");
  // Contexts nest outermost first.
  EXPECT_EQ(c.WithContext("connect").message(), "connect: server 'demo': no heartbeat for 2000 ms");
  // OK stays OK, without a message.
  const Status ok = Status::Ok().WithContext("ctx");
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.message(), "");
}

TEST(StatusTest, IgnoreErrorCompiles) {
  InternalError("x").IgnoreError();
  Status::Ok().IgnoreError();
}

TEST(StatusTest, CopyAndMove) {
  Status a = DataLossError("bad jpeg");
  Status b = a;
  EXPECT_EQ(a, b);
  Status c = std::move(a);
  EXPECT_EQ(c, b);
  Status d;
  d = c;
  EXPECT_EQ(d, b);
}

// ---- Result ----

TEST(ResultTest, HoldsValue) {
  Result<int> r(42);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r.status().ok());
  EXPECT_EQ(r.value(), 42);
  EXPECT_EQ(*r, 42);
  r.value() = 7;
  EXPECT_EQ(*r, 7);
  *r = 8;
  EXPECT_EQ(r.value(), 8);
  const Result<int>& cr = r;
  EXPECT_EQ(cr.value(), 8);
  EXPECT_EQ(*cr, 8);
}

TEST(ResultTest, HoldsError) {
  Result<int> r = NotFoundError("nope");
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(r.status().message(), "nope");
}

TEST(ResultTest, ArrowOperator) {
  Result<std::string> r(std::string("hello"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 5u);
  r->append("!");
  EXPECT_EQ(*r, "hello!");
  const Result<std::string>& cr = r;
  EXPECT_EQ(cr->size(), 6u);
}

TEST(ResultTest, MoveOnlyValue) {
  Result<std::unique_ptr<int>> r(std::make_unique<int>(5));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(**r, 5);
  std::unique_ptr<int> p = std::move(r).value();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(*p, 5);

  Result<std::unique_ptr<int>> r2(std::make_unique<int>(6));
  std::unique_ptr<int> p2 = *std::move(r2);
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(*p2, 6);

  // The Result itself is movable.
  Result<std::unique_ptr<int>> r3(std::make_unique<int>(7));
  Result<std::unique_ptr<int>> r4 = std::move(r3);
  ASSERT_TRUE(r4.ok());
  EXPECT_EQ(**r4, 7);

  Result<std::unique_ptr<int>> e = InternalError("x");
  EXPECT_FALSE(e.ok());
  static_assert(!std::is_copy_constructible_v<Result<std::unique_ptr<int>>>);
}

TEST(ResultTest, RvalueValueTypes) {
  Result<std::string> r(std::string("abc"));
  static_assert(std::is_same_v<decltype(std::move(r).value()), std::string&&>);
  static_assert(std::is_same_v<decltype(r.value()), std::string&>);
  const Result<std::string>& cr = r;
  static_assert(std::is_same_v<decltype(cr.value()), const std::string&>);
  std::string s = std::move(r).value();
  EXPECT_EQ(s, "abc");
}

using ResultDeathTest = ::testing::Test;

TEST_F(ResultDeathTest, ValueOnErrorAborts) {
  Result<int> r = NotFoundError("server 'x' is gone");
  EXPECT_DEATH((void)r.value(), "Result::value\\(\\) on an error: NotFound: server 'x' is gone");
  EXPECT_DEATH((void)*r, "check failed");
  const Result<int>& cr = r;
  EXPECT_DEATH((void)cr.value(), "check failed");
  EXPECT_DEATH((void)std::move(r).value(), "check failed");
  Result<std::string> rs = InternalError("broken");
  EXPECT_DEATH((void)rs->size(), "Internal: broken");
}

TEST_F(ResultDeathTest, ResultFromOkStatusAborts) {
  EXPECT_DEATH(
      {
        Result<int> r(Status::Ok());
        (void)r;
      },
      "Result built from an OK status without a value");
}

TEST_F(ResultDeathTest, CheckMacroAbortsWithMessage) {
  int slot = 9;
  EXPECT_DEATH(BATCHCAST_CHECK(slot < 4) << "slot " << slot << " out of range",
               "check failed: slot < 4 slot 9 out of range");
  // A passing check evaluates nothing on the stream side and does not abort.
  BATCHCAST_CHECK(slot == 9) << "never printed";
}

// ---- Macros ----

Status FailIf(bool fail) { return fail ? InvalidArgumentError("asked to fail") : Status::Ok(); }

int g_after_return_if_error = 0;

Status UsesReturnIfError(bool fail) {
  BATCHCAST_RETURN_IF_ERROR(FailIf(fail));
  ++g_after_return_if_error;
  return Status::Ok();
}

TEST(MacroTest, ReturnIfError) {
  g_after_return_if_error = 0;
  EXPECT_TRUE(UsesReturnIfError(false).ok());
  EXPECT_EQ(g_after_return_if_error, 1);
  const Status s = UsesReturnIfError(true);
  EXPECT_EQ(s, InvalidArgumentError("asked to fail"));
  EXPECT_EQ(g_after_return_if_error, 1);  // the rest of the function did not run
}

TEST(MacroTest, ReturnIfErrorEvaluatesOnce) {
  int calls = 0;
  auto f = [&]() -> Status {
    BATCHCAST_RETURN_IF_ERROR((++calls, Status::Ok()));
    return Status::Ok();
  };
  EXPECT_TRUE(f().ok());
  EXPECT_EQ(calls, 1);
}

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  BATCHCAST_ASSIGN_OR_RETURN(int h, Half(x));
  BATCHCAST_ASSIGN_OR_RETURN(int q, Half(h));  // two uses in one scope
  return q;
}

Status QuarterInto(int x, int& out) {
  BATCHCAST_ASSIGN_OR_RETURN(out, Quarter(x));  // assigns to an existing variable
  return Status::Ok();
}

TEST(MacroTest, AssignOrReturn) {
  Result<int> r = Quarter(12);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3);
  Result<int> e1 = Quarter(3);
  EXPECT_EQ(e1.status(), InvalidArgumentError("3 is odd"));
  Result<int> e2 = Quarter(6);
  EXPECT_EQ(e2.status(), InvalidArgumentError("3 is odd"));

  int out = -1;
  EXPECT_TRUE(QuarterInto(8, out).ok());
  EXPECT_EQ(out, 2);
  out = -1;
  EXPECT_EQ(QuarterInto(10, out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(out, -1);  // untouched on error
}

Result<std::unique_ptr<std::string>> MakeBox(bool fail) {
  if (fail) return ResourceExhaustedError("no room");
  return std::make_unique<std::string>("box");
}

Result<size_t> BoxLength(bool fail) {
  BATCHCAST_ASSIGN_OR_RETURN(std::unique_ptr<std::string> box, MakeBox(fail));
  return box->size();
}

TEST(MacroTest, AssignOrReturnMoveOnly) {
  Result<size_t> r = BoxLength(false);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 3u);
  Result<size_t> e = BoxLength(true);
  EXPECT_EQ(e.status(), ResourceExhaustedError("no room"));
}

TEST(MacroTest, AssignOrReturnInsideStatusFunction) {
  auto f = [](int x, int& out) -> Status {
    BATCHCAST_ASSIGN_OR_RETURN(auto h, Half(x));
    out = h;
    return Status::Ok();
  };
  int out = 0;
  EXPECT_TRUE(f(4, out).ok());
  EXPECT_EQ(out, 2);
  EXPECT_EQ(f(5, out).message(), "5 is odd");
}

}  // namespace
}  // namespace batchcast
