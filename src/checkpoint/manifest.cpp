#include "checkpoint/manifest.h"

#include <filesystem>
#include <sstream>

#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/sha256.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

constexpr const char* kHeader = "nmt checkpoint manifest 1";

bool is_hex64(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

bool plain_name(const std::string& s) {
  return !s.empty() && s != "." && s != ".." && s.find('/') == std::string::npos &&
         s.find('\0') == std::string::npos && s != kManifestFile;
}

}  // namespace

std::string format_manifest(const std::vector<ManifestEntry>& entries) {
  std::string out = std::string(kHeader) + "\n";
  for (const auto& e : entries) out += e.sha256 + " " + std::to_string(e.size) + " " + e.file + "\n";
  return out;
}

std::vector<ManifestEntry> parse_manifest(const std::string& text, const std::string& source) {
  std::vector<ManifestEntry> entries;
  std::istringstream in(text);
  std::string line;
  int n = 0;
  const auto fail = [&](const std::string& problem) {
    throw InputError(source + ":" + std::to_string(n) + ": " + problem);
  };
  while (std::getline(in, line)) {
    ++n;
    if (n == 1) {
      if (line != kHeader) fail("not an nmt checkpoint manifest (expected '" + std::string(kHeader) + "')");
      continue;
    }
    if (line.empty()) continue;
    const size_t a = line.find(' '), b = a == std::string::npos ? a : line.find(' ', a + 1);
    if (b == std::string::npos) fail("expected 'SHA256 SIZE FILE'");
    ManifestEntry e;
    e.sha256 = line.substr(0, a);
    const std::string size = line.substr(a + 1, b - a - 1);
    e.file = line.substr(b + 1);
    if (!is_hex64(e.sha256)) fail("'" + e.sha256.substr(0, 80) + "' is not a SHA-256 in hex");
    if (size.empty() || size.size() > 19 || size.find_first_not_of("0123456789") != std::string::npos)
      fail("'" + size.substr(0, 40) + "' is not a file size");
    e.size = std::stoull(size);
    if (!plain_name(e.file)) fail("'" + e.file.substr(0, 80) + "' is not a file name of the folder");
    for (const auto& prev : entries)
      if (prev.file == e.file) fail(e.file + " is listed twice");
    entries.push_back(std::move(e));
  }
  if (n == 0) throw InputError(source + ": empty manifest");
  return entries;
}

void write_manifest(const std::string& dir, const std::vector<std::string>& files) {
  std::vector<ManifestEntry> entries;
  for (const auto& f : files) {
    const std::string path = (fs::path(dir) / f).string();
    entries.push_back({f, static_cast<uint64_t>(fs::file_size(path)), sha256_file(path)});
  }
  write_file_atomic((fs::path(dir) / kManifestFile).string(), format_manifest(entries));
}

void check_manifest_entry(const ManifestEntry& e, const std::string& path, const std::string* content) {
  if (!content) throw InputError(path + ": listed in the manifest but missing");
  if (content->size() != e.size)
    throw InputError(path + ": " + std::to_string(content->size()) + " bytes, the manifest says " +
                     std::to_string(e.size) + " (truncated or replaced)");
  Sha256 sha;
  sha.update(*content);
  if (sha.hex() != e.sha256)
    throw InputError(path + ": content differs from the manifest's checksum (edited or corrupted)");
}

void verify_manifest(const std::string& dir) {
  const std::string mpath = (fs::path(dir) / kManifestFile).string();
  if (!fs::is_regular_file(mpath)) throw InputError(mpath + ": missing: not a complete checkpoint");
  for (const auto& e : parse_manifest(read_file(mpath, "manifest"), mpath)) {
    const std::string path = (fs::path(dir) / e.file).string();
    const std::string content = fs::is_regular_file(path) ? read_file(path, "checkpoint file") : std::string();
    check_manifest_entry(e, path, fs::is_regular_file(path) ? &content : nullptr);
  }
}

bool checkpoint_complete(const std::string& dir) {
  try {
    verify_manifest(dir);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool is_checkpoint_file_name(const std::string& name) {
  for (const char* ours : {kManifestFile, "model.pt", "model.safetensors", "optimizer.pt", "state.yaml", "config.yaml",
                           "src.model", "tgt.model"})
    if (name == ours) return true;
  return false;
}

}  // namespace nmt
