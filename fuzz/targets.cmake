# The fuzz targets, their seed corpora and past failing inputs; shared by the
# libFuzzer build (CMakeLists.txt) and the replay under ctest (replay.cmake).
set(MNEMO_FUZZ_TARGETS abi_calls precision resample pairs store_file)
if(TARGET mnemo_fuzz_common)
  return()  # the objects below exist already (replay.cmake came first)
endif()

# FuzzedDataProvider.h comes with clang's runtime package (libclang-rt-14-dev).
file(GLOB _mnemo_fdp_dirs /usr/lib/llvm-*/lib/clang/*/include)
# Only its own folder goes on the include path: clang's builtin headers
# beside it must not shadow the compiler's own.
find_path(MNEMO_FUZZ_PROVIDER_DIR FuzzedDataProvider.h PATHS ${_mnemo_fdp_dirs} PATH_SUFFIXES fuzzer)
if(NOT MNEMO_FUZZ_PROVIDER_DIR)
  message(FATAL_ERROR "fuzzer/FuzzedDataProvider.h not found: install libclang-rt-14-dev (scripts/install-deps.sh)")
endif()

# Each harness and the sources all of them share are compiled once per build
# folder and linked into the replay and, in a MNEMO_BUILD_FUZZ build, into the
# libFuzzer program as well. There they carry the fuzzer's coverage
# instrumentation, which the replay links without libFuzzer (the sanitizer
# runtime holds the hooks). vptr checks stay off: the CUDA module's backend
# class comes from another shared object with hidden type information.
set(MNEMO_FUZZ_COMPILE_FLAGS -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize=vptr -fno-omit-frame-pointer -g)
set(_mnemo_fuzz_dir ${CMAKE_CURRENT_LIST_DIR})
function(mnemo_fuzz_objects name)
  add_library(${name} OBJECT ${ARGN})
  target_include_directories(${name} PRIVATE ${_mnemo_fuzz_dir} ${PROJECT_SOURCE_DIR}/tests
                                             ${PROJECT_SOURCE_DIR}/cabi/include)
  target_include_directories(${name} SYSTEM PRIVATE ${MNEMO_FUZZ_PROVIDER_DIR})
  if(MNEMO_BUILD_FUZZ)
    target_compile_options(${name} PRIVATE ${MNEMO_FUZZ_COMPILE_FLAGS})
  endif()
  mnemo_strict_warnings(${name})
endfunction()
mnemo_fuzz_objects(mnemo_fuzz_common
  ${_mnemo_fuzz_dir}/fuzz_support.cpp
  ${_mnemo_fuzz_dir}/topk_oracle.cpp
  ${_mnemo_fuzz_dir}/store_image.cpp
  ${_mnemo_fuzz_dir}/journal_image.cpp
  ${_mnemo_fuzz_dir}/resample_oracle.cpp
  ${_mnemo_fuzz_dir}/fields_image.cpp
  ${PROJECT_SOURCE_DIR}/tests/reference.cpp
  ${PROJECT_SOURCE_DIR}/tests/store_fields_model.cpp)
foreach(t ${MNEMO_FUZZ_TARGETS})
  mnemo_fuzz_objects(mnemo_fuzz_harness_${t} ${_mnemo_fuzz_dir}/fuzz_${t}.cpp)
endforeach()

# A program of harness `t`'s objects; the caller adds main() and the library.
function(mnemo_fuzz_program name t)
  add_executable(${name} ${ARGN} $<TARGET_OBJECTS:mnemo_fuzz_harness_${t}> $<TARGET_OBJECTS:mnemo_fuzz_common>)
  target_link_libraries(${name} PRIVATE ${XXHASH_LIBRARY})
  mnemo_strict_warnings(${name})
endfunction()
