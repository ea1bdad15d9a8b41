// batchcast._core.AttachedProducer: batchcast::AttachedProducer
// (batchcast/server/attached_producer.h) marshalled for Python; the Loader's
// produce=True makes one.
#include "batchcast/server/attached_producer.h"

#include <memory>
#include <string>

#include "common.h"

namespace batchcast::pybind {

void RegisterAttachedProducer(py::module_& m) {
  py::class_<AttachedProducer>(m, "AttachedProducer")
      .def(py::init([](const std::string& server_name, uint32_t ring, const py::object& timeout) {
             const std::chrono::milliseconds ms = SecondsToMs(timeout);
             py::gil_scoped_release release;
             return Unwrap(AttachedProducer::Start(
                 server_name, ring, ms.count() > 0 ? ms : std::chrono::milliseconds(10000)));
           }),
           py::arg("server_name"), py::arg("ring"), py::arg("timeout") = py::none())
      .def("stop", &AttachedProducer::Stop, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("running", &AttachedProducer::running)
      .def_property_readonly("error",
                             [](const AttachedProducer& p) -> py::object {
                               const Status s = p.status();
                               if (s.ok()) return py::none();
                               return py::str(s.ToString());
                             })
      .def_property_readonly("batches", &AttachedProducer::batches)
      .def_property_readonly("samples", &AttachedProducer::samples)
      .def_property_readonly("device", &AttachedProducer::device);
}

}  // namespace batchcast::pybind
