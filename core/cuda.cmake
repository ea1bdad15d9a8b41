# The GPU path's core libraries (only files under core/.../cuda include CUDA
# headers; everything else uses their opaque C++ API):
#   batchcast::cuda        CUDA runtime wrappers (streams, events, IPC, copies)
#                          and small utility kernels; used by server and client.
#   batchcast::cuda_image  nvJPEG batched decode and the fused augmentation
#                          kernel; used by the server only.
# Without a CUDA compiler (or with -DBATCHCAST_WITH_CUDA=OFF) both are built
# from stubs with the same API that report "no CUDA support", so everything
# else builds and runs unchanged. nvJPEG is optional: CUDA::nvjpeg when the
# toolkit has it (BATCHCAST_HAVE_NVJPEG), else a stub decoder.
# Included from core/CMakeLists.txt; BATCHCAST_HAVE_CUDA comes from the top level.
set(_bc_cuda_dir ${CMAKE_CURRENT_LIST_DIR})
set(BATCHCAST_HAVE_NVJPEG OFF)
if(BATCHCAST_HAVE_CUDA)
  add_library(batchcast_cuda STATIC
    ${_bc_cuda_dir}/src/cuda/runtime.cc
    ${_bc_cuda_dir}/src/cuda/kernels.cu)
  set(_bc_cuda_image_srcs ${_bc_cuda_dir}/src/cuda/augment.cu)
  if(TARGET CUDA::nvjpeg)
    set(BATCHCAST_HAVE_NVJPEG ON)
    list(APPEND _bc_cuda_image_srcs ${_bc_cuda_dir}/src/cuda/nvjpeg.cc)
  else()
    list(APPEND _bc_cuda_image_srcs ${_bc_cuda_dir}/src/cuda/nvjpeg_stub.cc)
  endif()
  add_library(batchcast_cuda_image STATIC ${_bc_cuda_image_srcs})
else()
  add_library(batchcast_cuda STATIC ${_bc_cuda_dir}/src/cuda/stub.cc)
  add_library(batchcast_cuda_image STATIC
    ${_bc_cuda_dir}/src/cuda/augment_stub.cc
    ${_bc_cuda_dir}/src/cuda/nvjpeg_stub.cc)
endif()
message(STATUS "batchcast: CUDA ${BATCHCAST_HAVE_CUDA}, nvJPEG ${BATCHCAST_HAVE_NVJPEG}")

foreach(_t batchcast_cuda batchcast_cuda_image)
  target_include_directories(${_t} PUBLIC
    $<BUILD_INTERFACE:${_bc_cuda_dir}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_options(${_t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  if(BATCHCAST_HAVE_CUDA)
    set_target_properties(${_t} PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON
      CUDA_RUNTIME_LIBRARY Static)
    target_link_libraries(${_t} PUBLIC CUDA::cudart_static)
  endif()
endforeach()
add_library(batchcast::cuda ALIAS batchcast_cuda)
add_library(batchcast::cuda_image ALIAS batchcast_cuda_image)
set_target_properties(batchcast_cuda PROPERTIES EXPORT_NAME cuda OUTPUT_NAME batchcast_cuda)
set_target_properties(batchcast_cuda_image PROPERTIES EXPORT_NAME cuda_image
  OUTPUT_NAME batchcast_cuda_image)
target_link_libraries(batchcast_cuda PUBLIC batchcast::core)
target_link_libraries(batchcast_cuda_image PUBLIC batchcast::cuda)
if(BATCHCAST_HAVE_NVJPEG)
  target_compile_definitions(batchcast_cuda_image PRIVATE BATCHCAST_HAVE_NVJPEG)
  target_compile_definitions(batchcast_cuda PRIVATE BATCHCAST_HAVE_NVJPEG)
  target_link_libraries(batchcast_cuda_image PRIVATE CUDA::nvjpeg)
endif()
install(TARGETS batchcast_cuda batchcast_cuda_image EXPORT batchcastTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
unset(_bc_cuda_dir)
unset(_bc_cuda_image_srcs)
