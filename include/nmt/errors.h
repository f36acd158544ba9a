// What nmt throws. Every error is one line naming the file, key, line or
// field that is wrong; the command-line program turns InputError into exit
// code 2 and IoError into exit code 1, Python into ValueError and OSError.
// Cancelled ends a call its caller stopped (TranslationOptions::cancel).
#pragma once

#include <stdexcept>
#include <string>

#include "nmt/export.h"

namespace nmt {

// Bad input: a missing or damaged checkpoint, a choice this machine cannot
// run (cuda without a GPU), an option out of range, a file that is not
// UTF-8 text. Catch it to report the message; nothing is left half-done.
class NMT_API InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A file could not be written or read for a reason outside the input's
// content (disk full, read-only folder, permission).
class NMT_API IoError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A call stopped at its caller's request before it finished; it returns
// nothing and writes no file.
class NMT_API Cancelled : public std::runtime_error {
 public:
  Cancelled() : std::runtime_error("cancelled") {}
};

}  // namespace nmt
