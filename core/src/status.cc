#include "batchcast/core/status.h"

#include "core/src/enum_names.h"

namespace batchcast {

namespace {
constexpr EnumNames<StatusCode, 11> kCodeNames{
    "status code",
    {{{StatusCode::kOk, "OK"},
      {StatusCode::kInvalidArgument, "InvalidArgument"},
      {StatusCode::kNotFound, "NotFound"},
      {StatusCode::kUnavailable, "Unavailable"},
      {StatusCode::kDeadlineExceeded, "DeadlineExceeded"},
      {StatusCode::kResourceExhausted, "ResourceExhausted"},
      {StatusCode::kCancelled, "Cancelled"},
      {StatusCode::kInternal, "Internal"},
      {StatusCode::kOutOfRange, "OutOfRange"},
      {StatusCode::kDataLoss, "DataLoss"},
      {StatusCode::kPermissionDenied, "PermissionDenied"}}}};
}  // namespace

std::string_view StatusCodeName(StatusCode code) { return kCodeNames.Name(code, "Unknown"); }

Status::Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {
  if (code_ == StatusCode::kOk) message_.clear();
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string message(context);
  message += ": ";
  message += message_;
  return Status(code_, std::move(message));
}

Status InvalidArgumentError(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
Status ResourceExhaustedError(std::string m) {
  return {StatusCode::kResourceExhausted, std::move(m)};
}
Status CancelledError(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }
Status OutOfRangeError(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
Status DataLossError(std::string m) { return {StatusCode::kDataLoss, std::move(m)}; }
Status PermissionDeniedError(std::string m) {
  return {StatusCode::kPermissionDenied, std::move(m)};
}

}  // namespace batchcast
