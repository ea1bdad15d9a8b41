// batchcast._core.Server: Server::Start / StartExternal (+ BeginBatch,
// CommitBatch, EndStream) marshalled for Python.
//
// Options arrive as a dict of ServerOptions names (the Python keyword
// arguments of batchcast.Server); an unknown name is a TypeError naming it.
// Values are Python values of the option's type (durations in seconds), or
// text that the option table reads (batchcast-launch: start(text=True)).
//
// External production (batchcast.Producer): begin_batch() returns a WriteSlot
// whose field(i) is a writable buffer-protocol object over that field's
// samples in the slot; it keeps the server (and so the ring mapping) alive, so
// a stray view never points at unmapped memory. Writing after commit_batch()
// is a bug of the caller (consumers may be reading).
#include "batchcast/server/server.h"

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>

#include "batchcast/core/dtype.h"
#include "batchcast/server/option_table.h"
#include "common.h"
#include "core/src/dlpack.h"
#include "core/src/logging.h"

namespace batchcast::pybind {
namespace {

// A Python value as the option table's text for `opt` (batchcast/server/option_table.h).
// Values of the wrong type are a StatusError naming the option, never a cast error.
std::string OptionText(const ServerOption& opt, const py::handle& value) {
  auto wrong = [&](const char* expected) {
    return StatusError(
        InvalidArgumentError(std::string(opt.name) + " must be " + expected + ", got " +
                             py::str(py::type::of(value).attr("__name__")).cast<std::string>() +
                             " " + py::repr(value).cast<std::string>()));
  };
  switch (opt.type) {
    case OptionType::kFlag:
      if (!py::isinstance<py::bool_>(value)) throw wrong("True or False");
      return value.cast<bool>() ? "true" : "false";
    case OptionType::kInteger:
      if (opt.takes_text && py::isinstance<py::str>(value)) return value.cast<std::string>();
      if (py::isinstance<py::bool_>(value) || !py::isinstance<py::int_>(value)) {
        throw wrong(opt.takes_text ? "a non-negative integer or a string"
                                   : "a non-negative integer");
      }
      return py::str(value).cast<std::string>();
    case OptionType::kSeconds:
      if (py::isinstance<py::bool_>(value) ||
          !(py::isinstance<py::int_>(value) || py::isinstance<py::float_>(value))) {
        throw wrong("a number of seconds");
      }
      return py::repr(py::float_(py::reinterpret_borrow<py::object>(value))).cast<std::string>();
    case OptionType::kTriple: {
      if (py::isinstance<py::str>(value) || !py::isinstance<py::sequence>(value) ||
          py::len(value) != 3) {
        throw wrong("three numbers (R, G, B)");
      }
      std::string out;
      for (const py::handle item : value) {
        if (py::isinstance<py::bool_>(item) ||
            !(py::isinstance<py::int_>(item) || py::isinstance<py::float_>(item))) {
          throw wrong("three numbers (R, G, B)");
        }
        out += (out.empty() ? "" : ",") +
               py::repr(py::float_(py::reinterpret_borrow<py::object>(item))).cast<std::string>();
      }
      return out;
    }
    case OptionType::kText:
      if (py::isinstance<py::str>(value)) return value.cast<std::string>();
      if (py::hasattr(value, "__fspath__")) {  // os.PathLike (the data path)
        return py::str(value.attr("__fspath__")()).cast<std::string>();
      }
      throw wrong("a string");
  }
  throw wrong("a value");
}

// kwargs of batchcast.Server: ServerOptions names; None = the default. An
// unknown name is a TypeError naming it. `text`: every value is text, as
// on the command line (batchcast-launch), read by the option table whatever
// it looks like; otherwise values are Python values of the option's type.
ServerOptions ParseOptions(const py::dict& kwargs, bool text) {
  ServerOptions o;
  for (const auto& [key, value] : kwargs) {
    const std::string k = key.cast<std::string>();
    const ServerOption* opt = FindServerOption(k);
    if (opt == nullptr || k.find('-') != std::string::npos) {
      throw py::type_error("unexpected server option '" + k + "'");
    }
    if (value.is_none()) continue;
    if (text && !py::isinstance<py::str>(value)) {
      throw StatusError(
          InvalidArgumentError(k + " must be text (options given as text), got " +
                               py::str(py::type::of(value).attr("__name__")).cast<std::string>()));
    }
    ThrowIfError(SetServerOption(o, k, text ? value.cast<std::string>() : OptionText(*opt, value)));
  }
  return o;
}

std::vector<FieldSpec> ParseFields(
    const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>& fields) {
  std::vector<FieldSpec> specs;
  for (const auto& [name, dtype, shape] : fields) {
    for (int64_t d : shape) {
      if (d <= 0) {
        throw StatusError(InvalidArgumentError("field '" + name +
                                               "' has a per-sample dimension of " +
                                               std::to_string(d) + "; all must be positive"));
      }
    }
    specs.push_back(FieldSpec{name, Unwrap(ParseDType(dtype)), shape, MemoryKind::kHost});
  }
  return specs;
}

// A writable view of one field of a slot; keeps the server alive.
struct SlotBuffer {
  std::shared_ptr<Server> server;
  uint8_t* data = nullptr;
  size_t bytes = 0;
};

struct PyWriteSlot {
  std::shared_ptr<Server> server;
  std::shared_ptr<const std::vector<FieldSpec>> specs;  // of the external producer
  SlotView slot;
  bool committed = false;
};

// DLPack view of one field of a slot: [count, *per-sample shape], on the
// ring's device, typed as Batch::ToDLPack types it (core/src/dlpack.h); it
// keeps the server (and so the ring memory) alive.
py::object SlotFieldDLPack(const PyWriteSlot& w, size_t i) {
  if (!w.specs || i >= w.specs->size() || i >= w.slot.field_data.size()) {
    throw py::index_error("no such field");
  }
  if (w.committed) {
    throw StatusError(InvalidArgumentError("the slot was committed: it is read-only now"));
  }
  const FieldSpec& f = (*w.specs)[i];
  std::vector<int64_t> shape{static_cast<int64_t>(w.slot.count())};
  shape.insert(shape.end(), f.shape.begin(), f.shape.end());
  return MakeDLPackCapsule(
      MakeDLManagedTensor(w.slot.field_data[i], shape, f.dtype, w.slot.device, w.server));
}

class PyServer {
 public:
  explicit PyServer(std::unique_ptr<Server> s, std::vector<FieldSpec> specs = {})
      : server_(std::move(s)),
        specs_(std::make_shared<const std::vector<FieldSpec>>(std::move(specs))) {}
  ~PyServer() { Stop(); }

