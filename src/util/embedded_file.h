// A file compiled into the binary (cmake/embed_files.cmake): the explorer
// page's files (serve/web_assets.h), the helper an export ships
// (export/export_assets.h).
#pragma once

#include <cstddef>
#include <string>

namespace nmt {

struct EmbeddedFile {
  std::string path;          // "/" + its name ("/" for index.html)
  std::string content_type;
  const unsigned char* data;
  size_t size;

  std::string text() const { return {reinterpret_cast<const char*>(data), size}; }
};

}  // namespace nmt
