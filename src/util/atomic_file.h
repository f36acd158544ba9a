// Every file the program writes goes through here: the content is written to
// a temporary file in the same folder, flushed and fsync'd, renamed over the
// target, and the folder fsync'd. After a crash at any instant the target
// holds either its old content or the new one, never a mix; every write is
// checked, and a failure (disk full, read-only folder, no permission) is an
// IoError naming the path, with the previous file untouched and no
// temporary left behind. A symbolic link is followed (the file it names is
// replaced); a target that exists and is not a regular file (/dev/null, a
// FIFO) is written in place, as a stream.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <system_error>

namespace nmt {

// The reading side: the whole file as bytes, or an InputError
// "PATH: cannot open WHAT: reason" (or "cannot read").
std::string read_file(const std::string& path, const std::string& what = "file");

void write_file_atomic(const std::string& path, std::string_view content);

// For writers that want a path of their own (torch::save): write
// temp_path(), then commit(). Destroyed without commit(), it removes the
// temporary and leaves the target as it was.
class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& temp_path() const { return temp_; }
  const std::string& path() const { return path_; }  // the target, links followed
  void commit();

 private:
  std::string path_;
  bool stream_;  // path_ is a device or pipe: written directly, never renamed over
  std::string temp_;
  bool committed_ = false;
};

// The one file nmt appends to instead of replacing: a log that grows by a
// line at a time (metrics.jsonl), which rewriting whole at every line would
// make quadratic in its length. append() writes whole lines at the end with
// one write(2) each, checked (an IoError naming the path, as above); sync()
// makes what was appended durable (fdatasync; nothing for a device or pipe).
// A crash can lose what was appended after the last sync() and leave its
// last line torn: the owner repairs the file when it opens it again (the
// training Reporter syncs before each checkpoint is saved and, on a resume,
// keeps the lines up to the checkpoint's step, a torn line dropped).
class AppendFile {
 public:
  explicit AppendFile(std::string path);  // opened for appending; created if missing
  ~AppendFile();
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;

  void append(std::string_view lines);
  void sync();

 private:
  std::string path_;
  int fd_ = -1;
};

// fsync of a folder: makes the renames done in it durable.
void sync_directory(const std::string& dir);

// Deletes a file or a folder tree (links are removed, not followed); a
// missing path is no error. std::filesystem::remove_all with POSIX calls:
// built against PyPI's LibTorch, the loader binds remove_all to the copy
// libtorch.so exports, which crashes on a non-empty folder. ec: the first
// error, or cleared.
void remove_tree(const std::string& path, std::error_code& ec);

// The one rule for every folder nmt deletes or replaces: only what nmt wrote
// goes. `ours(name)` says whether an entry name is one nmt writes into that
// kind of folder; the temporaries of write_file_atomic/AtomicFile
// ("NAME.tmp.PID.N") count as NAME. Returns the path of the first entry (by
// name) that `ours` does not accept, or "" when there is none (an empty or
// missing folder). Links and sub-folders are judged by their names too.
using OwnedNames = std::function<bool(const std::string& name)>;
std::string first_foreign_entry(const std::string& dir, const OwnedNames& ours);

// remove_tree for a folder nmt wrote: InputError "DIR/NAME: not written by
// nmt (WHAT); DIR left as it is" when first_foreign_entry finds something,
// before anything is deleted. `what` names the kind of folder ("a
// checkpoint"). A missing folder is no error.
void remove_owned_tree(const std::string& dir, const OwnedNames& ours, const std::string& what);

// Puts the complete folder `staged` in place of `dir` (which may not exist):
// an atomic exchange where the file system allows it (renameat2
// RENAME_EXCHANGE), so that `dir` names a complete folder at every instant;
// elsewhere dir -> dir.old, staged -> dir, and recover_directory() repairs
// a crash between the two. The old content is deleted after.
void replace_directory(const std::string& staged, const std::string& dir);

// Repairs what an interrupted replace_directory() left behind: when `dir` is
// missing but `dir.old` or `staged` holds a folder that is_complete() accepts,
// it is renamed back to `dir`; leftovers that hold only names `ours` accepts
// are deleted, others are left and said. Returns a line saying what it did,
// or "" when there was nothing to do.
std::string recover_directory(const std::string& dir, const std::string& staged,
                              bool (*is_complete)(const std::string& folder), const OwnedNames& ours);

}  // namespace nmt
