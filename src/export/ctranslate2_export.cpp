#include "export/ctranslate2_export.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <vector>

#include "checkpoint/checkpoint.h"
#include "export/export_assets.h"
#include "model/parameter_table.h"
#include "tokenizer/sentinels.h"
#include "tokenizer/special_ids.h"
#include "util/atomic_file.h"
#include "util/errors.h"
#include "util/interrupt.h"

namespace nmt {

namespace fs = std::filesystem;

namespace {

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "model.bin is little-endian; this writer copies host-order integers"
#endif

// CTranslate2's model.bin: the layout its Python converters write and its
// C++ loader reads (binary version 6).
//   u32 version | string spec | u32 revision | u32 n
//   n × (string name | u8 rank | rank × u32 dim | u8 dtype | u32 bytes | data)
//   u32 m | m × (string alias | string variable)
// where a string is u16 (length + 1), the bytes, and a NUL.
constexpr uint32_t kBinaryVersion = 6;
constexpr const char* kSpecName = "TransformerSpec";
constexpr uint32_t kSpecRevision = 7;
enum class Ct2Type : uint8_t { kFloat32 = 0, kInt8 = 1, kInt16 = 2 };
constexpr int8_t kActivationRelu = 0;
constexpr int8_t kEmbeddingsMergeConcat = 0;

class ModelBin {
 public:
  // t: any shape, written as float32 row-major.
  void tensor(const std::string& name, const at::Tensor& t) {
    const at::Tensor c = t.detach().to(at::kCPU, at::kFloat).contiguous();
    Variable v;
    for (int64_t d : c.sizes()) v.shape.push_back(static_cast<uint32_t>(d));
    v.type = Ct2Type::kFloat32;
    v.data.assign(static_cast<const char*>(c.data_ptr()), c.numel() * sizeof(float));
    add(name, std::move(v));
  }
  void flag(const std::string& name, bool value) { scalar<int8_t>(name, value ? 1 : 0, Ct2Type::kInt8); }
  void int8(const std::string& name, int8_t value) { scalar<int8_t>(name, value, Ct2Type::kInt8); }
  void int16(const std::string& name, int16_t value) { scalar<int16_t>(name, value, Ct2Type::kInt16); }
  // `alias` reads the variable `target` (stored once).
  void alias(const std::string& alias, const std::string& target) { aliases_[alias] = target; }

  size_t variables() const { return variables_.size(); }
  size_t aliases() const { return aliases_.size(); }

  std::string bytes() const {
    std::string out;
    put<uint32_t>(out, kBinaryVersion);
    put_string(out, kSpecName);
    put<uint32_t>(out, kSpecRevision);
    put<uint32_t>(out, static_cast<uint32_t>(variables_.size()));
    for (const auto& [name, v] : variables_) {  // sorted by name, as the converters write them
      put_string(out, name);
      put<uint8_t>(out, static_cast<uint8_t>(v.shape.size()));
      for (uint32_t d : v.shape) put<uint32_t>(out, d);
      put<uint8_t>(out, static_cast<uint8_t>(v.type));
      put<uint32_t>(out, static_cast<uint32_t>(v.data.size()));
      out += v.data;
    }
    put<uint32_t>(out, static_cast<uint32_t>(aliases_.size()));
    for (const auto& [alias, target] : aliases_) {
      put_string(out, alias);
      put_string(out, target);
    }
    return out;
  }

 private:
  struct Variable {
    std::vector<uint32_t> shape;  // empty: a scalar
    Ct2Type type = Ct2Type::kFloat32;
    std::string data;
  };
  template <typename T>
  void scalar(const std::string& name, T value, Ct2Type type) {
    Variable v;
    v.type = type;
    v.data.assign(reinterpret_cast<const char*>(&value), sizeof value);
    add(name, std::move(v));
  }
  void add(const std::string& name, Variable v) {
    if (!variables_.emplace(name, std::move(v)).second)
      throw std::logic_error("ctranslate2 export: variable " + name + " written twice");
  }
  template <typename T>
  static void put(std::string& out, T value) {
    out.append(reinterpret_cast<const char*>(&value), sizeof value);
  }
  static void put_string(std::string& out, const std::string& s) {
    if (s.size() + 1 > 0xffff) throw std::logic_error("ctranslate2 export: name too long: " + s);
    put<uint16_t>(out, static_cast<uint16_t>(s.size() + 1));
    out += s;
    out += '\0';
  }

