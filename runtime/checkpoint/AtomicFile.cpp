//===- AtomicFile.cpp - Replace a file all at once or not at all ----------===//
#include "runtime/checkpoint/AtomicFile.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <unistd.h>

namespace mist::rt {

namespace {

std::string systemError() { return std::strerror(errno); }

std::string directoryOf(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

std::optional<AtomicFileWriter> AtomicFileWriter::create(const std::string &path,
                                                         std::string &error) {
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot create " + temp + " (to replace " + path + "): " + systemError();
    return std::nullopt;
  }
  return AtomicFileWriter(path, std::move(temp), fd);
}

AtomicFileWriter::AtomicFileWriter(AtomicFileWriter &&other) noexcept { *this = std::move(other); }

AtomicFileWriter &AtomicFileWriter::operator=(AtomicFileWriter &&other) noexcept {
  if (this != &other) {
    discard();
    targetPath = std::move(other.targetPath);
    tempPath = std::move(other.tempPath);
    fd = std::exchange(other.fd, -1);
    other.tempPath.clear();
  }
  return *this;
}

AtomicFileWriter::~AtomicFileWriter() { discard(); }

void AtomicFileWriter::discard() {
  if (fd >= 0)
    ::close(fd);
  fd = -1;
  if (!tempPath.empty())
    ::unlink(tempPath.c_str());
  tempPath.clear();
}

std::optional<std::string> AtomicFileWriter::write(const void *data, size_t n) {
  if (fd < 0)
    return "cannot write " + targetPath + ": the file is already committed or discarded";
  const char *bytes = static_cast<const char *>(data);
  while (n > 0) {
    ssize_t put = ::write(fd, bytes, n);
    if (put < 0 && errno == EINTR)
      continue;
    if (put < 0)
      return "cannot write " + tempPath + " (to replace " + targetPath + "): " + systemError();
    bytes += put, n -= size_t(put);
  }
  return std::nullopt;
}

std::optional<std::string> AtomicFileWriter::commit() {
  if (fd < 0)
    return "cannot commit " + targetPath + ": the file is already committed or discarded";
  // The data must be on disk before the rename publishes it, or a crash
  // could leave the new name pointing at an empty or partial file.
  if (::fsync(fd) != 0) {
    std::string why = "cannot flush " + tempPath + " to disk: " + systemError();
    discard();
    return why;
  }
  int closed = ::close(fd);
  fd = -1;
  if (closed != 0) {
    std::string why = "cannot close " + tempPath + ": " + systemError();
    discard();
    return why;
  }
  if (::rename(tempPath.c_str(), targetPath.c_str()) != 0) {
    std::string why = "cannot rename " + tempPath + " to " + targetPath + ": " + systemError();
    discard();
    return why;
  }
  tempPath.clear();
  // Make the rename durable. File systems that cannot sync a directory say
  // EINVAL; the rename has happened either way.
  const std::string directory = directoryOf(targetPath);
  int dirFd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    return targetPath +
           " was written, but its directory cannot be opened to sync it: " + systemError();
  int synced = ::fsync(dirFd);
  int syncErrno = errno;
  ::close(dirFd);
  if (synced != 0 && syncErrno != EINVAL)
    return targetPath +
           " was written, but syncing its directory failed: " + std::strerror(syncErrno);
  return std::nullopt;
}

std::vector<std::string> removeInterruptedWrites(const std::string &path, std::string &error) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  const std::string folder = directoryOf(path);
  const std::string prefix =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1) +
      ".tmp.";
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string pid = name.size() > prefix.size() && name.rfind(prefix, 0) == 0
                                ? name.substr(prefix.size())
                                : std::string();
    if (pid.empty() ||
        !std::all_of(pid.begin(), pid.end(), [](unsigned char c) { return std::isdigit(c); }))
      continue;
    std::error_code removeError;
    if (fs::remove(it->path(), removeError))
      removed.push_back(it->path().string());
    else if (removeError && error.empty())
      error = "cannot remove " + it->path().string() + ": " + removeError.message();
  }
  if (ec && error.empty())
    error = "cannot list " + folder + ": " + ec.message();
  return removed;
}

} // namespace mist::rt
