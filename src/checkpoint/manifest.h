// A checkpoint's manifest (manifest.txt, written last): every other file of
// the folder with its size and SHA-256. Loading verifies it, so a truncated
// or edited file is reported by name instead of crashing the loader; a
// folder without a valid manifest is not a complete checkpoint.
// Plain C++17 (no LibTorch): the parser is fuzzed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nmt {

struct ManifestEntry {
  std::string file;  // a plain file name in the checkpoint folder
  uint64_t size = 0;
  std::string sha256;  // 64 lowercase hex digits
};

constexpr const char* kManifestFile = "manifest.txt";

// "nmt checkpoint manifest 1" then one "SHA256 SIZE FILE" line per file.
std::string format_manifest(const std::vector<ManifestEntry>& entries);
// InputError "SOURCE:LINE: problem" on anything malformed.
std::vector<ManifestEntry> parse_manifest(const std::string& text, const std::string& source);

// Hashes `files` (names inside dir) and writes dir/manifest.txt atomically.
void write_manifest(const std::string& dir, const std::vector<std::string>& files);
// InputError "PATH: ..." when `content` (null: the file is missing) is not
// the file `entry` describes: the one wording of every manifest mismatch.
void check_manifest_entry(const ManifestEntry& entry, const std::string& path, const std::string* content);
// InputError naming the first file that is missing, of another size or
// another content than the manifest says (or the manifest itself).
void verify_manifest(const std::string& dir);
// verify_manifest without the error: true when the folder is complete.
bool checkpoint_complete(const std::string& dir);

// Whether `name` is a file a checkpoint save writes (manifest.txt, model.pt,
// model.safetensors, optimizer.pt, state.yaml, config.yaml, src.model,
// tgt.model): what may be
// deleted when a checkpoint folder is replaced (util/atomic_file.h's rule).
bool is_checkpoint_file_name(const std::string& name);

}  // namespace nmt
