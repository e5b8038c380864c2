// A progress bar on stderr for long loads and searches, drawn only when
// stderr is a terminal, at most ten times a second.
#pragma once

#include <cstdint>
#include <string>

namespace cli {

class Progress {
 public:
  Progress(std::string label, uint64_t total);
  ~Progress();
  void update(uint64_t done);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

 private:
  void draw(uint64_t done);
  std::string label_;
  uint64_t total_;
  bool on_;
  double last_ = 0;
  bool drawn_ = false;
};

}  // namespace cli
