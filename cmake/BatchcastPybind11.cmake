# batchcast_find_pybind11(): finds pybind11's CMake package for the Python
# interpreter the extension is built for (Python3_EXECUTABLE): first where
# that interpreter's pybind11 says (`python -m pybind11 --cmakedir`: a pip
# install, in a venv or not), then the usual places (Debian's pybind11-dev in
# /usr/lib/cmake/pybind11). -Dpybind11_DIR=... still wins over both.
# A macro: pybind11's config sets variables pybind11_add_module needs.
macro(batchcast_find_pybind11)
  set(_bc_pybind11_hint)
  execute_process(COMMAND "${Python3_EXECUTABLE}" -m pybind11 --cmakedir
    RESULT_VARIABLE _bc_rc OUTPUT_VARIABLE _bc_out ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  if(_bc_rc EQUAL 0 AND IS_DIRECTORY "${_bc_out}")
    set(_bc_pybind11_hint "${_bc_out}")
  endif()
  set(PYBIND11_FINDPYTHON ON)
  find_package(pybind11 CONFIG HINTS ${_bc_pybind11_hint})
  if(NOT pybind11_FOUND)
    message(FATAL_ERROR "batchcast: pybind11 not found for ${Python3_EXECUTABLE}: install it "
      "for that interpreter (`${Python3_EXECUTABLE} -m pip install pybind11`) or Debian's "
      "pybind11-dev, pass -Dpybind11_DIR=<dir of pybind11Config.cmake>, or build without "
      "the Python module (-DBATCHCAST_BUILD_PYTHON=OFF)")
  endif()
  message(STATUS "batchcast: pybind11 ${pybind11_VERSION} from ${pybind11_DIR}")
  unset(_bc_rc)
  unset(_bc_out)
  unset(_bc_pybind11_hint)
endmacro()
