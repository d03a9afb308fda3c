//===- CheckpointFolder.cpp - One checkpoint folder for all of a job's ranks //
#include "runtime/trainer/CheckpointFolder.h"

#include "runtime/checkpoint/AtomicFile.h"
#include "runtime/comm/Placement.h"
#include "runtime/trainer/Checkpointing.h"
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace mist::rt {

namespace {

constexpr const char *reachFile = "/.mistrt-reach-check";
constexpr const char *sharedFolderAdvice =
    "every rank reads the checkpoint it resumes from, so --ckpt-dir must be a folder on a "
    "filesystem all the job's hosts mount (docs/launch.md)";

/// "hosta (ranks 0-1): <what>; hostb (rank 2): <what>": the ranks grouped
/// by what they reported, in the order of their first rank.
std::string byVerdict(const std::vector<std::string> &verdicts,
                      const std::vector<std::string> &hostOfRank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;
  for (int r = 0; r < int(verdicts.size()); ++r) {
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto &g) { return g.first == verdicts[size_t(r)]; });
    if (it == groups.end())
      groups.push_back({verdicts[size_t(r)], {r}});
    else
      it->second.push_back(r);
  }
  std::string text;
  for (const auto &[verdict, ranks] : groups)
    text += (text.empty() ? "" : "; ") + describeHosts(hostOfRank, ranks) + ": " + verdict;
  return text;
}

/// Fails the job now, not at its first save, when the checkpoint folder
/// cannot take a file or has less room than one checkpoint needs.
void checkCheckpointFolder(const std::string &dir, int64_t bytes) {
  const std::string probe = dir + "/.mistrt-write-check";
  {
    std::FILE *f = std::fopen(probe.c_str(), "wb");
    const bool wrote = f && std::fputc(0, f) != EOF;
    const int err = errno;
    if (f)
      std::fclose(f);
    if (!wrote)
      abortJob("the checkpoint folder " + dir + " cannot take a file (" + std::strerror(err) +
               "): the run would lose its training at its first save");
    std::remove(probe.c_str());
  }
  std::error_code ec;
  const std::filesystem::space_info room = std::filesystem::space(dir, ec);
  if (!ec && int64_t(room.available) < bytes)
    abortJob("the checkpoint folder " + dir + " has " + std::to_string(room.available >> 20) +
             " MiB free; a checkpoint of this model needs " + std::to_string(bytes >> 20) + " MiB");
}

/// Rank 0's part: the folder exists, takes a checkpoint, holds no partial
/// files of interrupted saves.
void prepareOnRankZero(const std::string &dir, bool resume, int64_t bytes) {
  if (!resume) {
    // A new run never replaces a checkpoint it did not write: the user says
    // --resume to continue it (as Megatron-LM's --load), or names another folder.
    for (const std::string &file :
         {std::string(checkpointModelFile), std::string(checkpointOptimizerFile),
          std::string(checkpointLegacyFile),
          std::string(checkpointModelFile) + checkpointNextSuffix})
      if (std::filesystem::exists(dir + "/" + file))
        abortJob("the checkpoint folder " + dir + " holds a checkpoint (" + file +
                 "): pass --resume to continue it, or another --ckpt-dir; a new run does not "
                 "overwrite it");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
      abortJob("cannot create the checkpoint folder " + dir + ": " + ec.message());
  }
  checkCheckpointFolder(dir, bytes);
  // The partial writes of each file (not model.safetensors.next itself: a
  // resume may need it, and the next save replaces it).
  for (const std::string &file :
       std::vector<std::string>{checkpointLegacyFile, checkpointModelFile, checkpointOptimizerFile,
                                std::string(checkpointModelFile) + checkpointNextSuffix}) {
    std::string why;
    for (const std::string &stale : removeInterruptedWrites(dir + "/" + file, why))
      std::printf("mistrt: removed %s, a save that was interrupted\n", stale.c_str());
    if (!why.empty())
      std::fprintf(stderr, "mistrt: warning: %s\n", why.c_str());
  }
}

/// A text only this job writes: rank 0's host, process and clock.
std::string jobToken() {
  return MpiCommunicator::hostName() + " " + std::to_string(::getpid()) + " " +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

/// What this rank finds in the folder: "" when it reads `token` there.
std::string reachVerdict(const std::string &path, const std::string &token) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return std::string("cannot open ") + path + " (" + std::strerror(errno) + ")";
  std::stringstream read;
  read << in.rdbuf();
  if (read.str() != token)
    return "reads another job's " + path + " (another folder under the same path)";
  return "";
}

} // namespace

void prepareCheckpointFolder(const std::string &dir, bool resume, int64_t checkpointBytes,
                             MpiCommunicator &world, const std::vector<std::string> &hostOfRank) {
  if (dir.empty())
    return;
  const bool root = world.rank() == 0;
  if (root)
    prepareOnRankZero(dir, resume, checkpointBytes);
  // A resume compares the checkpoint the ranks read, and still checks that
  // they see where rank 0 will save: identical node-local copies resume
  // fine and then drift apart with every save.
  if (world.size() == 1)
    return;
  const std::string probe = dir + reachFile;
  std::string token;
  if (root) {
    token = jobToken();
    std::ofstream out(probe, std::ios::binary | std::ios::trunc);
    out << token;
    out.close();
    if (!out)
      abortJob("cannot write " + probe + " in the checkpoint folder");
  }
  token = world.allGatherText(token)[0]; // also: no rank reads before rank 0 wrote
  const std::vector<std::string> verdicts = world.allGatherText(reachVerdict(probe, token));
  if (root)
    std::remove(probe.c_str());
  bool allSee = true;
  for (const std::string &v : verdicts)
    allSee = allSee && v.empty();
  if (allSee)
    return;
  std::vector<std::string> shown;
  for (const std::string &v : verdicts)
    shown.push_back(v.empty() ? "sees it" : v);
  abortJobTogether(world, "not every rank sees the checkpoint folder " + dir +
                              " that rank 0 writes (" + byVerdict(shown, hostOfRank) +
                              "): a folder local to each host? " + sharedFolderAdvice);
}

OpenedCheckpoint openCheckpointOnEveryRank(const std::string &dir, const TrainerSpec &spec,
                                           const StageSpec &stage, MpiCommunicator &world,
                                           const std::vector<std::string> &hostOfRank,
                                           bool weightsOnly) {
  OpenedCheckpoint opened =
      weightsOnly ? openInitialWeights(dir, spec, stage) : openCheckpoint(dir, spec, stage);
  char identity[17];
  std::snprintf(identity, sizeof identity, "%016llx", (unsigned long long)opened.identity);
  const std::string mine = opened.file
                               ? "step " + std::to_string(opened.step) + ", checkpoint " + identity
                               : opened.error;
  const std::vector<std::string> verdicts = world.allGatherText(mine);
  bool same = true;
  for (const std::string &v : verdicts)
    same = same && v == verdicts[0];
  if (same && opened.file)
    return opened;
  if (same) // every rank found the same problem: say it once
    abortJobTogether(world, opened.error);
  abortJobTogether(world, std::string(weightsOnly ? "--init-from" : "--resume") +
                              ": the ranks did not find the same checkpoint in " + dir + " (" +
                              byVerdict(verdicts, hostOfRank) + "); " + sharedFolderAdvice);
}

} // namespace mist::rt
