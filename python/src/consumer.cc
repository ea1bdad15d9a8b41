// batchcast._core.Consumer: Consumer::Connect / Next marshalled for Python.
//
// Next() returns, for a batch, (capsules, indices, epoch, step, zero_copy)
// where `capsules` holds one DLPack PyCapsule per field (in the server's
// field order) and `indices` is an int64 numpy array (a copy: it does not pin
// the batch); for the end-of-epoch marker it returns None and the marker's
// values are readable as marker_epoch / marker_step / skipped.
//
// Note [DLPack capsules]
// Each capsule follows the DLPack Python protocol: named "dltensor", holding a
// DLManagedTensor* from Batch::ToDLPack (which owns a reference to the batch,
// so the lease lives until the DLManagedTensor's deleter runs). A consumer
// (torch.utils.dlpack.from_dlpack) renames it "used_dltensor" and becomes
// responsible for calling the deleter when the last tensor viewing the memory
// is freed; a capsule that is garbage-collected unconsumed calls the deleter
// itself. So the lease ends exactly when the last tensor viewing the batch is
// freed.
//
// CUDA rings (server --device cuda:N): the client library delivers each batch
// in the order of the consumer's CUDA stream and ends a lease only after the
// work queued on that stream so far has completed (client/.../batch.h). So the
// DLPack deleter needs nothing extra here: batchcast.Loader passes torch's
// current stream of device N to next(cuda_stream=...) before every batch, and
// the kernels the user queues there on the batch's tensors are waited for
// before the slot can be rewritten. A tensor used on another stream needs
// Batch::RecordStream (not exposed yet: see WrapForDevice()).
#include "batchcast/client/consumer.h"

#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <cstring>
#include <memory>
#include <optional>

#include "common.h"
#include "core/src/launcher_env.h"
#include "core/src/ring_layout.h"
#include "core/src/runtime_dir.h"

namespace batchcast::pybind {
namespace {

constexpr const char* kCapsuleName = "dltensor";
constexpr const char* kUsedCapsuleName = "used_dltensor";

// The standard destructor of a DLPack capsule (DLPack's python_spec).
void DLPackCapsuleDestructor(PyObject* capsule) {
  if (PyCapsule_IsValid(capsule, kUsedCapsuleName)) return;  // a consumer owns it now
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);  // do not clobber a pending exception
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
  if (managed == nullptr) {
    PyErr_WriteUnraisable(capsule);
  } else if (managed->deleter != nullptr) {
    managed->deleter(managed);
  }
  PyErr_Restore(type, value, traceback);
}

}  // namespace

