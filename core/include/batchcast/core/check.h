// BATCHCAST_CHECK: aborts with file:line and a message when a programmer error
// (a broken precondition or invariant) is found. Not for expected failures such
// as bad input or a vanished peer: those are Status values.
//
//   BATCHCAST_CHECK(slot < window) << "slot " << slot << " out of range";
#pragma once

#include <sstream>

namespace batchcast::internal {

class CheckFailure {
 public:
  CheckFailure(const char* file, int line, const char* condition);
  [[noreturn]] ~CheckFailure();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

// Lets `cond ? (void)0 : Voidify() & stream` type-check.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace batchcast::internal

#define BATCHCAST_CHECK(condition)                 \
  (condition) ? (void)0                            \
              : ::batchcast::internal::Voidify() & \
                    ::batchcast::internal::CheckFailure(__FILE__, __LINE__, #condition).stream()
