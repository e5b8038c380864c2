#include "last_error.h"

#include <cstdio>

namespace mnemo::cabi {

namespace {
thread_local char g_last_error[1024] = "";
}

void set_last_error(const char* function, const char* message) noexcept {
  std::snprintf(g_last_error, sizeof g_last_error, "%s: %s", function, message);
}

const char* last_error() noexcept { return g_last_error; }

}  // namespace mnemo::cabi
