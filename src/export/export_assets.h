// The files an export ships beside a model, compiled into the binary
// (cmake/embed_files.cmake from src/export/): placeholders.py, the
// placeholder mask and restore step for a protected model.
#pragma once

#include <vector>

#include "util/embedded_file.h"

namespace nmt {

// Generated at build time; each named "/" + its file name.
const std::vector<EmbeddedFile>& export_assets();

}  // namespace nmt
