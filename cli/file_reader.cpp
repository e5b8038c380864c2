#include "file_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common.h"

namespace cli {

namespace {
// Opened without blocking (a FIFO would wait for a writer) and checked on the
// descriptor itself, so what is read is what was checked.
std::FILE* open_regular(const std::string& path, uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error("cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error("'" + path + "' is not a regular file");
  }
  size = static_cast<uint64_t>(st.st_size);
  std::FILE* f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    throw Error("cannot open '" + path + "': " + std::strerror(errno));
  }
  return f;
}
}  // namespace

FileReader::FileReader(const std::string& path)
    : path_(path), f_(open_regular(path, size_)), progress_("load", size_) {}

FileReader::~FileReader() {
  if (f_) std::fclose(f_);
}

void FileReader::read(void* dst, uint64_t n, const char* what) {
  if (n > size_ - pos_)
    bad("truncated: " + std::to_string(n) + " bytes of " + what + " needed at byte " + std::to_string(pos_) +
        " but the file has " + std::to_string(size_) + " bytes");
  char* d = static_cast<char*>(dst);
  uint64_t left = n;
  while (left > 0) {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(left, 1 << 24));
    if (std::fread(d, 1, chunk, f_) != chunk) bad(std::string("read error in ") + what + ": " + std::strerror(errno));
    d += chunk;
    left -= chunk;
    pos_ += chunk;
    progress_.update(pos_);
  }
}

void FileReader::bad(const std::string& why) const { throw Error(path_ + ": " + why); }

uint64_t mul_or_fail(const FileReader& r, uint64_t a, uint64_t b, const char* what) {
  if (a != 0 && b > UINT64_MAX / a) r.bad(std::string(what) + " overflows 64 bits");
  return a * b;
}

}  // namespace cli
