# batchcast_library(<name> [INTERNAL] SOURCES <files...> [PUBLIC <deps...>] [PRIVATE <deps...>])
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
function(batchcast_library name)
  cmake_parse_arguments(ARG "INTERNAL" "" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  set(t batchcast_${name})
  add_library(${t} STATIC ${ARG_SOURCES})
  add_library(batchcast::${name} ALIAS ${t})
  set_target_properties(${t} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME ${t})
  if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/include)
    target_include_directories(${t} PUBLIC
      $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
      $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
    if(NOT ARG_INTERNAL)
      install(DIRECTORY include/batchcast DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    endif()
  endif()
  target_include_directories(${t} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(${t} PUBLIC ${ARG_PUBLIC}
    PRIVATE ${ARG_PRIVATE} $<BUILD_INTERFACE:batchcast_internal>)
  target_compile_options(${t} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  install(TARGETS ${t} EXPORT batchcastTargets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endfunction()
