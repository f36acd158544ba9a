// The explorer page's files (src/serve/web/), built into the binary so the
// service needs nothing beside it and nothing from the network.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace nmt::serve {

struct WebAsset {
  std::string path;          // "/", "/explorer.js", ...
  std::string content_type;
  const unsigned char* data;
  size_t size;
};

// Generated at build time by cmake/embed_files.cmake.
const std::vector<WebAsset>& web_assets();

}  // namespace nmt::serve
