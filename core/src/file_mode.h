// FileModeText: the permission bits of a file mode as messages print them.
//
// Thread-safety: a pure function.
#pragma once

#include <sys/types.h>

#include <string>

namespace batchcast {

// The permission bits of `mode` (st_mode; the file type bits are dropped) as
// four octal digits: "0600", "0644", "1777".
std::string FileModeText(mode_t mode);

}  // namespace batchcast