  static std::unique_ptr<PyServer> Start(const py::dict& kwargs, bool text) {
    ServerOptions o = ParseOptions(kwargs, text);
    std::optional<Result<std::unique_ptr<Server>>> r;
    {
      py::gil_scoped_release nogil;
      r.emplace(Server::Start(std::move(o)));
    }
    return std::make_unique<PyServer>(Unwrap(std::move(*r)));
  }

  static std::unique_ptr<PyServer> StartExternal(
      const py::dict& kwargs,
      const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>& fields,
      uint64_t epoch_len) {
    ServerOptions o = ParseOptions(kwargs, /*text=*/false);
    std::vector<FieldSpec> specs = ParseFields(fields);
    std::optional<Result<std::unique_ptr<Server>>> r;
    {
      py::gil_scoped_release nogil;
      r.emplace(Server::StartExternal(std::move(o), specs, epoch_len));
    }
    return std::make_unique<PyServer>(Unwrap(std::move(*r)), std::move(specs));
  }

  Server& get() {
    if (!server_) throw StatusError(CancelledError("the server was closed"));
    return *server_;
  }
  // For calls that release the GIL: close() on another thread may drop
  // server_ meanwhile, so they hold their own reference.
  std::shared_ptr<Server> shared() {
    if (!server_) throw StatusError(CancelledError("the server was closed"));
    return server_;
  }

  PyWriteSlot BeginBatch(uint32_t epoch,
                         py::array_t<int64_t, py::array::c_style | py::array::forcecast> indices,
                         const py::object& timeout) {
    std::shared_ptr<Server> s = shared();
    if (indices.ndim() != 1) throw py::value_error("indices must be one-dimensional");
    std::span<const int64_t> idx(indices.data(), static_cast<size_t>(indices.size()));
    auto ms = SecondsToMs(timeout);
    if (ms.count() == 0) ms = std::chrono::hours(24 * 365);
    std::optional<Result<SlotView>> r;
    {
      py::gil_scoped_release nogil;
      r.emplace(s->BeginBatch(epoch, idx, ms));
    }
    return PyWriteSlot{server_, specs_, Unwrap(std::move(*r)), false};
  }

  // cuda_stream: device rings, the stream (int cudaStream_t of the ring's
  // device) on which the writes to the slot were queued; 0 = legacy default.
  void CommitBatch(PyWriteSlot& w, uintptr_t cuda_stream) {
    if (w.committed) throw StatusError(InvalidArgumentError("this slot was committed already"));
    if (w.server != server_) throw StatusError(InvalidArgumentError("a slot of another server"));
    ThrowIfError(get().CommitBatch(w.slot, CudaStreamRef::FromAddress(cuda_stream)));
    w.committed = true;
  }

  void EndStream() { get().EndStream(); }

  bool WaitFor(const py::object& timeout) {
    std::shared_ptr<Server> s = shared();
    const auto ms = SecondsToMs(timeout);
    py::gil_scoped_release nogil;
    return s->WaitFor(ms);
  }

  std::string Stats() {
    std::shared_ptr<Server> s = shared();
    py::gil_scoped_release nogil;
    return s->StatsJson();
  }

  // Raises the final error, if any.
  void CheckStatus() { ThrowIfError(get().status()); }

  void Stop() {
    if (!server_) return;
    std::shared_ptr<Server> s = server_;
    py::gil_scoped_release nogil;
    s->Stop();
  }

