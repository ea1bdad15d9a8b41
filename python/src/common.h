// Shared helpers of the batchcast._core binding.
//
// The binding is marshalling only: every decision lives in the C++ library or
// in the pure-Python package (python/batchcast/). Rules kept everywhere:
//  - every call that may block (connect, Next, BeginBatch, WaitFor, Stop,
//    stats) runs with the GIL released (py::gil_scoped_release);
//  - a non-OK Status becomes a Python exception (errors.cc) whose str() is the
//    Status message and whose `.code` is the StatusCode name.
#pragma once

#include <pybind11/pybind11.h>

#include <chrono>
#include <exception>
#include <string>
#include <utility>

#include "batchcast/core/status.h"

struct DLManagedTensor;  // <dlpack/dlpack.h>

namespace batchcast::pybind {

namespace py = pybind11;

// Carries a Status from C++ to the exception translator (errors.cc).
class StatusError : public std::exception {
 public:
  explicit StatusError(Status status) : status_(std::move(status)) {}
  const Status& status() const { return status_; }
  const char* what() const noexcept override { return status_.message().c_str(); }

 private:
  Status status_;
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw StatusError(status);
}

template <typename T>
T Unwrap(Result<T>&& result) {
  if (!result.ok()) throw StatusError(result.status());
  return std::move(result).value();
}

// Seconds (Python float, None = no limit) to milliseconds; 0 = no limit.
inline std::chrono::milliseconds SecondsToMs(const py::object& seconds) {
  if (seconds.is_none()) return std::chrono::milliseconds(0);
  const double s = seconds.cast<double>();
  if (!(s >= 0)) throw py::value_error("a timeout must be a non-negative number of seconds");
  return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0 + 0.5));
}

// A DLPack capsule ("dltensor") owning `managed`: whoever consumes it calls
// the deleter, else the capsule does when collected (Note [DLPack capsules],
// consumer.cc). On failure the deleter runs and a Python error is thrown.
py::object MakeDLPackCapsule(DLManagedTensor* managed);

void RegisterErrors(py::module_& m);
void RegisterConsumer(py::module_& m);
void RegisterServer(py::module_& m);
void RegisterOptions(py::module_& m);
void RegisterAttachedProducer(py::module_& m);

}  // namespace batchcast::pybind
