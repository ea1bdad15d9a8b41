// Status -> Python exceptions.
//
//   batchcast.BatchcastError(RuntimeError)          base of everything below
//   InvalidArgument(BatchcastError, ValueError)      StatusCode::kInvalidArgument
//   NotFound(BatchcastError, FileNotFoundError)      kNotFound (no server of that name: no socket
//   file) ServerUnavailable(BatchcastError, ConnectionError) kUnavailable (server gone, stopped,
//   not answering) Timeout(BatchcastError, TimeoutError)            kDeadlineExceeded
//   ResourceExhausted(BatchcastError)                kResourceExhausted (evicted, too many leases,
//   ...) Cancelled(BatchcastError)                        kCancelled EndOfStream(BatchcastError)
//   kOutOfRange (the stream has ended) DataLoss(BatchcastError)                         kDataLoss
//   InternalError(BatchcastError)                    kInternal (a bug)
//   PermissionDenied(BatchcastError, PermissionError) kPermissionDenied (a refused CURVE key, a
//   key file others may read)
//
// str(exc) is exactly the Status message; exc.code is the code's name
// ("Unavailable", ...). Any other C++ exception that reaches Python (a bug:
// the library reports failures as Status) becomes InternalError, never a
// bare RuntimeError; pybind11's own (TypeError, ...) and MemoryError stay. The classes are created
// here (so the translator can raise them) and re-exported by batchcast/__init__.py; __module__ is
// "batchcast".
#include <Python.h>

#include <array>
#include <stdexcept>

#include "common.h"

namespace batchcast::pybind {
namespace {

constexpr size_t kNumCodes = 11;
std::array<PyObject*, kNumCodes> g_by_code{};  // owned references, never freed
PyObject* g_base = nullptr;

PyObject* NewError(py::module_& m, const char* name, const char* doc, PyObject* extra_base) {
  PyObject* bases =
      extra_base != nullptr ? PyTuple_Pack(2, g_base, extra_base) : PyTuple_Pack(1, g_base);
  if (bases == nullptr) throw py::error_already_set();
  const std::string qualified = std::string("batchcast.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  Py_DECREF(bases);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::reinterpret_borrow<py::object>(cls));
  return cls;
}

void SetPythonError(const Status& status) {
  const size_t code = static_cast<size_t>(status.code());
  PyObject* cls = code < kNumCodes && g_by_code[code] != nullptr ? g_by_code[code] : g_base;
  py::object type = py::reinterpret_borrow<py::object>(cls);
  py::object exc = type(status.message());
  exc.attr("code") = std::string(StatusCodeName(status.code()));
  PyErr_SetObject(cls, exc.ptr());
}

}  // namespace

void RegisterErrors(py::module_& m) {
  g_base = PyErr_NewExceptionWithDoc(
      "batchcast.BatchcastError",
      "Base class of batchcast errors. str(e) is the library's message; e.code names the status "
      "code (InvalidArgument, NotFound, Unavailable, DeadlineExceeded, ResourceExhausted, "
      "Cancelled, Internal, OutOfRange, DataLoss, PermissionDenied).",
      PyExc_RuntimeError, nullptr);
  if (g_base == nullptr) throw py::error_already_set();
  m.add_object("BatchcastError", py::reinterpret_borrow<py::object>(g_base));
  auto at = [](StatusCode c) -> PyObject*& { return g_by_code[static_cast<size_t>(c)]; };
  at(StatusCode::kInvalidArgument) = NewError(
      m, "InvalidArgument", "An option or request was malformed or impossible.", PyExc_ValueError);
  at(StatusCode::kNotFound) = NewError(
      m, "NotFound", "A named thing does not exist (usually: no server of that name runs).",
      PyExc_FileNotFoundError);
  at(StatusCode::kUnavailable) =
      NewError(m, "ServerUnavailable",
               "The server is gone, was stopped, or stopped answering (heartbeat timeout).",
               PyExc_ConnectionError);
  at(StatusCode::kDeadlineExceeded) =
      NewError(m, "Timeout", "A wait ran past its timeout.", PyExc_TimeoutError);
  at(StatusCode::kResourceExhausted) = NewError(
      m, "ResourceExhausted",
      "A bound was hit: evicted by lag_policy='evict', too many unreleased batches, too many "
      "consumers, ... (batchcast.Evicted is the same class).",
      nullptr);
  at(StatusCode::kCancelled) = NewError(m, "Cancelled", "Stopped on purpose.", nullptr);
  at(StatusCode::kInternal) = NewError(m, "InternalError", "A bug in batchcast.", nullptr);
  at(StatusCode::kOutOfRange) = NewError(
      m, "EndOfStream", "The server's stream has ended: it produced all of its epochs.", nullptr);
  at(StatusCode::kDataLoss) = NewError(m, "DataLoss", "A file could not be decoded.", nullptr);
  at(StatusCode::kPermissionDenied) = NewError(
      m, "PermissionDenied",
      "A key the caller may not use: the server refused this consumer's CURVE key, or a key "
      "file is readable by other users.",
      PyExc_PermissionError);

  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const StatusError& e) {
      SetPythonError(e.status());
    } catch (const py::builtin_exception&) {
      throw;  // pybind11's own: TypeError, ValueError, IndexError, ...
    } catch (const py::error_already_set&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;  // MemoryError
    } catch (const std::exception& e) {
      SetPythonError(InternalError(std::string("unexpected C++ exception: ") + e.what()));
    }
  });

  // For tests of the mapping: raises the exception a Status of `code` becomes.
  m.def("_raise_status", [](int code, const std::string& message) {
    if (code <= 0 || code >= static_cast<int>(kNumCodes)) throw py::value_error("bad code");
    throw StatusError(Status(static_cast<StatusCode>(code), message));
  });
  // For tests of the fallback: a C++ exception that is not a Status.
  m.def("_raise_cpp_exception",
        [](const std::string& message) { throw std::runtime_error(message); });
}

}  // namespace batchcast::pybind
