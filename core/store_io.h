// File helpers shared by store snapshots and journals: whole writes, flushes
// that report their errors, and atomic replacement of a file.
#pragma once

#include <cstdint>
#include <string>

namespace mnemo {

// "<what> '<path>': <strerror(errno)>"
std::string sys_error(const std::string& what, const std::string& path);
// Writes every byte (retrying short writes); throws io.
void write_all(int fd, const void* data, uint64_t bytes, const std::string& path);
// The folder holding `path` flushed, so a rename in it is on disk. Best
// effort: some filesystems refuse fsync on folders.
void sync_parent_dir(const std::string& path);
// Replaces `path` by `data`: a temporary file beside it, flushed, renamed
// over it, then the folder flushed. A crash leaves the old file or the new.
void replace_file(const std::string& path, const std::string& data);
// The whole file; throws io when it cannot be opened or read.
std::string read_file(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace mnemo
