// SetThreadName: names the calling thread, so that `top -H`, `ps -L` and
// /proc/PID/task/TID/comm show what each of batchcast's threads is (every
// name starts with "bc-"; a benchmark sums the CPU time of those threads in
// a trainer's process that runs an in-process batchcast.Server).
#pragma once

#include <string_view>

namespace batchcast {

// Names the calling thread `name`, cut to the 15 characters Linux keeps.
// Best effort: a failure is ignored (the name is for people and tools only).
void SetThreadName(std::string_view name);

}  // namespace batchcast
