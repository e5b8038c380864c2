// What the opaque handles of mnemo.h hold.
#pragma once

#include <memory>

#include "core/runtime.h"
#include "core/store.h"

struct mnemo_runtime {
  std::unique_ptr<mnemo::Runtime> rt;
};

struct mnemo_store {
  std::unique_ptr<mnemo::Store> store;
};
