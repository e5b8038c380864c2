// The per-thread text behind mnemo_last_error(). Fixed storage, so setting it
// can never fail or throw.
#pragma once

namespace mnemo::cabi {

void set_last_error(const char* function, const char* message) noexcept;
const char* last_error() noexcept;

}  // namespace mnemo::cabi