  // Stop, then drop our reference (a thread still inside begin_batch, or a
  // SlotBuffer, keeps the object alive a little longer).
  void Close() {
    Stop();
    std::shared_ptr<Server> s = std::move(server_);
    py::gil_scoped_release nogil;
    s.reset();
  }

  bool closed() const { return !server_; }

 private:
  std::shared_ptr<Server> server_;
  std::shared_ptr<const std::vector<FieldSpec>> specs_;
};

}  // namespace

void RegisterServer(py::module_& m) {
  py::class_<SlotBuffer>(m, "SlotBuffer", py::buffer_protocol(),
                         "Writable bytes of one field of a slot being written.")
      .def_buffer([](SlotBuffer& b) {
        return py::buffer_info(b.data, 1, py::format_descriptor<uint8_t>::format(), 1,
                               {static_cast<py::ssize_t>(b.bytes)}, {1}, /*readonly=*/false);
      })
      .def("__len__", [](const SlotBuffer& b) { return b.bytes; });

  py::class_<PyWriteSlot>(m, "WriteSlot", "A ring slot handed to an external producer.")
      .def_property_readonly("slot", [](const PyWriteSlot& w) { return w.slot.slot; })
      .def_property_readonly("first_seq", [](const PyWriteSlot& w) { return w.slot.first_seq; })
      .def_property_readonly("count", [](const PyWriteSlot& w) { return w.slot.count(); })
      .def_property_readonly("committed", [](const PyWriteSlot& w) { return w.committed; })
      .def_property_readonly("num_fields",
                             [](const PyWriteSlot& w) { return w.slot.field_data.size(); })
      .def(
          "field",
          [](const PyWriteSlot& w, size_t i) {
            if (i >= w.slot.field_data.size()) throw py::index_error("no such field");
            if (w.committed) {
              throw StatusError(
                  InvalidArgumentError("the slot was committed: it is read-only now"));
            }
            return SlotBuffer{w.server, w.slot.field_data[i],
                              w.slot.field_bytes[i] * w.slot.count()};
          },
          py::arg("index"),
          "A writable buffer over field `index` of the slot's `count` samples (host rings).")
      .def("field_dlpack", &SlotFieldDLPack, py::arg("index"),
           "A DLPack capsule viewing field `index` of the slot: [count, *shape], on the ring's "
           "device (CPU or CUDA), typed as the Loader's batches are (core/src/dlpack.h).")
      .def_property_readonly("device", [](const PyWriteSlot& w) {
        return w.slot.device.kind == MemoryKind::kCuda
                   ? "cuda:" + std::to_string(w.slot.device.index)
                   : std::string("cpu");
      });

  py::class_<PyServer>(m, "Server", "An in-process batchcast server (batchcast::Server).")
      .def_static("start", &PyServer::Start, py::arg("options"), py::arg("text") = false,
                  "Starts the built-in pipeline; options: a dict of ServerOptions names to "
                  "Python values, or with text=True to text as on the command line.")
      .def_static(
          "start_external", &PyServer::StartExternal, py::arg("options"), py::arg("fields"),
          py::arg("epoch_len"),
          "Starts a server fed by begin_batch/commit_batch; fields: [(name, dtype, shape)].")
      .def_property_readonly("endpoint", [](PyServer& s) { return s.get().endpoint(); })
      .def_property_readonly("name", [](PyServer& s) { return s.get().options().name; })
      .def_property_readonly("epoch_len", [](PyServer& s) { return s.get().epoch_len(); })
      .def_property_readonly("batch_size", [](PyServer& s) { return s.get().options().batch_size; })
      .def_property_readonly("window", [](PyServer& s) { return s.get().options().window; })
      .def_property_readonly(
          "device",
          [](PyServer& s) {
            return FindServerOption("device")->get(s.get().options());  // "cuda:0,1" too
          })
      .def_property_readonly("closed", &PyServer::closed)
      .def("begin_batch", &PyServer::BeginBatch, py::arg("epoch"), py::arg("indices"),
           py::arg("timeout") = py::none(),
           "Waits for a writable slot for these samples of producer `epoch`.")
      .def("commit_batch", &PyServer::CommitBatch, py::arg("slot"), py::arg("cuda_stream") = 0,
           "Publishes the slot; device rings: cuda_stream is where its writes were queued")
      .def("end_stream", &PyServer::EndStream)
      .def("wait_for", &PyServer::WaitFor, py::arg("timeout"),
           "True once the server finished (stream ended and consumers left, an error, or stop)")
      .def("stats", &PyServer::Stats, "stats as JSON text")
      .def("check_status", &PyServer::CheckStatus, "raises the error that stopped the server")
      .def("stop", &PyServer::Stop)
      .def("close", &PyServer::Close);

  m.def(
      "set_log_level", [](const std::string& level) { SetLogLevel(level); }, py::arg("level"),
      "trace, debug, info, warn, error or off");
}

}  // namespace batchcast::pybind
