#include "runtime/safetensors.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "util/errors.h"

namespace nmt::runtime {

namespace {

using nlohmann::json;

// The format's own bound on its header (100 MB), and ours on a shape's rank.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr size_t kMaxRank = 8;

uint64_t read_u64_le(const std::string& bytes) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
  return v;
}

}  // namespace

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (const int64_t d : shape) n *= d;
  return n;
}

std::map<std::string, TensorView> read_safetensors(const std::string& bytes, const std::string& name) {
  const auto bad = [&](const std::string& what) -> InputError { return InputError(name + ": " + what); };
  if (bytes.size() < 8) throw bad("not a safetensors file (" + std::to_string(bytes.size()) + " bytes)");
  const uint64_t header_bytes = read_u64_le(bytes);
  if (header_bytes > kMaxHeaderBytes || header_bytes > bytes.size() - 8)
    throw bad("header of " + std::to_string(header_bytes) + " bytes in a file of " + std::to_string(bytes.size()));
  json header;
  try {
    header = json::parse(bytes.begin() + 8, bytes.begin() + 8 + static_cast<std::ptrdiff_t>(header_bytes));
  } catch (const json::exception&) {
    throw bad("the header is not JSON");
  }
  if (!header.is_object()) throw bad("the header is not a JSON object");
  const size_t data_start = 8 + static_cast<size_t>(header_bytes);
  const size_t data_bytes = bytes.size() - data_start;
  std::map<std::string, TensorView> out;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const auto& [key, entry] : header.items()) {
    if (key == "__metadata__") continue;
    const std::string where = "tensor " + key + ": ";
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      throw bad(where + "expected dtype, shape and data_offsets");
    if (!entry["dtype"].is_string() || entry["dtype"].get<std::string>() != "F32")
      throw bad(where + "dtype " + entry["dtype"].dump() + ", expected \"F32\"");
    const json& shape = entry["shape"];
    const json& offsets = entry["data_offsets"];
    if (!shape.is_array() || shape.size() > kMaxRank) throw bad(where + "shape is not a list of at most 8 sizes");
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      throw bad(where + "data_offsets is not [begin, end]");
    TensorView v;
    uint64_t elements = 1;
    for (const json& d : shape) {
      if (!d.is_number_unsigned()) throw bad(where + "shape " + shape.dump() + " holds a non-size");
      const uint64_t size = d.get<uint64_t>();
      if (size > 0 && elements > std::numeric_limits<uint32_t>::max() / size)
        throw bad(where + "shape " + shape.dump() + " is too large");
      elements *= size;
      v.shape.push_back(static_cast<int64_t>(size));
    }
    const uint64_t begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
    if (begin > end || end > data_bytes)
      throw bad(where + "bytes [" + std::to_string(begin) + ", " + std::to_string(end) + ") outside the " +
                std::to_string(data_bytes) + " bytes of data");
    if (end - begin != elements * sizeof(float))
      throw bad(where + "shape " + shape.dump() + " needs " + std::to_string(elements * sizeof(float)) +
                " bytes, its range holds " + std::to_string(end - begin));
    if ((data_start + begin) % alignof(float) != 0) throw bad(where + "data not aligned to 4 bytes");
    v.data = reinterpret_cast<const float*>(bytes.data() + data_start + begin);
    ranges.emplace_back(begin, end);
    out.emplace(key, std::move(v));
  }
  std::sort(ranges.begin(), ranges.end());
  for (size_t i = 1; i < ranges.size(); ++i)
    if (ranges[i].first < ranges[i - 1].second) throw bad("two tensors' bytes overlap");
  return out;
}

std::string write_safetensors(const std::map<std::string, TensorView>& tensors,
                              const std::map<std::string, std::string>& metadata) {
  constexpr uint64_t kAlign = 64;
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t at = 0;
  for (const auto& [key, v] : tensors) {
    at = (at + kAlign - 1) / kAlign * kAlign;
    const uint64_t size = static_cast<uint64_t>(v.numel()) * sizeof(float);
    header[key] = {{"dtype", "F32"}, {"shape", v.shape}, {"data_offsets", {at, at + size}}};
    at += size;
  }
  std::string text = header.dump();
  // The data section starts 64-byte aligned too (the format pads with spaces).
  const size_t padded = ((8 + text.size() + kAlign - 1) / kAlign) * kAlign - 8;
  text.append(padded - text.size(), ' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[static_cast<size_t>(i)] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  out += text;
  const size_t data_start = out.size();
  out.resize(data_start + at, '\0');
  for (const auto& [key, v] : tensors) {
    const uint64_t begin = header[key]["data_offsets"][0].get<uint64_t>();
    std::memcpy(&out[data_start + begin], v.data, static_cast<size_t>(v.numel()) * sizeof(float));
  }
  return out;
}

}  // namespace nmt::runtime
