//===- CheckpointLock.cpp - One job at a time on a checkpoint folder -------===//
#include "runtime/trainer/CheckpointLock.h"

#include "runtime/comm/MpiCommunicator.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

namespace mist::rt {

namespace {

constexpr const char *lockName = "/.mistrt-lock";

/// "host pid start": who holds a lock.
std::string thisJob() {
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  return MpiCommunicator::hostName() + " " + std::to_string(::getpid()) + " " +
         std::to_string(std::chrono::duration_cast<std::chrono::seconds>(now).count());
}

/// Why the lock at `path` (held by `text`, last touched `age` seconds ago)
/// is a dead job's, or "" when its job may be alive.
std::string deadHolder(const std::string &text, long age) {
  std::istringstream in(text);
  std::string host;
  long pid = 0;
  in >> host >> pid;
  if (host == MpiCommunicator::hostName() && pid > 0 && ::kill(pid_t(pid), 0) != 0 &&
      errno == ESRCH)
    return "its process " + std::to_string(pid) + " on this host is gone";
  if (age > CheckpointLock::staleSeconds)
    return "it was last touched " + std::to_string(age / 60) + " minutes ago";
  return "";
}

} // namespace

void CheckpointLock::acquire(const std::string &dir) {
  path = dir + lockName;
  holder = thisJob();
  for (int attempt = 0; attempt < 2; ++attempt) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const bool wrote = ::write(fd, holder.data(), holder.size()) == ssize_t(holder.size());
      ::close(fd);
      if (!wrote)
        abortJob("cannot write the lock " + path + ": " + std::strerror(errno));
      return;
    }
    if (errno != EEXIST)
      abortJob("cannot create the lock " + path + ": " + std::strerror(errno));
    std::ifstream in(path);
    std::stringstream read;
    read << in.rdbuf();
    std::string text = read.str();
    while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
      text.pop_back();
    struct stat st {};
    const long age = ::stat(path.c_str(), &st) == 0 ? long(::time(nullptr) - st.st_mtime) : 0;
    const std::string dead = deadHolder(text, age);
    if (dead.empty())
      abortJob("another job is using the checkpoint folder " + dir + " (" + path + ": " + text +
               ", touched " + std::to_string(age) +
               " s ago): two jobs would overwrite each other's checkpoints; if that job is "
               "dead, remove the lock");
    std::printf("mistrt: taking over the lock of a job that ended without releasing it "
                "(%s: %s; %s)\n",
                path.c_str(), text.c_str(), dead.c_str());
    std::remove(path.c_str());
  }
  abortJob("cannot take the lock " + path + ": another job took it at the same time");
}

void CheckpointLock::touch() {
  if (!path.empty())
    ::utime(path.c_str(), nullptr);
}

void CheckpointLock::release() {
  if (path.empty())
    return;
  // Only this job's own lock (a successor may have taken over a stale one).
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  if (text.str() == holder)
    std::remove(path.c_str());
  path.clear();
}

} // namespace mist::rt
