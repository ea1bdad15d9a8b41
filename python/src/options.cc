// The rules that C++ and Python share, read in C++ only:
//  - server_options(): the server's option table (batchcast/server/option_table.h),
//    from which batchcast.Server, batchcast.Producer and batchcast-launch take
//    their options;
//  - parse_device / parse_devices: device texts ("cpu", "cuda:N" of a
//    consumer; the server's --device, lists and cuda:all too);
//  - hardware_queues: how CUDA_DEVICE_MAX_CONNECTIONS is read (Note
//    [Hardware queues], cuda/include/batchcast/cuda/hardware_queues.h).
#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <vector>

#include "batchcast/core/field_spec.h"
#include "batchcast/cuda/hardware_queues.h"
#include "batchcast/server/option_table.h"
#include "common.h"
#include "server/src/device_list.h"

namespace batchcast::pybind {
namespace {

// One row of the option table, as Python sees it.
struct OptionRecord {
  std::string name;
  std::string group;
  std::string type;
  std::string value_name;
  std::string help;
  std::string default_text;
  bool cuda_only = false;
  std::string command_line;
};

std::vector<OptionRecord> OptionRecords() {
  std::vector<OptionRecord> out;
  const ServerOptions defaults;
  for (const ServerOption& o : ServerOptionTable()) {
    out.push_back({std::string(o.name), std::string(OptionGroupName(o.group)),
                   std::string(OptionTypeName(o.type)), std::string(o.value_name),
                   std::string(o.help), o.get(defaults), o.cuda_only, CommandLineName(o.name)});
  }
  return out;
}

// The GPUs a --device text names, in order: [] for "cpu", None for
// "cuda:all" (every visible GPU, counted when a server starts).
std::optional<std::vector<int>> ParseDevices(const std::string& text) {
  ServerOptions o;
  ThrowIfError(SetServerOption(o, "device", text));
  if (o.all_gpus) return std::nullopt;
  std::vector<int> rings = Unwrap(RingDevices(o, Result<int>(0)));
  if (rings == std::vector<int>{-1}) rings.clear();  // a host ring
  return rings;
}

}  // namespace

void RegisterOptions(py::module_& m) {
  py::class_<OptionRecord>(m, "ServerOption",
                           "One server option of the option table "
                           "(batchcast/server/option_table.h).")
      .def_readonly("name", &OptionRecord::name, "snake_case, as batchcast.Server takes it")
      .def_readonly("group", &OptionRecord::group, "source, ring, order or consumers")
      .def_readonly("type", &OptionRecord::type, "text, integer, seconds, flag or triple")
      .def_readonly("value_name", &OptionRecord::value_name, "for help texts: N, SECONDS, ...")
      .def_readonly("help", &OptionRecord::help)
      .def_readonly("default", &OptionRecord::default_text,
                    "the default as text the option takes ('' when derived: see help)")
      .def_readonly("cuda_only", &OptionRecord::cuda_only, "only a CUDA ring uses it")
      .def_readonly("command_line", &OptionRecord::command_line, "--kebab-case")
      .def("__repr__", [](const OptionRecord& r) {
        return "<ServerOption " + r.name + " (" + r.group + ", " + r.type + ")>";
      });

  m.def("server_options", &OptionRecords,
        "Every server option, in the order of `batchcast-server serve --help` (the option "
        "table).");
  m.def(
      "parse_device",
      [](const std::string& text) -> std::optional<int> {
        const Device d = Unwrap(ParseDevice(text));
        return d.is_cuda() ? std::optional<int>(d.index) : std::nullopt;
      },
      py::arg("text"), "The GPU of 'cuda:N' (N), None for 'cpu'; InvalidArgument for other text.");
  m.def("parse_devices", &ParseDevices, py::arg("text"),
        "The GPUs a server's device option names, in order: [] for 'cpu', None for "
        "'cuda:all'; InvalidArgument naming the option for other text.");
  m.def(
      "hardware_queues",
      [](std::optional<std::string> value) {
        return cuda::HardwareQueuesFor(value ? std::optional<std::string_view>(*value)
                                             : std::nullopt);
      },
      py::arg("value"),
      "The CUDA hardware queues a CUDA start gets with CUDA_DEVICE_MAX_CONNECTIONS=value "
      "(None: unset).");
  m.attr("MAX_HARDWARE_QUEUES") = cuda::kMaxHardwareQueues;
  m.attr("DEFAULT_HARDWARE_QUEUES") = cuda::kDefaultHardwareQueues;
}

}  // namespace batchcast::pybind
