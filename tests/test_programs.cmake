# mnemo_test_programs: what ctest runs and nothing else (libmnemo.so and every
# program of the tree but the demo, the benchmarks and the libFuzzer ones), so
# that a sanitized build (make test-asan) compiles only what its tests use.
# Included at the end of the top-level CMakeLists.txt, once every folder is in.
function(_mnemo_test_programs dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  set(found "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE" AND NOT t MATCHES "^(mnemo_demo|fuzz_.*)$")
      list(APPEND found ${t})
    endif()
  endforeach()
  foreach(d ${subdirs})
    if(NOT d MATCHES "/(bench|examples/demo)$")
      _mnemo_test_programs(${d} sub)
      list(APPEND found ${sub})
    endif()
  endforeach()
  set(${out} ${found} PARENT_SCOPE)
endfunction()

_mnemo_test_programs(${PROJECT_SOURCE_DIR} _mnemo_programs)
add_custom_target(mnemo_test_programs)
add_dependencies(mnemo_test_programs mnemo ${_mnemo_programs})
