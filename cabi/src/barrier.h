// The one exception barrier: every entry point runs its body through
// guarded(), which turns any exception into a status plus last-error text.
#pragma once

#include <new>

#include "core/error.h"
#include "last_error.h"
#include "mnemo.h"

namespace mnemo::cabi {

template <class F>
mnemo_status guarded(const char* function, F&& body) noexcept {
  try {
    body();
    return MNEMO_OK;
  } catch (const Error& e) {
    set_last_error(function, e.what());
    return static_cast<mnemo_status>(e.code());
  } catch (const std::bad_alloc&) {
    set_last_error(function, "out of memory");
    return MNEMO_E_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error(function, e.what());
    return MNEMO_E_INTERNAL;
  } catch (...) {
    set_last_error(function, "unknown internal error");
    return MNEMO_E_INTERNAL;
  }
}

}  // namespace mnemo::cabi
