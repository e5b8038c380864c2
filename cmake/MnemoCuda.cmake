# Whether and for which GPUs the CUDA module is built. libmnemo.so never
# links CUDA either way.
#   MNEMO_CUDA=AUTO (default): built when a CUDA compiler is found and a GPU is
#     visible at configure time, for that GPU's architecture only, as CMake's
#     "native" would choose (a machine without a GPU cannot load the module, so
#     it is not built there).
#   MNEMO_CUDA=ON: a CUDA compiler is required; built for every architecture
#     of MNEMO_CUDA_ALL_ARCHS (bundles and wheels) unless
#     CMAKE_CUDA_ARCHITECTURES names others.
#   MNEMO_CUDA=OFF: never built.
# MNEMO_CUDA_WHY says what was chosen and why; configure prints it and
# `make demo` repeats it.
set(MNEMO_CUDA_ALL_ARCHS "80-real;90-real;90-virtual")
set(MNEMO_CUDA_ENABLED OFF)

# Compute capabilities of the visible GPUs as CUDA architectures ("90-real"),
# from nvidia-smi (no CUDA program runs, so it works before CUDA is enabled).
function(mnemo_visible_gpu_archs out)
  set(archs "")
  find_program(MNEMO_NVIDIA_SMI nvidia-smi)
  if(MNEMO_NVIDIA_SMI)
    execute_process(COMMAND "${MNEMO_NVIDIA_SMI}" --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 30)
    if(rc EQUAL 0)
      string(REGEX MATCHALL "[0-9]+\\.[0-9]+" caps "${caps}")
      foreach(cap IN LISTS caps)
        string(REPLACE "." "" cap "${cap}")
        list(APPEND archs "${cap}-real")
      endforeach()
      list(REMOVE_DUPLICATES archs)
    endif()
  endif()
  set(${out} "${archs}" PARENT_SCOPE)
endfunction()

if(MNEMO_CUDA STREQUAL "OFF")
  set(MNEMO_CUDA_WHY "not built (MNEMO_CUDA=OFF)")
else()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    if(MNEMO_CUDA STREQUAL "ON")
      message(FATAL_ERROR "MNEMO_CUDA=ON but no CUDA compiler was found (install the CUDA toolkit or set CMAKE_CUDA_COMPILER)")
    endif()
    set(MNEMO_CUDA_WHY "not built (no CUDA compiler found)")
  elseif(MNEMO_CUDA STREQUAL "ON")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES "${MNEMO_CUDA_ALL_ARCHS}")
    endif()
    set(MNEMO_CUDA_ENABLED ON)
    set(MNEMO_CUDA_WHY "built (MNEMO_CUDA=ON) for ${CMAKE_CUDA_ARCHITECTURES}")
  else()
    mnemo_visible_gpu_archs(_mnemo_gpu_archs)
    if(_mnemo_gpu_archs)
      if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
        set(CMAKE_CUDA_ARCHITECTURES "${_mnemo_gpu_archs}")
      endif()
      set(MNEMO_CUDA_ENABLED ON)
      set(MNEMO_CUDA_WHY "built for the visible GPU (${CMAKE_CUDA_ARCHITECTURES})")
    else()
      set(MNEMO_CUDA_WHY
          "not built: no GPU visible at configure time (-DMNEMO_CUDA=ON builds it for ${MNEMO_CUDA_ALL_ARCHS})")
    endif()
  endif()
endif()
if(MNEMO_CUDA_ENABLED)
  # Hopper code as sm_90a: the wide-row batch kernel's warpgroup MMAs are
  # architecture-specific features, and sm_90a code runs on every sm_90
  # device (the only ones sm_90 code runs on). PTX stays compute_90, for
  # later devices, where those kernels take warp MMAs.
  list(TRANSFORM CMAKE_CUDA_ARCHITECTURES REPLACE "^90-real$" "90a-real")
  if("90a-real" IN_LIST CMAKE_CUDA_ARCHITECTURES)
    set(MNEMO_CUDA_WHY "${MNEMO_CUDA_WHY}; Hopper code as 90a-real")
  endif()
  enable_language(CUDA)
endif()
