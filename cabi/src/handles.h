// What the opaque handles of mnemo.h hold.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/runtime.h"
#include "core/store.h"
#include "mnemo.h"

struct mnemo_runtime {
  std::unique_ptr<mnemo::Runtime> rt;
};

struct mnemo_store {
  std::unique_ptr<mnemo::Store> store;
};

struct mnemo_filter {
  mnemo::Filter filter;
};

// Records read back: the owned fields and the C views into them.
struct mnemo_records {
  std::vector<mnemo::FieldsOut> rows;
  std::vector<std::vector<const char*>> ns, tags;
  std::vector<std::vector<mnemo_attribute>> attrs;
};

struct mnemo_namespaces {
  std::vector<std::pair<std::vector<std::string>, uint64_t>> rows;
  std::vector<std::vector<const char*>> parts;
};
