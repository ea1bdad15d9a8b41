// batchcast._core: the thin pybind11 layer under the `batchcast` package.
// See common.h for the rules (GIL released on blocking calls, Status ->
// exceptions) and python/batchcast/ for the user-facing API.
#include "batchcast/core/version.h"
#include "common.h"

PYBIND11_MODULE(_core, m) {
  m.doc() = "batchcast native module (use the `batchcast` package instead)";
  batchcast::pybind::RegisterErrors(m);
  batchcast::pybind::RegisterConsumer(m);
  batchcast::pybind::RegisterServer(m);
  batchcast::pybind::RegisterOptions(m);
  batchcast::pybind::RegisterAttachedProducer(m);
  m.attr("__version__") = BATCHCAST_VERSION;
}
