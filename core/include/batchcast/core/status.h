// Status and Result<T>: how batchcast library code reports expected failures.
//
// A Status is either OK or carries a Code and a message a person can act on
// ("server 'demo' stopped answering: no heartbeat for 2000 ms"). Library code
// never throws; it returns [[nodiscard]] Status or Result<T>. Exceptions exist
// only at the Python boundary, where a Status becomes a Python exception.
//
// Thread-safety: Status and Result are values; distinct objects may be used from
// distinct threads freely, one object needs external synchronization.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "batchcast/core/check.h"

namespace batchcast {

// The short code set shared by the library and the wire protocol. The numeric
// values travel in ERROR messages: never renumber.
enum class StatusCode : uint8_t {
  kOk = 0,
  kInvalidArgument = 1,    // the caller asked for something malformed or impossible
  kNotFound = 2,           // a named thing (server, file, field) does not exist
  kUnavailable = 3,        // a peer is gone or not answering; retrying later may work
  kDeadlineExceeded = 4,   // a wait ran past its timeout
  kResourceExhausted = 5,  // a bound (window, leases, memory, pixels) was hit
  kCancelled = 6,          // stopped on purpose (shutdown, eviction)
  kInternal = 7,           // a bug or a broken invariant
  kOutOfRange = 8,         // past the end: the stream has ended
  kDataLoss = 9,           // a file could not be decoded
  kPermissionDenied = 10,  // a key or file the caller may not use (a refused CURVE key)
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK" or "<CodeName>: <message>".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>" (OK stays OK).
  Status WithContext(std::string_view context) const;

  // Marks an intentionally ignored status.
  void IgnoreError() const {}

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status UnavailableError(std::string message);
Status DeadlineExceededError(std::string message);
Status ResourceExhaustedError(std::string message);
Status CancelledError(std::string message);
Status InternalError(std::string message);
Status OutOfRangeError(std::string message);
Status DataLossError(std::string message);
Status PermissionDeniedError(std::string message);

// A value or the Status that explains why there is none.
template <typename T>
class [[nodiscard]] Result {
 public:
  // REQUIRES: !status.ok()
  Result(Status status) : status_(std::move(status)) {  // NOLINT(runtime/explicit)
    BATCHCAST_CHECK(!status_.ok()) << "Result built from an OK status without a value";
  }
  Result(T value) : value_(std::move(value)) {}  // NOLINT(runtime/explicit)

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok()
  T& value() & {
    CheckOk();
    return *value_;
  }
  const T& value() const& {
    CheckOk();
    return *value_;
  }
  T&& value() && {
    CheckOk();
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void CheckOk() const {
    BATCHCAST_CHECK(ok()) << "Result::value() on an error: " << status_.ToString();
  }
  Status status_;
  std::optional<T> value_;
};

}  // namespace batchcast

// Returns early from the enclosing function when `expr` (a Status) is not OK.
#define BATCHCAST_RETURN_IF_ERROR(expr)      \
  do {                                       \
    ::batchcast::Status _bc_status = (expr); \
    if (!_bc_status.ok()) return _bc_status; \
  } while (0)

#define BATCHCAST_CONCAT_INNER_(a, b) a##b
#define BATCHCAST_CONCAT_(a, b) BATCHCAST_CONCAT_INNER_(a, b)
// `BATCHCAST_ASSIGN_OR_RETURN(auto x, FunctionReturningResult());`
#define BATCHCAST_ASSIGN_OR_RETURN(lhs, expr) \
  BATCHCAST_ASSIGN_OR_RETURN_IMPL_(BATCHCAST_CONCAT_(_bc_result_, __LINE__), lhs, expr)
#define BATCHCAST_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()
