// mnemo info: what this library is and what it can run on.
#include <cstdio>

#include "commands.h"
#include "common.h"

namespace cli {

int cmd_info(int argc, char** argv) {
  Args a(argc, argv, 2, {});
  std::printf("mnemo %s (library ABI %u, header ABI %d)\n", mnemo_version(), mnemo_abi_version(), MNEMO_ABI_VERSION);
  std::printf("build: %s\n", mnemo_build_info());
  Runtime cpu(MNEMO_BACKEND_CPU, MNEMO_PRECISION_EXACT);
  mnemo_runtime_report r;
  r.struct_size = sizeof r;
  check(mnemo_runtime_info(cpu.rt, &r), "runtime info");
  std::printf("cpu: %s, %u threads\n", r.device_name, r.num_threads);
  mnemo_runtime_options o = mnemo_runtime_options_default();
  o.backend = MNEMO_BACKEND_CUDA;
  mnemo_runtime* gpu = nullptr;
  const mnemo_status st = mnemo_runtime_create(&o, &gpu);
  if (st == MNEMO_OK) {
    mnemo_runtime_report g;
    g.struct_size = sizeof g;
    check(mnemo_runtime_info(gpu, &g), "runtime info");
    std::printf("gpu: %s (device %d)\n", g.device_name, g.device_id);
    mnemo_runtime_destroy(gpu);
  } else {
    std::printf("gpu: none (%s)\n", mnemo_last_error());
  }
  std::printf("backends: cpu%s\n", st == MNEMO_OK ? ", cuda" : "");
  return 0;
}

}  // namespace cli
