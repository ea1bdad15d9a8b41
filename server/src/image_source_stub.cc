// Image datasets need the CPU image pipeline (batchcast::image); until it is
// linked in, a dataset path is reported as unsupported.
#include "batchcast/server/server.h"

namespace batchcast {

Result<std::unique_ptr<Source>> MakeImageSource(const ServerOptions& options) {
  return InvalidArgumentError("cannot serve '" + options.data +
                              "': image datasets are not supported by this build; use --synthetic");
}

}  // namespace batchcast
