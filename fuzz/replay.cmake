# Every committed fuzz input (seed corpus and past failures) replayed under
# ctest by the same harness objects the fuzzer links, with a main() that feeds
# the files in; runs in the normal and the sanitized build.
include(${CMAKE_CURRENT_LIST_DIR}/targets.cmake)

foreach(t ${MNEMO_FUZZ_TARGETS})
  mnemo_fuzz_program(mnemo_fuzz_replay_${t} ${t} ${CMAKE_CURRENT_LIST_DIR}/replay_main.cpp)
  target_link_libraries(mnemo_fuzz_replay_${t} PRIVATE mnemo)
  set(_inputs ${CMAKE_CURRENT_LIST_DIR}/corpus/${t})
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/regressions/${t})
    list(APPEND _inputs ${CMAKE_CURRENT_LIST_DIR}/regressions/${t})
  endif()
  add_test(NAME fuzz_replay_${t} COMMAND mnemo_fuzz_replay_${t} ${_inputs})
  set_tests_properties(fuzz_replay_${t} PROPERTIES TIMEOUT 300 LABELS fuzz)
endforeach()
