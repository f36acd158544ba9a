// Reading a checkpoint without writing anything: which folder a command
// means (the rules live here and nowhere else), and its files read whole,
// verified against the manifest.
//
// Readers (`translate`, `evaluate`, `check-causality`, and the trainer when
// it reads the checkpoint it resumes from) may run while a trainer saves into
// the same run folder. They never rename, delete or create anything there:
// a save cut short is read where it lies and tidied by the next
// `nmt train --resume` (which holds the run's lock, run_lock.h).
// Plain C++17 (no LibTorch).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace nmt {

// Which checkpoint of a run folder a command means.
enum class CheckpointUse {
  kUse,     // translate, evaluate, check: RUN/best, else RUN/last
  kResume,  // train --resume: RUN/last, else RUN/best
};

struct CheckpointFiles {
  std::string dir;   // the folder read
  std::string note;  // a line worth logging about what was found, or ""
  std::map<std::string, std::string> bytes;  // file name -> content, as the manifest lists them

  // The content of `name`; InputError "DIR/NAME: missing from checkpoint".
  const std::string& at(const std::string& name) const;
  std::string path(const std::string& name) const { return dir + "/" + name; }
};

// `dir` is a checkpoint folder, or a run folder holding best/ and last/.
// Reads manifest.txt and the files in `names` (each must be listed there),
// all through one open handle on the folder, and checks their sizes and
// SHA-256 sums. A save that swaps the folder meanwhile (the old files are
// deleted after the swap) makes the read start over on the new folder, so
// the result is always one save's files, never a mix of two. InputError
// naming the file when the checkpoint is missing, incomplete or corrupt.
// `optional` names files read (and verified) when the manifest lists them:
// a checkpoint saved before they existed reads without them.
CheckpointFiles read_checkpoint(const std::string& dir, CheckpointUse use, const std::vector<std::string>& names,
                                const std::vector<std::string>& optional = {});

// The checkpoint folder `dir` means for `use`, without reading it; "" when
// there is none. A folder missing after an interrupted save resolves to its
// complete DIR.tmp or DIR.old; `note` (if given) says so.
std::string locate_checkpoint(const std::string& dir, CheckpointUse use, std::string* note = nullptr);

// The names of the checkpoints a run folder holds (last, best, then the
// kept saves step-N oldest first), counting a save cut short that
// `nmt train --resume` would recover.
std::vector<std::string> checkpoints_in(const std::string& run_dir);

// The saves train.keep_last keeps beside last/ and best/: RUN/step-N, N the
// step it was saved at.
std::string kept_checkpoint_name(int64_t step);
// N when `name` is such a folder's name ("step-" and N in decimal, as
// kept_checkpoint_name writes it), else -1.
int64_t kept_checkpoint_step(const std::string& name);
// The kept saves of a run folder, as names, oldest (lowest step) first,
// counting a save cut short as checkpoints_in does.
std::vector<std::string> kept_checkpoints_in(const std::string& run_dir);

// The run folder `dir` belongs to: `dir` itself when it holds checkpoints
// (last/, best/, step-N/), its parent when it is one of them; "" for a
// checkpoint folder on its own.
std::string run_folder_of(const std::string& dir);

// Whether two paths name the same folder (either may not exist yet).
bool same_folder(const std::string& a, const std::string& b);

}  // namespace nmt
