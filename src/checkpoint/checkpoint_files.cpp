#include "checkpoint/checkpoint_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <thread>

#include "checkpoint/manifest.h"
#include "checkpoint/run_lock.h"
#include "util/errors.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

// How often a read starts over because saves keep swapping the folder under
// it. A save takes far longer than a read's retry, so a few suffice; the
// bound only keeps a pathological loop from spinning for ever.
constexpr int kAttempts = 20;

bool looks_like_checkpoint(const fs::path& d) {
  std::error_code ec;
  return fs::is_regular_file(d / kManifestFile, ec) || fs::is_regular_file(d / "model.pt", ec);
}

bool has_manifest(const fs::path& d) {
  std::error_code ec;
  return fs::is_regular_file(d / kManifestFile, ec);
}

// Where the checkpoint `d` lies while a save has it out of place: a save
// writes DIR.tmp whole, manifest last, then swaps it in; without an atomic
// exchange DIR is briefly DIR.old. The newer one first, as recovery does.
std::optional<fs::path> displaced(const fs::path& d) {
  if (fs::exists(d)) return std::nullopt;
  for (const char* suffix : {".tmp", ".old"}) {
    const fs::path p = d.string() + suffix;
    if (has_manifest(p)) return p;
  }
  return std::nullopt;
}

// Why the last look found leftovers, said only when no trainer is saving:
// then they come from a save cut short, and the next resume tidies them.
std::string leftovers_note(const fs::path& run, const std::vector<fs::path>& checkpoints, const fs::path& used,
                           const fs::path& wanted) {
  std::vector<std::string> left;
  for (const fs::path& c : checkpoints)
    for (const char* suffix : {".tmp", ".old"})
      if (fs::exists(c.string() + suffix) && fs::path(c.string() + suffix) != used) left.push_back(c.string() + suffix);
  if (left.empty() && used == wanted) return "";
  if (!run_lock_holder(run.string()).empty()) return "";  // a save in progress, not a leftover
  std::string note;
  if (used != wanted) note = wanted.string() + " is missing after an interrupted save; reading " + used.string() + " as it is";
  for (const auto& l : left) note += (note.empty() ? "" : "; ") + l + " was left by an interrupted save";
  return note + " (`nmt train --resume " + run.string() + "` will tidy it)";
}

struct FolderId {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const FolderId& o) const { return dev == o.dev && ino == o.ino; }
};

std::optional<FolderId> folder_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FolderId{st.st_dev, st.st_ino};
}

// A file of the folder open as `dfd`; nullopt when it does not exist.
std::optional<std::string> read_at(int dfd, const std::string& name, const std::string& path) {
  const int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ENOENT) return std::nullopt;
    throw InputError(path + ": cannot open: " + std::strerror(errno));
  }
  std::string content;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && st.st_size > 0) content.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      throw InputError(path + ": cannot read: " + std::strerror(err));
    }
    content.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return content;
}

// The folder changed under a read (a save swapped it): start over.
struct FolderChanged {};

CheckpointFiles read_once(const std::string& dir, const std::vector<std::string>& names,
                          const std::vector<std::string>& optional) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) throw FolderChanged{};  // located a moment ago: a swap moved it
  struct stat st {};
  ::fstat(dfd, &st);
  const FolderId opened{st.st_dev, st.st_ino};
  CheckpointFiles files;
  files.dir = dir;
  try {
    const std::string mpath = files.path(kManifestFile);
    const auto manifest = read_at(dfd, kManifestFile, mpath);
    if (!manifest) throw InputError(mpath + ": missing: not a complete checkpoint");
    const std::vector<ManifestEntry> entries = parse_manifest(*manifest, mpath);
    std::vector<std::string> wanted = names;
    for (const std::string& name : optional)
      if (std::any_of(entries.begin(), entries.end(), [&](const ManifestEntry& e) { return e.file == name; }))
        wanted.push_back(name);
    for (const std::string& name : wanted) {
      const ManifestEntry* entry = nullptr;
      for (const auto& e : entries)
        if (e.file == name) entry = &e;
      if (!entry) throw InputError(files.path(name) + ": missing from checkpoint (not in its manifest)");
      const auto content = read_at(dfd, name, files.path(name));
      check_manifest_entry(*entry, files.path(name), content ? &*content : nullptr);
      files.bytes[name] = std::move(*content);
    }
    files.bytes[kManifestFile] = *manifest;
  } catch (const InputError&) {
    ::close(dfd);
    // Files of a complete checkpoint are never changed in place; what fails
    // to read in a folder that is no longer at `dir` was deleted by a save.
    const auto now = folder_id(dir);
    if (!now || !(*now == opened)) throw FolderChanged{};
    throw;
  }
  ::close(dfd);
  return files;
}

}  // namespace

const std::string& CheckpointFiles::at(const std::string& name) const {
  const auto it = bytes.find(name);
  if (it == bytes.end()) throw InputError(path(name) + ": missing from checkpoint");
  return it->second;
}

