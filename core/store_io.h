// File helpers shared by store snapshots and journals: whole writes, flushes
// that report their errors, atomic replacement of a file, and reading a
// regular file piece by piece so nothing larger than its parts is held.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace mnemo {

// "<what> '<path>': <strerror(errno)>"
std::string sys_error(const std::string& what, const std::string& path);
// Writes every byte (retrying short writes); throws io.
void write_all(int fd, const void* data, uint64_t bytes, const std::string& path);
// The same at `offset` of the file, leaving its position where it was.
void write_all_at(int fd, const void* data, uint64_t bytes, uint64_t offset, const std::string& path);
// The folder holding `path` flushed, so a rename in it is on disk. Best
// effort: some filesystems refuse fsync on folders.
void sync_parent_dir(const std::string& path);
// Replaces `path` by what `write` writes to the descriptor it is given: a
// temporary file beside it, flushed, renamed over it, then the folder
// flushed. A crash leaves the old file or the new; a throw leaves the old
// file and no temporary one.
void replace_file(const std::string& path, const std::function<void(int fd, const std::string& tmp)>& write);
void replace_file(const std::string& path, const std::string& data);
bool file_exists(const std::string& path);

// A file opened for reading that is known to be a regular file. Anything else
// (folder, FIFO, device, socket) is refused with io naming the path and what
// it is, before a byte is read: a FIFO does not block the open, /dev/zero is
// never read.
class InputFile {
 public:
  explicit InputFile(const std::string& path);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;
  uint64_t size() const { return size_; }
  const std::string& path() const { return path_; }
  // Exactly `n` bytes at `offset`; corrupt "<path>: truncated in <what>" when
  // they run past the end (the file's size is checked first, so nothing is
  // read then), io on a read error.
  void read_at(uint64_t offset, void* dst, uint64_t n, const std::string& what) const;

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// Bytes read or written per step when streaming a store file: the bound on
// the memory a load or save needs beyond the store itself.
constexpr uint64_t kIoChunkBytes = 4ull << 20;

}  // namespace mnemo