  std::map<std::string, Variable> variables_;
  std::map<std::string, std::string> aliases_;
};

// Which of the model's tensors the mapping wrote: every parameter and buffer
// must be, or the exported model would differ from ours.
class Coverage {
 public:
  const at::Tensor& use(const at::Tensor& t) {
    used_.insert(t.unsafeGetTensorImpl());
    return t;
  }
  void check(const torch::nn::Module& model) const {
    for (const auto& p : model.named_parameters(/*recurse=*/true))
      if (!used_.count(p.value().unsafeGetTensorImpl()))
        throw ExportError("model parameter '" + p.key() +
                          "' has no counterpart in CTranslate2's TransformerSpec: export refuses rather "
                          "than write a model that computes something else");
    for (const auto& b : model.named_buffers(/*recurse=*/true))
      if (!used_.count(b.value().unsafeGetTensorImpl()))
        throw ExportError("model buffer '" + b.key() + "' has no counterpart in CTranslate2's TransformerSpec");
  }

 private:
  std::set<const c10::TensorImpl*> used_;
};

// CTranslate2's TransformerSpec name of one use of a parameter-table entry.
std::string spec_name(const ParamEntry& e, const ParamUse& use) {
  const bool weight = e.part == ParamPart::kWeight;
  const std::string stack = use.stack == ParamStack::kEncoder ? "encoder" : "decoder";
  const std::string layer = stack + "/layer_" + std::to_string(use.layer);
  const auto linear = [&](const std::string& scope) { return scope + (weight ? "/weight" : "/bias"); };
  const auto norm = [&](const std::string& scope) { return scope + (weight ? "/gamma" : "/beta"); };
  const bool encoder = use.stack == ParamStack::kEncoder;
  switch (use.role) {
    case ParamRole::kEmbedding: return encoder ? "encoder/embeddings_0/weight" : "decoder/embeddings/weight";
    case ParamRole::kFinalNorm: return norm(stack + "/layer_norm");
    case ParamRole::kOutProj: return linear("decoder/projection");
    case ParamRole::kNorm1: return norm(layer + "/self_attention/layer_norm");
    case ParamRole::kSelfQkv: return linear(layer + "/self_attention/linear_0");  // [Wq | Wk | Wv]
    case ParamRole::kSelfOut: return linear(layer + "/self_attention/linear_1");
    // The encoder's second norm opens its feed-forward block, the decoder's its cross-attention.
    case ParamRole::kNorm2: return norm(layer + (encoder ? "/ffn/layer_norm" : "/attention/layer_norm"));
    case ParamRole::kCrossQ: return linear(layer + "/attention/linear_0");
    case ParamRole::kCrossKv: return linear(layer + "/attention/linear_1");  // [Wk | Wv]
    case ParamRole::kCrossOut: return linear(layer + "/attention/linear_2");
    case ParamRole::kNorm3: return norm(layer + "/ffn/layer_norm");
    case ParamRole::kFf1: return linear(layer + "/ffn/linear_0");
    case ParamRole::kFf2: return linear(layer + "/ffn/linear_1");
  }
  throw ExportError("parameter '" + e.name + "': no CTranslate2 name for its role");
}

void stack_attributes(ModelBin& bin, const std::string& scope, int64_t heads, bool pre_norm) {
  bin.int16(scope + "/num_heads", static_cast<int16_t>(heads));
  // Post-norm: each sublayer's layer_norm follows its residual add, and the
  // stacks have no final layer_norm (the parameter table holds none).
  bin.flag(scope + "/pre_norm", pre_norm);
  bin.int8(scope + "/activation", kActivationRelu);
  // The embedding is multiplied by sqrt(d_model) before the positions are added.
  bin.flag(scope + "/scale_embeddings", true);
}

ModelBin model_bin(const TransformerImpl& m, const at::Tensor& positions, Coverage& cov) {
  const TransformerOptions& o = m.options();
  if (o.heads() > 0x7fff) throw ExportError("model.heads " + std::to_string(o.heads()) + " does not fit CTranslate2's int16");
  ModelBin bin;

  // Encoder: pre-norm layers [self-attention, feed-forward], then a final norm.
  stack_attributes(bin, "encoder", o.heads(), !o.post_norm());
  bin.flag("encoder/multi_query_attention", false);
  bin.int8("encoder/embeddings_merge", kEmbeddingsMergeConcat);
  bin.tensor("encoder/position_encodings/encodings", positions);

  // Decoder: pre-norm layers [causal self-attention, cross-attention, feed-forward].
  stack_attributes(bin, "decoder", o.heads(), !o.post_norm());
  bin.int16("decoder/alignment_layer", -1);
  bin.int16("decoder/alignment_heads", 1);
  bin.flag("decoder/alibi", false);
  bin.flag("decoder/alibi_use_positive_positions", false);
  bin.flag("decoder/scale_alibi", false);
  bin.flag("decoder/start_from_zero_embedding", false);
  bin.tensor("decoder/position_encodings/encodings", positions);
  // Every weight, from the parameter table (pre-norm layers: encoder [self-
  // attention, feed-forward], decoder [causal self-attention,
  // cross-attention, feed-forward], each stack with a final norm).
  // A tied tensor (embeddings, output projection) is stored once, under
  // the first of its names in alphabetical order as CTranslate2's own
  // converters do, and its other names are aliases of it.
  for (const ParamEntry& e : parameter_table(m)) {
    const at::Tensor& t = cov.use(e.tensor);
    std::vector<std::string> names{spec_name(e, {e.stack, e.layer, e.role})};
    for (const ParamUse& u : e.tied) names.push_back(spec_name(e, u));
    std::sort(names.begin(), names.end());
    // Our Dense layers keep weight as [in, out]; CTranslate2's Linear is [out, in].
    bin.tensor(names.front(), is_dense(e.role) && e.part == ParamPart::kWeight ? t.t() : t);
    for (size_t i = 1; i < names.size(); ++i) bin.alias(names[i], names.front());
  }
  return bin;
}

// Token strings by id; CTranslate2 maps strings back to ids, so they must be unique.
std::vector<std::string> vocabulary(const Tokenizer& tok, const std::string& side) {
  std::vector<int64_t> ids(tok.vocab_size());
  for (int64_t i = 0; i < tok.vocab_size(); ++i) ids[i] = i;
  std::vector<std::string> pieces = tok.pieces(ids);
  std::map<std::string, int64_t> seen;
  for (int64_t i = 0; i < static_cast<int64_t>(pieces.size()); ++i) {
    const auto [it, fresh] = seen.emplace(pieces[i], i);
    if (!fresh)
      throw ExportError(side + " vocabulary: ids " + std::to_string(it->second) + " and " + std::to_string(i) +
                        " are both the piece '" + pieces[i] + "'; CTranslate2 looks tokens up by their string");
  }
  return pieces;
}

std::string json_text(const nlohmann::json& j) {
  try {
    return j.dump(2) + "\n";
  } catch (const nlohmann::json::exception& e) {  // e.g. a piece that is not UTF-8
    throw ExportError(std::string("cannot write JSON: ") + e.what());
  }
}

// What an export writes, and the marker that tells a folder of ours from
// anyone else's: --overwrite replaces only a folder holding the marker and
// nothing but these files (or an empty one).
constexpr const char* kExportMarker = "nmt_export.json";
constexpr const char* kExportFiles[] = {kExportMarker,           "model.bin",              "config.json",
                                        "source_vocabulary.json", "target_vocabulary.json", "shared_vocabulary.json",
                                        "src.model",              "tgt.model",              "placeholders.py"};

bool is_export_file_name(const std::string& name) {
  for (const char* f : kExportFiles)
    if (name == f) return true;
  return false;
}

// InputError unless `output` may become the export: missing, an empty
// folder, or (with --overwrite) an earlier export and nothing else.
void check_output_folder(const std::string& output, bool overwrite) {
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(output, ec))) return;
  if (!fs::is_directory(fs::symlink_status(output, ec)))
    throw InputError(output + ": exists and is not a folder");
  if (fs::is_empty(output, ec) && !ec) return;
  if (!overwrite) throw InputError(output + ": exists; choose another --output or pass --overwrite to replace it");
  if (!fs::exists(fs::path(output) / kExportMarker, ec)) {
    const std::string first = first_foreign_entry(output, [](const std::string&) { return false; });
    throw InputError(first + ": not written by nmt export (" + output + " holds no " + kExportMarker +
                     "); --overwrite replaces only an earlier export or an empty folder");
  }
  if (const std::string foreign = first_foreign_entry(output, is_export_file_name); !foreign.empty())
    throw InputError(foreign + ": not written by nmt export; --overwrite replaces only an earlier export or an "
                     "empty folder: move it away first");
}

