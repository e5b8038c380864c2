#include "store_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "error.h"

namespace mnemo {

std::string sys_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

void write_all(int fd, const void* data, uint64_t bytes, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  uint64_t off = 0;
  while (off < bytes) {
    const ssize_t w = ::write(fd, p + off, bytes - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail(Code::io, sys_error("cannot write", path));
    off += static_cast<uint64_t>(w);
  }
}

void sync_parent_dir(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void replace_file(const std::string& path, const std::string& data) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(Code::io, sys_error("cannot create", tmp));
  try {
    write_all(fd, data.data(), data.size(), tmp);
    if (::fsync(fd) != 0) fail(Code::io, sys_error("cannot flush", tmp));
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string msg = sys_error("cannot rename into", path);
    ::unlink(tmp.c_str());
    fail(Code::io, msg);
  }
  sync_parent_dir(path);
}

std::string read_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(Code::io, sys_error("cannot open", path));
  std::string buf;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) buf.reserve(static_cast<size_t>(st.st_size));
  char chunk[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, chunk, sizeof chunk);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      const std::string msg = sys_error("cannot read", path);
      ::close(fd);
      fail(Code::io, msg);
    }
    if (r == 0) break;
    buf.append(chunk, static_cast<size_t>(r));
  }
  ::close(fd);
  return buf;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace mnemo
