// CatchAll: the last line of defence where an exception could end the process.
//
// Library code reports failures as Status and never throws on purpose, but
// code it calls may (std::bad_alloc, std::filesystem, nlohmann::json, OpenCV,
// a bug). An exception that leaves a thread's entry function calls
// std::terminate: every consumer loses its server, and the socket and ring
// are left behind. So every thread entry point (the control loop, the
// producer loop, the client's flush thread, the file prefetcher, the thread
// pool's workers) and the public entry points that may run such code
// (Server::Start, Consumer::Connect) run their body inside CatchAll, which
// turns an escaped exception into an Internal error naming where it happened.
//
// Thread-safety: pure.
#pragma once

#include <exception>
#include <string>
#include <string_view>
#include <type_traits>

#include "batchcast/core/status.h"

namespace batchcast {

// The Internal error CatchAll reports for the exception in flight.
inline Status UnexpectedException(std::string_view where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return InternalError("unexpected exception in " + std::string(where) + ": " + e.what());
  } catch (...) {
    return InternalError("unexpected exception in " + std::string(where));
  }
}

// Runs fn() (returning void, Status or Result<T>) and returns what it returns
// (OK for void), or UnexpectedException(where) if it throws.
template <typename F>
auto CatchAll(std::string_view where, F&& fn) noexcept {
  using R = std::invoke_result_t<F>;
  if constexpr (std::is_void_v<R>) {
    try {
      fn();
      return Status::Ok();
    } catch (...) {
      return UnexpectedException(where);
    }
  } else {
    try {
      return R(fn());
    } catch (...) {
      return R(UnexpectedException(where));
    }
  }
}

}  // namespace batchcast