// The staging folder beside the output; removed unless it was moved into place.
struct StagingFolder {
  explicit StagingFolder(std::string p) : path(std::move(p)) {
    remove_owned_tree(path, is_export_file_name, "an export being written");  // left by an export that was killed
    std::error_code ec;
    if (!fs::create_directories(path, ec) || ec)
      throw IoError(path + ": cannot create: " + ec.message());
  }
  ~StagingFolder() {
    std::error_code ec;
    if (!path.empty()) remove_tree(path, ec);
  }
  std::string path;
};

}  // namespace

ExportSummary export_ctranslate2(const LoadedCheckpoint& ck, const std::string& output, bool overwrite) {
  std::error_code ec;
  check_output_folder(output, overwrite);
  const fs::path parent = fs::absolute(output).parent_path();
  if (!fs::is_directory(parent, ec)) throw InputError(output + ": parent folder " + parent.string() + " does not exist");

  // A protected model reads sentinels where placeholders were and writes them
  // for the caller to restore (data/placeholder_mask.h). CTranslate2 does
  // neither, so placeholders.py goes along and does both as nmt does; the
  // sentinels must then be tokens of both vocabularies, as the tokenizers of
  // a protected model are trained to make them.
  const bool protect = ck.cfg.tokenizer.protect_placeholders;
  if (protect)
    for (const auto& [tok, side] : {std::pair{ck.src_tok.get(), "source"}, std::pair{ck.tgt_tok.get(), "target"}})
      for (int k = 1; k <= kMaxSentinels; ++k)
        if (tok->piece_id(sentinel(k)) < 0)
          throw ExportError(std::string("tokenizer.protect_placeholders: the ") + side + " tokenizer has no piece for "
                            "sentinel " + std::to_string(k) + " of " + std::to_string(kMaxSentinels) +
                            "; retrain the tokenizers with protection on");
  const TransformerImpl& m = *ck.model;
  // The positions the model adds, row t for position t (from 0), as a table.
  const at::Tensor positions = m.named_buffers(/*recurse=*/false)["positions"];
  Coverage cov;
  cov.use(positions);
  const ModelBin bin = model_bin(m, positions, cov);
  cov.check(m);

  const std::vector<std::string> src_vocab = vocabulary(*ck.src_tok, "source");
  const std::vector<std::string> tgt_vocab = vocabulary(*ck.tgt_tok, "target");
  const std::string unk = tgt_vocab.at(kUnkId), start = tgt_vocab.at(kStartId), end = tgt_vocab.at(kEndId);
  if (src_vocab.at(kUnkId) != unk)
    throw ExportError("the source and target vocabularies name <unk> differently ('" + src_vocab[kUnkId] + "', '" +
                      unk + "'); CTranslate2 has one unk_token");
  // Sources carry no <start>/<end> (data/dataset.cpp); the decoder starts from <start>.
  const nlohmann::json config = {
      {"add_source_bos", false},   {"add_source_eos", false},
      {"bos_token", start},        {"decoder_start_token", start},
      {"eos_token", end},          {"unk_token", unk},
      {"layer_norm_epsilon", m.norm_eps()},
      {"multi_query_attention", false},
  };

  // One vocabulary for both sides (tokenizer.shared) is written once, as
  // CTranslate2's converters write it: shared_vocabulary.json.
  const bool shared_vocab = src_vocab == tgt_vocab;
  std::vector<std::string> files(std::begin(kExportFiles) + 1, std::end(kExportFiles));
  const auto drop = [&files](const std::string& name) {
    files.erase(std::remove(files.begin(), files.end(), name), files.end());
  };
  if (!protect) drop("placeholders.py");
  for (const char* name : shared_vocab ? std::vector{"source_vocabulary.json", "target_vocabulary.json"}
                                       : std::vector{"shared_vocabulary.json"})
    drop(name);
  StagingFolder staged(output + ".export-tmp");
  // The marker first: a staging folder cut short is recognised as ours too.
  const nlohmann::json marker = {
      {"written_by", "nmt export"},
      {"format", "ctranslate2"},
      {"files", files},
      {"placeholder_protection", protect},
      {"note", "nmt export --overwrite replaces this folder only while it holds nothing but these files"},
  };
  write_file_atomic(staged.path + "/" + kExportMarker, json_text(marker));
  const std::string model_bytes = bin.bytes();
  write_file_atomic(staged.path + "/model.bin", model_bytes);
  write_file_atomic(staged.path + "/config.json", json_text(config));
  if (shared_vocab) {
    write_file_atomic(staged.path + "/shared_vocabulary.json", json_text(src_vocab));
  } else {
    write_file_atomic(staged.path + "/source_vocabulary.json", json_text(src_vocab));
    write_file_atomic(staged.path + "/target_vocabulary.json", json_text(tgt_vocab));
  }
  // CTranslate2 takes pieces in and gives pieces out: the tokenizers go along.
  write_file_atomic(staged.path + "/src.model", ck.src_model);
  write_file_atomic(staged.path + "/tgt.model", ck.tgt_model);
  if (protect)
    for (const EmbeddedFile& f : export_assets()) write_file_atomic(staged.path + f.path, f.text());
  throw_if_interrupted();
  check_output_folder(output, overwrite);  // again: the folder may have changed while the model was written
  replace_directory(staged.path, output);
  staged.path.clear();

  ExportSummary s;
  s.variables = static_cast<int64_t>(bin.variables());
  s.aliases = static_cast<int64_t>(bin.aliases());
  s.bytes = static_cast<int64_t>(model_bytes.size());
  s.src_vocab = static_cast<int64_t>(src_vocab.size());
  s.tgt_vocab = static_cast<int64_t>(tgt_vocab.size());
  return s;
}

}  // namespace nmt
