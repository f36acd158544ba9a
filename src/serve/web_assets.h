// The explorer page's files (src/serve/web/), built into the binary so the
// service needs nothing beside it and nothing from the network.
#pragma once

#include <vector>

#include "util/embedded_file.h"

namespace nmt::serve {

using WebAsset = EmbeddedFile;

// Generated at build time by cmake/embed_files.cmake.
const std::vector<WebAsset>& web_assets();

}  // namespace nmt::serve
