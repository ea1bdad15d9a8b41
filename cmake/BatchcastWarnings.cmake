# Warnings of the project's own targets: every target made under the top
# CMakeLists.txt (libraries, tools, the Python module, tests, benchmarks) is
# compiled with -Wall -Wextra; its dependencies are found prebuilt and never
# compiled here. BATCHCAST_WERROR (off by default, on in CI: scripts/test.sh)
# turns every warning into an error, nvcc's own (CUDA front end) included.
# Directory-wide, so that no target can miss them: called once, before the
# first add_subdirectory(). Nothing of this is exported to users of the
# installed package, nor to the separate projects under examples/ and
# tests/install/.
macro(batchcast_warnings)
  add_compile_options(
    $<$<COMPILE_LANGUAGE:C,CXX>:-Wall>
    $<$<COMPILE_LANGUAGE:C,CXX>:-Wextra>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  if(BATCHCAST_WERROR)
    add_compile_options(
      $<$<COMPILE_LANGUAGE:C,CXX>:-Werror>
      $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings>)
  endif()
endmacro()
