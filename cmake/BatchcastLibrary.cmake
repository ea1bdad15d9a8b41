# batchcast_library(<name> [INTERNAL] [COMPONENT <component>] SOURCES <files...>
#                   [PUBLIC <deps...>] [PRIVATE <deps...>])
#
# One library per folder: <folder>/CMakeLists.txt calls this to make the
# static library batchcast_<name> (alias and export name batchcast::<name>)
# from the folder's files. <folder>/include/ holds its public headers
# (installed; documented in the headers themselves), <folder>/src/ its private
# ones. Private headers that other parts of the project need (the wire
# protocol, the mutex wrapper, ...) are included from the project root as
# "<folder>/src/<file>.h" through batchcast_internal, which is never installed.
# INTERNAL: a library only the project's own libraries use (its archive is
# installed, since static libraries link through it, but not its headers).
# COMPONENT: the part of the installed package (find_package(batchcast
# COMPONENTS ...), cmake/batchcastConfig.cmake.in) whose export set holds the
# library: `core` (always loaded), `client`, or `server` (the default: the
# libraries of the producer, with its image dependencies).
function(batchcast_library name)
  cmake_parse_arguments(ARG "INTERNAL" "COMPONENT" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  if(NOT ARG_COMPONENT)
    set(ARG_COMPONENT server)
  endif()
  set(t batchcast_${name})
  add_library(${t} STATIC ${ARG_SOURCES})
  add_library(batchcast::${name} ALIAS ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME ${t})
  target_include_directories(${t} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  if(NOT ARG_INTERNAL)
    install(DIRECTORY include/batchcast DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  endif()
  target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${t} PUBLIC ${ARG_PUBLIC}
    PRIVATE ${ARG_PRIVATE} $<BUILD_INTERFACE:batchcast_internal>)
  # The public headers are C++20: so are the programs that include them.
  target_compile_features(${t} PUBLIC cxx_std_20)
  install(TARGETS ${t} EXPORT batchcast-${ARG_COMPONENT}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
