// Buffered reading of a whole file with its size known up front, errors
// naming the file, and load progress on a terminal.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "progress.h"

namespace cli {

class FileReader {
 public:
  explicit FileReader(const std::string& path);
  ~FileReader();
  FileReader(const FileReader&) = delete;
  FileReader& operator=(const FileReader&) = delete;
  uint64_t size() const { return size_; }
  uint64_t pos() const { return pos_; }
  // Exactly n bytes or Error ("truncated ... while reading <what>").
  void read(void* dst, uint64_t n, const char* what);
  [[noreturn]] void bad(const std::string& why) const;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  uint64_t size_ = 0, pos_ = 0;  // before f_: its opening sets size_
  std::FILE* f_ = nullptr;
  Progress progress_;
};

// a * b (* c) or Error "<what> overflows" naming the file.
uint64_t mul_or_fail(const FileReader& r, uint64_t a, uint64_t b, const char* what);

}  // namespace cli
