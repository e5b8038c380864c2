# The fuzz targets, their seed corpora and past failing inputs; shared by the
# libFuzzer build (CMakeLists.txt) and the replay under ctest (replay.cmake).
set(MNEMO_FUZZ_TARGETS abi_calls precision resample pairs store_file)

# FuzzedDataProvider.h comes with clang's runtime package (libclang-rt-14-dev).
file(GLOB _mnemo_fdp_dirs /usr/lib/llvm-*/lib/clang/*/include)
# Only its own folder goes on the include path: clang's builtin headers
# beside it must not shadow the compiler's own.
find_path(MNEMO_FUZZ_PROVIDER_DIR FuzzedDataProvider.h PATHS ${_mnemo_fdp_dirs} PATH_SUFFIXES fuzzer)
if(NOT MNEMO_FUZZ_PROVIDER_DIR)
  message(FATAL_ERROR "fuzzer/FuzzedDataProvider.h not found: install libclang-rt-14-dev (scripts/install-deps.sh)")
endif()

set(MNEMO_FUZZ_COMMON
  ${CMAKE_CURRENT_LIST_DIR}/fuzz_support.cpp
  ${CMAKE_CURRENT_LIST_DIR}/topk_oracle.cpp
  ${CMAKE_CURRENT_LIST_DIR}/store_image.cpp
  ${CMAKE_CURRENT_LIST_DIR}/journal_image.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resample_oracle.cpp
  ${PROJECT_SOURCE_DIR}/tests/reference.cpp)

# Compile settings every harness build shares.
function(mnemo_fuzz_setup target)
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_LIST_DIR} ${PROJECT_SOURCE_DIR}/tests)
  target_include_directories(${target} SYSTEM PRIVATE ${MNEMO_FUZZ_PROVIDER_DIR})
  target_link_libraries(${target} PRIVATE ${XXHASH_LIBRARY})
  mnemo_strict_warnings(${target})
endfunction()