py::object MakeDLPackCapsule(DLManagedTensor* managed) {
  PyObject* capsule = PyCapsule_New(managed, kCapsuleName, DLPackCapsuleDestructor);
  if (capsule == nullptr) {
    managed->deleter(managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::object>(capsule);
}

namespace {

// The hook for per-tensor device handling. Host and CUDA rings need none: the
// client library orders a CUDA lease's end after the delivery stream (above).
// TODO(gpu): to support tensors used on extra streams, keep the Batch here and
// call Batch::RecordStream(stream) when the user asks (Loader.record_stream).
DLManagedTensor* WrapForDevice(DLManagedTensor* managed) { return managed; }

py::tuple FieldTuple(const FieldSpec& f) {
  py::tuple shape(f.shape.size());
  for (size_t i = 0; i < f.shape.size(); ++i) shape[i] = py::int_(f.shape[i]);
  return py::make_tuple(f.name, std::string(DTypeName(f.dtype)), shape);
}

// Note [Resume]: a ConsumerPosition as the dict Loader.state_dict() returns
// (ints and strings, which torch.save keeps): "format", "stream", its
// integer fields and "check"; and back, with ConsumerPosition's checks.
py::dict PositionToDict(const ConsumerPosition& p) {
  py::dict d;
  d["format"] = ConsumerPosition::kFormat;
  d["stream"] = p.stream;
  for (const auto& [name, value] : p.Integers()) d[py::str(std::string(name))] = value;
  d["check"] = p.Check();
  return d;
}

Result<ConsumerPosition> PositionFromDict(const py::handle& state) {
  auto bad = [](const std::string& why) { return InvalidArgumentError("state_dict: " + why); };
  if (!py::isinstance<py::dict>(state)) {
    return bad("expected a dict (a batchcast.Loader's state_dict()), got " +
               std::string(py::str(state.get_type().attr("__name__"))));
  }
  std::optional<uint64_t> format;
  std::map<std::string, std::string, std::less<>> fields;
  for (const auto& [k, v] : py::reinterpret_borrow<py::dict>(state)) {
    if (!py::isinstance<py::str>(k)) return bad("a key that is not a str");
    const std::string key = k.cast<std::string>();
    const bool text = key == "stream" || key == "check";
    if (text ? !py::isinstance<py::str>(v)
             : !py::isinstance<py::int_>(v) || py::isinstance<py::bool_>(v)) {
      return bad("'" + key + "' must be " + (text ? "a str" : "an int"));
    }
    if (key == "format") {
      try {
        format = v.cast<uint64_t>();
      } catch (const py::cast_error&) {
        return bad("'format' is out of range");
      }
      continue;
    }
    fields.emplace(key, py::str(v).cast<std::string>());
  }
  if (!format) return bad("no 'format'");
  Result<ConsumerPosition> p = ConsumerPosition::FromFields(*format, std::move(fields));
  if (!p.ok()) return p.status().WithContext("state_dict");
  return p;
}

class PyConsumer {
 public:
  PyConsumer(const std::string& endpoint, uint32_t batch_size, bool drop_last,
             const std::string& join, uint16_t prefetch, const py::object& timeout,
             const py::object& connect_timeout, const std::string& name, uintptr_t cuda_stream,
             const std::string& key_file, const std::string& device, const py::object& group,
             const py::object& rank, const py::object& world_size) {
    ConsumerOptions o;
    o.endpoint = endpoint;
    o.batch_size = batch_size;
    o.drop_last = drop_last;
    o.join = Unwrap(ParseJoinPolicy(join));
    o.prefetch = prefetch;
    o.timeout = SecondsToMs(timeout);
    if (!connect_timeout.is_none()) o.connect_timeout = SecondsToMs(connect_timeout);
    o.name = name;
    o.cuda_stream = CudaStreamRef::FromAddress(cuda_stream);
    o.key_file = key_file;
    // None: the launcher's (ResolveGroup); "" opts out of it.
    if (!group.is_none()) o.group = group.cast<std::string>();
    if (!rank.is_none()) o.rank = rank.cast<uint32_t>();
    if (!world_size.is_none()) o.world_size = world_size.cast<uint32_t>();
    o.device = device;
    std::optional<Result<std::unique_ptr<Consumer>>> r;
    {
      py::gil_scoped_release nogil;
      r.emplace(Consumer::Connect(std::move(o)));
    }
    consumer_ = Unwrap(std::move(*r));
    for (const FieldSpec& f : consumer_->fields()) names_.push_back(f.name);
  }

  ~PyConsumer() {
    py::gil_scoped_release nogil;
    consumer_.reset();
  }

  Consumer& get() {
    if (!consumer_) throw StatusError(CancelledError("the loader was closed"));
    return *consumer_;
  }

  // cuda_stream: a cudaStream_t (as an int) of the producer's device on which
  // this and the following batches are delivered (CUDA rings), or None.
  py::object Next(const py::object& cuda_stream) {
    Consumer& c = get();
    if (!cuda_stream.is_none()) {
      c.set_cuda_stream(CudaStreamRef::FromAddress(cuda_stream.cast<uintptr_t>()));
    }
    std::optional<Result<Batch>> r;
    {
      py::gil_scoped_release nogil;
      r.emplace(c.Next());
    }
    Batch batch = Unwrap(std::move(*r));
    skipped_ = batch.skipped();
    if (batch.end_of_epoch()) {
      marker_epoch_ = batch.epoch();
      marker_step_ = batch.step();
      return py::none();
    }
    py::tuple capsules(names_.size());
    for (size_t i = 0; i < names_.size(); ++i) {
      DLManagedTensor* managed = Unwrap(batch.ToDLPack(names_[i]));
      capsules[i] = MakeDLPackCapsule(WrapForDevice(managed));
    }
    const std::span<const int64_t> idx = batch.indices();
    py::array_t<int64_t> indices(static_cast<py::ssize_t>(idx.size()));
    if (!idx.empty()) std::memcpy(indices.mutable_data(), idx.data(), idx.size_bytes());
    return py::make_tuple(std::move(capsules), std::move(indices), batch.epoch(), batch.step(),
                          batch.zero_copy());
  }

  std::string Stats() {
    Consumer& c = get();
    std::optional<Result<std::string>> r;
    {
      py::gil_scoped_release nogil;
      r.emplace(c.Stats());
    }
    return Unwrap(std::move(*r));
  }

  void Close() {
    py::gil_scoped_release nogil;
    consumer_.reset();
  }

  py::dict Position() { return PositionToDict(get().position()); }
  void Resume(const py::handle& state) {
    Consumer& c = get();
    const ConsumerPosition place = Unwrap(PositionFromDict(state));
    std::optional<Status> s;
    {
      py::gil_scoped_release nogil;
      s.emplace(c.Resume(place));
    }
    ThrowIfError(*s);
  }

  bool closed() const { return !consumer_; }
  py::list fields() {
    py::list out;
    for (const FieldSpec& f : get().fields()) out.append(FieldTuple(f));
    return out;
  }
  bool on_cuda() {
    for (const FieldSpec& f : get().fields()) {
      if (f.memory == MemoryKind::kCuda) return true;
    }
    return false;
  }
  uint32_t marker_epoch() const { return marker_epoch_; }
  uint32_t marker_step() const { return marker_step_; }
  uint64_t skipped() const { return skipped_; }
  // (group, rank, world_size, source) of the group it joined, or None.
  py::object group() {
    const std::optional<GroupMembership>& g = get().group();
    if (!g) return py::none();
    return py::make_tuple(g->group, g->rank, g->world_size, g->source);
  }

 private:
  std::unique_ptr<Consumer> consumer_;
  std::vector<std::string> names_;
  uint32_t marker_epoch_ = 0;
  uint32_t marker_step_ = 0;
  uint64_t skipped_ = 0;
};

}  // namespace

void RegisterConsumer(py::module_& m) {
  py::class_<PyConsumer>(m, "Consumer",
                         "A connection to a batchcast server (batchcast::Consumer). Use "
                         "batchcast.Loader instead.")
      .def(py::init<const std::string&, uint32_t, bool, const std::string&, uint16_t,
                    const py::object&, const py::object&, const std::string&, uintptr_t,
                    const std::string&, const std::string&, const py::object&, const py::object&,
                    const py::object&>(),
           py::arg("endpoint"), py::arg("batch_size"), py::arg("drop_last") = true,
           py::arg("join") = "immediate", py::arg("prefetch") = 2, py::arg("timeout") = py::none(),
           py::arg("connect_timeout") = py::none(), py::arg("name") = "",
           py::arg("cuda_stream") = 0, py::arg("key_file") = "", py::arg("device") = "cpu",
           py::kw_only(), py::arg("group") = py::none(), py::arg("rank") = py::none(),
           py::arg("world_size") = py::none(),
           "group/rank/world_size: None = the launcher's (torchrun, SLURM), group '' = none")
      .def("next", &PyConsumer::Next, py::arg("cuda_stream") = py::none(),
           "(capsules, indices, epoch, step, zero_copy) for a batch, None at the end of an epoch; "
           "cuda_stream: delivery stream (int cudaStream_t) for CUDA rings")
      .def("stats", &PyConsumer::Stats, "the server's stats as JSON text")
      .def("close", &PyConsumer::Close)
      .def("position", &PyConsumer::Position,
           "the place after the last batch or end-of-epoch marker, as a state dict")
      .def("resume", &PyConsumer::Resume, py::arg("state"),
           "moves the consumer, before its first batch, to a place from position()")
      .def_property_readonly("closed", &PyConsumer::closed)
      .def_property_readonly("batches_per_epoch",
                             [](PyConsumer& c) { return c.get().batches_per_epoch(); })
      .def_property_readonly("epoch_len", [](PyConsumer& c) { return c.get().epoch_len(); })
      .def_property_readonly("consumer_id", [](PyConsumer& c) { return c.get().consumer_id(); })
      .def_property_readonly("producer_batch_size",
                             [](PyConsumer& c) { return c.get().producer_batch_size(); })
      .def_property_readonly("window", [](PyConsumer& c) { return c.get().window(); })
      .def_property_readonly("wait_s", [](PyConsumer& c) { return c.get().wait_seconds(); })
      .def(
          "take_wait_share",
          [](PyConsumer& c) {
            const WaitShare share = c.get().TakeWaitShare();
            return py::make_tuple(share.wait_s, share.wall_s, share.fraction());
          },
          "(seconds next() waited, wall seconds, their ratio) since the previous call (the "
          "first: since connecting); Consumer::TakeWaitShare")
      .def_property_readonly("fields", &PyConsumer::fields,
                             "[(name, dtype name, per-sample shape)] in ring order")
      .def_property_readonly("on_cuda", &PyConsumer::on_cuda,
                             "True when the ring (some field) is in CUDA device memory")
      .def_property_readonly(
          "ring_device", [](PyConsumer& c) { return DeviceName(c.get().device()); },
          "where the fields are: 'cpu' or 'cuda:N' (the ring that serves this consumer)")
      .def_property_readonly("server_name", [](PyConsumer& c) { return c.get().server_name(); })
      .def_property_readonly(
          "home_ring", [](PyConsumer& c) { return c.get().home_ring(); },
          "the index of the ring serving it among the server's rings")
      .def_property_readonly("marker_epoch", &PyConsumer::marker_epoch)
      .def_property_readonly("marker_step", &PyConsumer::marker_step)
      .def_property_readonly("skipped", &PyConsumer::skipped)
      .def_property_readonly("group", &PyConsumer::group,
                             "(group, rank, world_size, source) of the group it joined, or None");

  m.def(
      "launcher_rank_variables",
      [] {
        py::list out;
        for (const char* v : LauncherRankVariables()) out.append(py::str(v));
        return out;
      },
      "The environment variables that make a process a rank of a launcher's job (torchrun, "
      "SLURM; Note [Launcher environment]): batchcast.launch removes them for its jobs.");

  m.def(
      "query_stats",
      [](const std::string& endpoint, const py::object& timeout, const std::string& key_file) {
        const auto ms = SecondsToMs(timeout);
        std::optional<Result<std::string>> r;
        {
          py::gil_scoped_release nogil;
          r.emplace(QueryStats(endpoint, ms.count() > 0 ? ms : std::chrono::milliseconds(3000),
                               key_file));
        }
        return Unwrap(std::move(*r));
      },
      py::arg("endpoint"), py::arg("timeout") = py::none(), py::arg("key_file") = "",
      "A running server's stats (JSON text) without joining its stream.");

  m.def(
      "ring_layout",
      [](const std::vector<std::tuple<std::string, std::string, std::vector<int64_t>>>& fields,
         uint32_t window, uint32_t batch_size) {
        std::vector<FieldSpec> specs;
        for (const auto& [name, dtype, shape] : fields) {
          specs.push_back(FieldSpec{name, Unwrap(ParseDType(dtype)), shape, MemoryKind::kHost});
        }
        RingLayout layout = Unwrap(RingLayout::Make(specs, window, batch_size));
        py::dict out;
        for (size_t f = 0; f < specs.size(); ++f) {
          out[py::str(specs[f].name)] =
              py::make_tuple(layout.SampleOffset(f, 0, 0), layout.field_slot_stride(f));
        }
        return py::make_tuple(out, layout.allocation_bytes(MemoryKind::kHost));
      },
      py::arg("fields"), py::arg("window"), py::arg("batch_size"),
      "({field: (offset of slot 0, slot stride)}, host allocation bytes): the ring layout "
      "(core/ring_layout.h) a server with these fields uses; for tests and tools.");
  m.def(
      "host_ring_shm_name", [](const std::string& name) { return HostRingShmName(name); },
      "The POSIX shared memory name of server `name`'s host ring.");
}

}  // namespace batchcast::pybind