std::string locate_checkpoint(const std::string& dir, CheckpointUse use, std::string* note) {
  const fs::path d(dir);
  std::vector<fs::path> checkpoints;
  fs::path run = d;
  if (looks_like_checkpoint(d) || (!fs::exists(d) && displaced(d))) {
    run = d.parent_path().empty() ? fs::path(".") : d.parent_path();
    checkpoints = {d};
  } else {
    for (const char* sub : use == CheckpointUse::kUse ? std::vector<const char*>{"best", "last"}
                                                      : std::vector<const char*>{"last", "best"})
      checkpoints.push_back(d / sub);
  }
  for (const fs::path& c : checkpoints) {
    fs::path found;
    if (checkpoints.size() == 1 ? fs::exists(c) : has_manifest(c)) found = c;
    else if (const auto moved = displaced(c)) found = *moved;
    else continue;
    if (note) *note = leftovers_note(run, checkpoints, found, c);
    return found.string();
  }
  return "";
}

CheckpointFiles read_checkpoint(const std::string& dir, CheckpointUse use, const std::vector<std::string>& names,
                                const std::vector<std::string>& optional) {
  for (int attempt = 1;; ++attempt) {
    std::string note;
    const std::string found = locate_checkpoint(dir, use, &note);
    if (found.empty()) {
      if (!fs::is_directory(dir)) throw InputError(dir + ": no such checkpoint folder");
      throw InputError(dir + ": not a checkpoint (no manifest.txt, best/ or last/)");
    }
    try {
      CheckpointFiles files = read_once(found, names, optional);
      files.note = note;
      return files;
    } catch (const FolderChanged&) {
      if (attempt == kAttempts)
        throw InputError(found + ": changed " + std::to_string(kAttempts) +
                         " times while being read (a trainer saving into it without pause?)");
      std::this_thread::sleep_for(std::chrono::milliseconds(5 * attempt));
    }
  }
}

std::vector<std::string> checkpoints_in(const std::string& run_dir) {
  std::vector<std::string> found;
  for (const char* sub : {"last", "best"}) {
    const fs::path c = fs::path(run_dir) / sub;
    if (fs::exists(c) || displaced(c)) found.emplace_back(sub);
  }
  for (std::string& kept : kept_checkpoints_in(run_dir)) found.push_back(std::move(kept));
  return found;
}

std::string kept_checkpoint_name(int64_t step) { return "step-" + std::to_string(step); }

int64_t kept_checkpoint_step(const std::string& name) {
  constexpr size_t kPrefix = 5;  // "step-"
  if (name.size() <= kPrefix || name.size() > kPrefix + 18 || name.compare(0, kPrefix, "step-") != 0) return -1;
  int64_t step = 0;
  for (size_t i = kPrefix; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return kept_checkpoint_name(step) == name ? step : -1;  // no leading zeros: one name per step
}

std::vector<std::string> kept_checkpoints_in(const std::string& run_dir) {
  std::vector<std::pair<int64_t, std::string>> kept;
  std::error_code ec;
  for (fs::directory_iterator it(run_dir, ec), end; !ec && it != end; it.increment(ec)) {
    std::string name = it->path().filename().string();
    // A save cut short counts under the name it was saving.
    for (const char* suffix : {".tmp", ".old"}) {
      const std::string sfx(suffix);
      if (name.size() > sfx.size() && name.compare(name.size() - sfx.size(), sfx.size(), sfx) == 0)
        name.resize(name.size() - sfx.size());
    }
    const int64_t step = kept_checkpoint_step(name);
    if (step < 0) continue;
    const fs::path c = fs::path(run_dir) / name;
    std::error_code dir_ec;
    if ((fs::is_directory(c, dir_ec) || displaced(c)) &&
        std::none_of(kept.begin(), kept.end(), [&](const auto& k) { return k.first == step; }))
      kept.emplace_back(step, name);
  }
  std::sort(kept.begin(), kept.end());
  std::vector<std::string> names;
  for (auto& k : kept) names.push_back(std::move(k.second));
  return names;
}

std::string run_folder_of(const std::string& dir) {
  if (!checkpoints_in(dir).empty()) return dir;
  const fs::path p = fs::path(dir).lexically_normal();
  const fs::path name = p.has_filename() ? p.filename() : p.parent_path().filename();
  const fs::path parent = p.has_filename() ? p.parent_path() : p.parent_path().parent_path();
  if ((name == "last" || name == "best" || kept_checkpoint_step(name.string()) >= 0) &&
      !checkpoints_in(parent.string()).empty())
    return parent.string();
  return "";
}

bool same_folder(const std::string& a, const std::string& b) {
  std::error_code ea, eb;
  const fs::path ca = fs::weakly_canonical(a, ea), cb = fs::weakly_canonical(b, eb);
  return !ea && !eb ? ca == cb : fs::path(a).lexically_normal() == fs::path(b).lexically_normal();
}

}  // namespace nmt
