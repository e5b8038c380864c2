#include "progress.h"

#include <unistd.h>

#include <cstdio>

#include "common.h"

namespace cli {

Progress::Progress(std::string label, uint64_t total)
    : label_(std::move(label)), total_(total), on_(isatty(2) == 1 && total > 0) {}

Progress::~Progress() {
  if (drawn_) {
    draw(total_);
    std::fputc('\n', stderr);
  }
}

void Progress::update(uint64_t done) {
  if (!on_) return;
  const double t = now_seconds();
  if (t - last_ < 0.1) return;
  last_ = t;
  draw(done);
}

void Progress::draw(uint64_t done) {
  constexpr int kWidth = 40;
  const double f = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const int fill = static_cast<int>(f * kWidth);
  std::fprintf(stderr, "\r%-10s [", label_.c_str());
  for (int i = 0; i < kWidth; ++i) std::fputc(i < fill ? '#' : ' ', stderr);
  std::fprintf(stderr, "] %5.1f%%", 100.0 * f);
  std::fflush(stderr);
  drawn_ = true;
}

}  // namespace cli
