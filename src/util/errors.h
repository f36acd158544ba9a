// Error kinds that map to the process exit code.
#pragma once

#include "nmt/errors.h"

namespace nmt {

// InputError (exit code 2) and IoError (exit code 1): include/nmt/errors.h,
// where a program embedding the library finds them.
constexpr int kExitOk = 0;
constexpr int kExitRuntime = 1;
constexpr int kExitInput = 2;
// nmt check-po: the catalog has placeholder faults (not a failure of nmt's).
constexpr int kExitFaultsFound = 3;

}  // namespace nmt
