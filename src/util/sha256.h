// SHA-256 (FIPS 180-4), for the checksums in checkpoint manifests. Plain C++17.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace nmt {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // finishes: the 64 lowercase hex digits

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t used_ = 0;
  uint64_t length_ = 0;
};

// Of a file's content; IoError naming the file when it cannot be read.
std::string sha256_file(const std::string& path);

}  // namespace nmt
