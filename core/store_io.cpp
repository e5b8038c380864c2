#include "store_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
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

void write_all_at(int fd, const void* data, uint64_t bytes, uint64_t offset, const std::string& path) {
  const char* p = static_cast<const char*>(data);
  uint64_t off = 0;
  while (off < bytes) {
    const ssize_t w = ::pwrite(fd, p + off, bytes - off, static_cast<off_t>(offset + off));
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

void replace_file(const std::string& path, const std::function<void(int fd, const std::string& tmp)>& write) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(Code::io, sys_error("cannot create", tmp));
  try {
    write(fd, tmp);
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

void replace_file(const std::string& path, const std::string& data) {
  replace_file(path, [&](int fd, const std::string& tmp) { write_all(fd, data.data(), data.size(), tmp); });
}

namespace {
const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}
}  // namespace

InputFile::InputFile(const std::string& path) : path_(path) {
  // O_NONBLOCK: opening a FIFO for reading must not wait for a writer.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) fail(Code::io, sys_error("cannot open", path));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const std::string msg = sys_error("cannot stat", path);
    ::close(fd_);
    fail(Code::io, msg);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    fail(Code::io, "cannot read '" + path + "': it is " + file_kind(st.st_mode) + ", not a regular file");
  }
  size_ = static_cast<uint64_t>(st.st_size);
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void InputFile::read_at(uint64_t offset, void* dst, uint64_t n, const std::string& what) const {
  if (offset > size_ || n > size_ - offset) fail(Code::corrupt, path_ + ": truncated in " + what);
  auto* p = static_cast<char*>(dst);
  uint64_t done = 0;
  while (done < n) {
    const ssize_t r = ::pread(fd_, p + done, std::min<uint64_t>(n - done, 1u << 30), static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) fail(Code::io, sys_error("cannot read", path_));
    // The file shrank after it was measured.
    if (r == 0) fail(Code::corrupt, path_ + ": truncated in " + what);
    done += static_cast<uint64_t>(r);
  }
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace mnemo
