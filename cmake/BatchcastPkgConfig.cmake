# batchcast-client.pc: batchcast::client for build systems other than CMake
# (`pkg-config --cflags --libs batchcast-client`), installed into
# <libdir>/pkgconfig. It lists every library the static archives need:
# ZeroMQ, spdlog and fmt (through Requires), pthread, rt, and the static CUDA
# runtime when built with CUDA. Paths are relative to the .pc file
# (${pcfiledir}), so an install with `cmake --install --prefix P` is found
# wherever P is.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(BATCHCAST_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(BATCHCAST_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(BATCHCAST_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH _bc_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _bc_up "${_bc_up}")
  set(BATCHCAST_PC_PREFIX "\${pcfiledir}/${_bc_up}")
  set(BATCHCAST_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(BATCHCAST_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
  unset(_bc_up)
endif()
set(BATCHCAST_PC_CUDA_LIBS "")
if(BATCHCAST_HAVE_CUDA)
  # Where CMake found the static runtime batchcast::cuda links.
  get_target_property(_bc_cudart CUDA::cudart_static IMPORTED_LOCATION)
  get_filename_component(_bc_cudart_dir "${_bc_cudart}" DIRECTORY)
  set(BATCHCAST_PC_CUDA_LIBS " -L${_bc_cudart_dir} -lcudart_static -ldl")
  unset(_bc_cudart)
  unset(_bc_cudart_dir)
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/batchcast-client.pc.in
  ${PROJECT_BINARY_DIR}/batchcast-client.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/batchcast-client.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
