# batchcast::image: the CPU image pipeline (libjpeg-turbo decode + OpenCV
# transforms). Included from core/CMakeLists.txt; a separate target so that
# consumers linking batchcast::client need neither libjpeg-turbo nor OpenCV.
# Requires (found at top level): PkgConfig::TURBOJPEG, OpenCV (core, imgproc),
# CLI11 (for the imgtool).
set(_bc_image_dir ${CMAKE_CURRENT_LIST_DIR})

add_library(batchcast_image STATIC
  ${_bc_image_dir}/src/image/jpeg.cc
  ${_bc_image_dir}/src/image/pipeline.cc
  ${_bc_image_dir}/src/image/transform.cc
)
add_library(batchcast::image ALIAS batchcast_image)
set_target_properties(batchcast_image PROPERTIES EXPORT_NAME image OUTPUT_NAME batchcast_image)
target_include_directories(batchcast_image PUBLIC
  $<BUILD_INTERFACE:${_bc_image_dir}/include>
  $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_include_directories(batchcast_image SYSTEM PRIVATE ${OpenCV_INCLUDE_DIRS})
# libjpeg's API (jpeglib.h) lives in libjpeg, next to libturbojpeg.
target_link_libraries(batchcast_image
  PUBLIC batchcast::core
  PRIVATE PkgConfig::TURBOJPEG jpeg ${OpenCV_LIBS})
target_compile_options(batchcast_image PRIVATE -Wall -Wextra)
install(TARGETS batchcast_image EXPORT batchcastTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

# batchcast_imgtool: runs the pipeline on one file (used by the Python reference test).
if(BATCHCAST_BUILD_TESTS)
  add_executable(batchcast_imgtool ${PROJECT_SOURCE_DIR}/tools/batchcast_imgtool.cc)
  target_link_libraries(batchcast_imgtool PRIVATE batchcast::image CLI11::CLI11)
  target_compile_options(batchcast_imgtool PRIVATE -Wall -Wextra)
  # Next to the other binaries' build dir root, where the Python test looks for it.
  set_target_properties(batchcast_imgtool PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/tools)
endif()
unset(_bc_image_dir)
