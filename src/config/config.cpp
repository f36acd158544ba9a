// The only file that knows YAML. A table of fields (path, parse, print) drives
// loading, --set overrides, unknown-key rejection and the resolved dump, so a
// new key is added in one place.
#include "config/config.h"

#include <fmt/format.h>

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <utility>

#include "ops/attention/backend.h"
#include "ops/linear/packed_linear.h"
#include "util/atomic_file.h"
#include "util/device_choices.h"
#include "util/errors.h"
#include "util/number_text.h"
#include "util/utf8.h"

namespace nmt {
namespace {

struct Field {
  std::string path;  // "section.key"
  // Parses node into cfg, or throws InputError via `fail(problem)`.
  std::function<void(Config&, const YAML::Node&, const std::function<void(const std::string&)>& fail)>
      parse;
  std::function<void(const Config&, YAML::Emitter&)> emit;
  bool retired = false;  // a key of earlier versions: read (a checkpoint's config may hold it) and ignored
};

std::string scalar_text(const YAML::Node& node) {
  if (node.IsScalar()) return node.Scalar();
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "nothing";
}

// A key earlier versions had: accepted as any scalar, ignored, never written.
Field retired_field(std::string path) {
  return {path, [](Config&, const YAML::Node& n, const auto& fail) {
            if (!n.IsScalar()) fail("expected a scalar, got '" + scalar_text(n) + "'");
          },
          [](const Config&, YAML::Emitter&) {}, true};
}

template <typename Get>
Field int_field(std::string path, Get get, int64_t lo, int64_t hi) {
  return {path,
          [=](Config& c, const YAML::Node& n, const auto& fail) {
            int64_t v = 0;
            if (!n.IsScalar() || !YAML::convert<int64_t>::decode(n, v))
              fail("expected an integer, got '" + scalar_text(n) + "'");
            if (v < lo || v > hi)
              fail(std::to_string(v) + " is out of range [" + std::to_string(lo) + ", " +
                   std::to_string(hi) + "]");
            get(c) = v;
          },
          [=](const Config& c, YAML::Emitter& e) { e << get(const_cast<Config&>(c)); }};
}

template <typename Get>
Field uint_field(std::string path, Get get) {
  return {path,
          [=](Config& c, const YAML::Node& n, const auto& fail) {
            uint64_t v = 0;
            if (!n.IsScalar() || n.Scalar().rfind('-', 0) == 0 ||
                !YAML::convert<uint64_t>::decode(n, v))
              fail("expected a non-negative integer, got '" + scalar_text(n) + "'");
            get(c) = v;
          },
          [=](const Config& c, YAML::Emitter& e) { e << get(const_cast<Config&>(c)); }};
}

// A double as the shortest text that reads back as itself (0.1, where
// yaml-cpp's emitter writes 0.10000000000000001).
void emit_double(YAML::Emitter& e, double v) { e << shortest_number(v); }

// lo_open, hi_open: the bound itself is not allowed.
template <typename Get>
Field double_field(std::string path, Get get, double lo, double hi, bool lo_open = false, bool hi_open = false) {
  return {path,
          [=](Config& c, const YAML::Node& n, const auto& fail) {
            double v = 0;
            if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
              fail("expected a number, got '" + scalar_text(n) + "'");
            if (v < lo || v > hi || (lo_open && v == lo) || (hi_open && v == hi)) {
              std::ostringstream os;
              os << v << " is out of range " << (lo_open ? "(" : "[") << lo << ", " << hi << (hi_open ? ")" : "]");
              fail(os.str());
            }
            get(c) = v;
          },
          [=](const Config& c, YAML::Emitter& e) { emit_double(e, get(const_cast<Config&>(c))); }};
}

template <typename Get>
Field bool_field(std::string path, Get get) {
  return {path,
          [=](Config& c, const YAML::Node& n, const auto& fail) {
            bool v = false;
            if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v))
              fail("expected true or false, got '" + scalar_text(n) + "'");
            get(c) = v;
          },
          [=](const Config& c, YAML::Emitter& e) { e << get(const_cast<Config&>(c)); }};
}

// choices empty: any non-empty string.
template <typename Get>
Field string_field(std::string path, Get get, std::vector<std::string> choices = {}) {
  return {path,
          [=](Config& c, const YAML::Node& n, const auto& fail) {
            if (!n.IsScalar() || n.Scalar().empty())
              fail("expected a non-empty string, got '" + scalar_text(n) + "'");
            const std::string v = n.Scalar();
            if (!choices.empty()) {
              bool ok = false;
              std::string list;
              for (const auto& ch : choices) {
                ok = ok || ch == v;
                list += (list.empty() ? "" : " | ") + ch;
              }
              if (!ok) fail("'" + v + "' is not one of: " + list);
            }
            get(c) = v;
          },
          [=](const Config& c, YAML::Emitter& e) {
            e << YAML::DoubleQuoted << get(const_cast<Config&>(c));
          }};
}

// One of a closed list (util/choices.h), held as its enum.
template <typename Get, typename E, size_t N>
Field enum_field(std::string path, Get get, const ChoiceList<E, N>& choices) {
  return {path,
          [=](Config& c, const YAML::Node& n, const auto& fail) {
            if (!n.IsScalar()) fail("expected one of: " + choices.listed() + ", got '" + scalar_text(n) + "'");
            const std::optional<E> v = choices.find(n.Scalar());
            if (!v) fail("'" + n.Scalar() + "' is not one of: " + choices.listed());
            get(c) = *v;
          },
          [=](const Config& c, YAML::Emitter& e) {
            e << YAML::DoubleQuoted << choices.name(get(const_cast<Config&>(c)));
          }};
}

#define NMT_REF(member) [](Config& c) -> auto& { return c.member; }

const std::vector<Field>& fields() {
  constexpr int64_t kBig = std::numeric_limits<int32_t>::max();
  static const std::vector<Field> table = {
      string_field("data.train_src", NMT_REF(data.train_src)),
      string_field("data.train_tgt", NMT_REF(data.train_tgt)),
      string_field("data.valid_src", NMT_REF(data.valid_src)),
      string_field("data.valid_tgt", NMT_REF(data.valid_tgt)),
      string_field("data.test_src", NMT_REF(data.test_src)),
      string_field("data.test_tgt", NMT_REF(data.test_tgt)),
      int_field("data.max_len", NMT_REF(data.max_len), 1, 4096),
      double_field("data.max_length_ratio", NMT_REF(data.max_length_ratio), 0.0, 1000.0),
      bool_field("data.dedupe", NMT_REF(data.dedupe)),
      bool_field("data.skip_invalid_lines", NMT_REF(data.skip_invalid_lines)),
      string_field("data.prepared_dir", NMT_REF(data.prepared_dir)),

      bool_field("tokenizer.shared", NMT_REF(tokenizer.shared)),
      string_field("tokenizer.model_type", NMT_REF(tokenizer.model_type),
                   {"unigram", "bpe", "char", "word"}),
      int_field("tokenizer.src_vocab_size", NMT_REF(tokenizer.src_vocab_size), 8, 1000000),
      int_field("tokenizer.tgt_vocab_size", NMT_REF(tokenizer.tgt_vocab_size), 8, 1000000),
      double_field("tokenizer.src_character_coverage",
                   NMT_REF(tokenizer.src_character_coverage), 0.9, 1.0),
      double_field("tokenizer.tgt_character_coverage",
                   NMT_REF(tokenizer.tgt_character_coverage), 0.9, 1.0),
      string_field("tokenizer.normalization", NMT_REF(tokenizer.normalization),
                   {"identity", "nmt_nfkc", "nfkc"}),
      bool_field("tokenizer.byte_fallback", NMT_REF(tokenizer.byte_fallback)),
      bool_field("tokenizer.placeholder_symbols", NMT_REF(tokenizer.placeholder_symbols)),
      bool_field("tokenizer.protect_placeholders", NMT_REF(tokenizer.protect_placeholders)),
      int_field("tokenizer.sample_lines", NMT_REF(tokenizer.sample_lines), 1000, int64_t{1} << 40),
      // Tokenizers were cached there; they now live with the prepared corpus.
      retired_field("tokenizer.cache_dir"),

      int_field("model.d_model", NMT_REF(model.d_model), 8, 8192),
      int_field("model.heads", NMT_REF(model.heads), 1, 256),
      int_field("model.encoder_layers", NMT_REF(model.encoder_layers), 1, 64),
      int_field("model.decoder_layers", NMT_REF(model.decoder_layers), 1, 64),
      int_field("model.ff_dim", NMT_REF(model.ff_dim), 1, 65536),
      double_field("model.dropout", NMT_REF(model.dropout), 0.0, 0.9),
      double_field("model.activation_dropout", NMT_REF(model.activation_dropout), -1.0, 0.9),
      double_field("model.attention_dropout", NMT_REF(model.attention_dropout), 0.0, 0.9),
      string_field("model.norm", NMT_REF(model.norm), {"pre", "post"}),
      bool_field("model.tie_embeddings", NMT_REF(model.tie_embeddings)),
      bool_field("model.tie_all", NMT_REF(model.tie_all)),
      int_field("model.max_positions", NMT_REF(model.max_positions), 2, 65536),

      enum_field("attention.backend", NMT_REF(attention.backend), ops::kAttentionBackends),
      enum_field("attention.device", NMT_REF(attention.device), kDeviceChoices),

      string_field("train.checkpoint_dir", NMT_REF(train.checkpoint_dir)),
      uint_field("train.seed", NMT_REF(train.seed)),
      int_field("train.threads", NMT_REF(train.threads), 0, 1024),
      enum_field("train.precision", NMT_REF(train.precision), kPrecisionChoices),
      int_field("train.batch_tokens", NMT_REF(train.batch_tokens), 0, kBig),
      int_field("train.batch_sentences", NMT_REF(train.batch_sentences), 0, kBig),
      int_field("train.max_steps", NMT_REF(train.max_steps), 0, kBig),
      int_field("train.max_epochs", NMT_REF(train.max_epochs), 0, kBig),
      double_field("train.max_minutes", NMT_REF(train.max_minutes), 0.0, 1e7),
      double_field("train.lr", NMT_REF(train.lr), 0.0, 10.0, /*lo_open=*/true),
      string_field("train.lr_schedule", NMT_REF(train.lr_schedule), {"inverse_sqrt", "linear", "cosine"}),
      double_field("train.min_lr", NMT_REF(train.min_lr), 0.0, 10.0),
      int_field("train.warmup_steps", NMT_REF(train.warmup_steps), 1, kBig),
      double_field("train.warmup_share", NMT_REF(train.warmup_share), 0.0, 0.99),
      double_field("train.adam_beta1", NMT_REF(train.adam_beta1), 0.0, 0.999999),
      double_field("train.adam_beta2", NMT_REF(train.adam_beta2), 0.0, 0.999999),
      double_field("train.adam_eps", NMT_REF(train.adam_eps), 0.0, 1.0, true),
      double_field("train.weight_decay", NMT_REF(train.weight_decay), 0.0, 1.0),
      double_field("train.label_smoothing", NMT_REF(train.label_smoothing), 0.0, 0.99),
      double_field("train.clip_norm", NMT_REF(train.clip_norm), 0.0, 1e6),
      double_field("train.ema_decay", NMT_REF(train.ema_decay), 0.0, 1.0, /*lo_open=*/false, /*hi_open=*/true),
      bool_field("train.ema_step_dependent", NMT_REF(train.ema_step_dependent)),
      int_field("train.keep_last", NMT_REF(train.keep_last), 0, kBig),
      int_field("train.skip_nonfinite_steps", NMT_REF(train.skip_nonfinite_steps), 0, kBig),
      int_field("train.log_every", NMT_REF(train.log_every), 1, kBig),
      int_field("train.eval_every", NMT_REF(train.eval_every), 1, kBig),
      int_field("train.valid_max_sentences", NMT_REF(train.valid_max_sentences), 0, kBig),
      int_field("train.valid_bleu_sentences", NMT_REF(train.valid_bleu_sentences), 0, kBig),
      string_field("train.best_metric", NMT_REF(train.best_metric), {"bleu", "chrf", "exact", "loss"}),
      int_field("train.patience", NMT_REF(train.patience), 0, kBig),
      double_field("train.stop_at_bleu", NMT_REF(train.stop_at_bleu), 0.0, 100.0),
      Field{"train.metrics_file",
            [](Config& c, const YAML::Node& n, const auto& fail) {
              if (!n.IsScalar()) fail("expected a string, got '" + scalar_text(n) + "'");
              c.train.metrics_file = n.Scalar();
            },
            [](const Config& c, YAML::Emitter& e) { e << YAML::DoubleQuoted << c.train.metrics_file; }},
      bool_field("train.progress", NMT_REF(train.progress)),
      Field{"train.init_from",
            [](Config& c, const YAML::Node& n, const auto& fail) {
              if (!n.IsScalar()) fail("expected a checkpoint folder, got '" + scalar_text(n) + "'");
              c.train.init_from = n.Scalar();
            },
            [](const Config& c, YAML::Emitter& e) { e << YAML::DoubleQuoted << c.train.init_from; }},

      int_field("decode.max_len", NMT_REF(decode.max_len), 1, 4096),
      int_field("decode.batch_size", NMT_REF(decode.batch_size), 1, 100000),
      Field{"decode.max_len_factor",
            [](Config& c, const YAML::Node& n, const auto& fail) {
              if (n.IsScalar() && n.Scalar() == "auto") {
                c.decode.max_len_factor.reset();
                return;
              }
              double v = 0;
              if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !std::isfinite(v))
                fail("expected a number or auto, got '" + scalar_text(n) + "'");
              if (v < 0 || v > 1000) fail(shortest_number(v) + " is out of range [0, 1000] (or auto)");
              c.decode.max_len_factor = v;
            },
            [](const Config& c, YAML::Emitter& e) {
              if (c.decode.max_len_factor) emit_double(e, *c.decode.max_len_factor);
              else e << "auto";
            }},
      bool_field("decode.placeholder_constraint", NMT_REF(decode.placeholder_constraint)),
      enum_field("decode.compute_type", NMT_REF(decode.compute_type), ops::kComputeTypeChoices),
      int_field("decode.beam", NMT_REF(decode.beam), 0, 64),
      double_field("decode.length_penalty", NMT_REF(decode.length_penalty), 0.0, 10.0),
  };
  return table;
}
#undef NMT_REF

// Other names of keys: read as the key itself (errors name what the user
// wrote), never written, not listed among the known keys.
const std::map<std::string, std::string>& aliases() {
  static const std::map<std::string, std::string> table = {
      // One vocabulary for both languages, as the literature and fairseq call it.
      {"tokenizer.joint", "tokenizer.shared"},
  };
  return table;
}

// The key a name stands for: itself, or the key an alias names.
const std::string& canonical_key(const std::string& path) {
  const auto alias = aliases().find(path);
  return alias != aliases().end() ? alias->second : path;
}

const Field* find_field(const std::string& path) {
  const std::string& name = canonical_key(path);
  for (const auto& f : fields())
    if (f.path == name) return &f;
  return nullptr;
}

// A key given under two of its names (tokenizer.shared and its alias
// tokenizer.joint) in one file or one command line: which should win is a
// guess either way, so neither does. `seen` maps each key to the name and
// place it was first given under.
void refuse_second_name(std::map<std::string, std::pair<std::string, std::string>>& seen, const std::string& path,
                        const std::string& location) {
  const std::string& key = canonical_key(path);
  const auto [it, first] = seen.emplace(key, std::make_pair(path, location));
  if (first || it->second.first == path) return;
  throw InputError(location + ": " + path + ": the same key as " + it->second.first + " (" + it->second.second +
                   "); give one of the two names");
}

std::string known_keys(const std::string& section) {
  std::string out;
  for (const auto& f : fields()) {
    if (f.retired || f.path.compare(0, section.size() + 1, section + ".") != 0) continue;
    out += (out.empty() ? "" : ", ") + f.path.substr(section.size() + 1);
  }
  return out;
}

std::string where(const std::string& source, const YAML::Node& node) {
  return source + ":" + std::to_string(node.Mark().line + 1);
}

[[noreturn]] void input_error(const std::string& location, const std::string& key,
                              const std::string& problem) {
  throw InputError(location + ": " + (key.empty() ? "" : key + ": ") + problem);
}

// Location of a key for cross-field messages: "file:line" or "--set ...".
std::string origin_of(const Config& cfg, const std::string& key) {
  auto it = cfg.origin.find(key);
  return it != cfg.origin.end() ? it->second : cfg.source_name;
}

// A mapping key as text. YAML allows lists and mappings as keys ("[a]: 1",
// "? {a: 1}"); as<std::string>() would throw YAML::Exception on them.
std::string key_name(const YAML::Node& key, const std::string& source, const std::string& section) {
  if (!key.IsScalar())
    input_error(where(source, key), section, "expected a key name, got " + scalar_text(key));
  return key.Scalar();
}

void load_into(Config& cfg, const YAML::Node& root, const std::string& source) {
  if (!root || root.IsNull()) return;  // an empty file means all defaults
  if (!root.IsMap()) input_error(where(source, root), "", "expected a mapping of sections");
  static const std::vector<std::string> kSections = {"data",      "tokenizer", "model",
                                                     "attention", "train",     "decode"};
  std::map<std::string, std::pair<std::string, std::string>> seen;  // refuse_second_name's
  for (const auto& sec : root) {
    const std::string name = key_name(sec.first, source, "");
    if (std::find(kSections.begin(), kSections.end(), name) == kSections.end())
      input_error(where(source, sec.first), name,
                  "unknown section (known: data, tokenizer, model, attention, train, decode)");
    if (sec.second.IsNull()) continue;
    if (!sec.second.IsMap()) input_error(where(source, sec.second), name, "expected a mapping");
    for (const auto& kv : sec.second) {
      const std::string path = name + "." + key_name(kv.first, source, name);
      const Field* f = find_field(path);
      const std::string loc = where(source, kv.first);
      if (!f) input_error(loc, path, "unknown key (known in " + name + ": " + known_keys(name) + ")");
      refuse_second_name(seen, path, loc);
      f->parse(cfg, kv.second, [&](const std::string& problem) { input_error(loc, path, problem); });
      cfg.origin[path] = loc;
    }
  }
}

}  // namespace

void validate(const Config& cfg) {
  const auto& m = cfg.model;
  if (m.d_model % m.heads != 0)
    input_error(origin_of(cfg, "model.heads"), "model.heads",
                std::to_string(m.heads) + " does not divide model.d_model " +
                    std::to_string(m.d_model));
  if (m.d_model / m.heads > 256)
    input_error(origin_of(cfg, "model.heads"), "model.heads",
                "head size d_model/heads = " + std::to_string(m.d_model / m.heads) +
                    " exceeds 256");
  if (m.activation_dropout < 0 && m.activation_dropout != -1)
    input_error(origin_of(cfg, "model.activation_dropout"), "model.activation_dropout",
                fmt::format("{} is neither -1 (model.dropout's value) nor in [0, 0.9]", m.activation_dropout));
  if (cfg.train.best_metric != "loss" && cfg.train.valid_bleu_sentences == 0)
    input_error(origin_of(cfg, "train.best_metric"), "train.best_metric",
                cfg.train.best_metric + " needs train.valid_bleu_sentences > 0");
  if (cfg.train.ema_step_dependent && cfg.train.ema_decay == 0)
    input_error(origin_of(cfg, "train.ema_step_dependent"), "train.ema_step_dependent",
                "true needs train.ema_decay > 0 (the average it adjusts)");
  if (cfg.train.batch_tokens == 0 && cfg.train.batch_sentences == 0)
    input_error(origin_of(cfg, "train.batch_tokens"), "train.batch_tokens",
                "0 needs train.batch_sentences > 0");
  if (cfg.train.batch_tokens > 0 && cfg.train.batch_tokens < 2 * cfg.data.max_len + 2)
    input_error(origin_of(cfg, "train.batch_tokens"), "train.batch_tokens",
                std::to_string(cfg.train.batch_tokens) +
                    " cannot hold one pair of data.max_len " + std::to_string(cfg.data.max_len));
  if (cfg.train.max_steps == 0 && cfg.train.max_epochs == 0 && cfg.train.max_minutes == 0)
    input_error(origin_of(cfg, "train.max_steps"), "train.max_steps",
                "0 with no max_epochs or max_minutes would train forever");
  const TrainConfig& t = cfg.train;
  const bool budget = t.max_steps > 0 || t.max_minutes > 0;
  if (t.lr_schedule != "inverse_sqrt" && !budget)
    input_error(origin_of(cfg, "train.lr_schedule"), "train.lr_schedule",
                t.lr_schedule + " decays over the run's budget: set train.max_steps or train.max_minutes");
  if (t.warmup_share > 0 && !budget)
    input_error(origin_of(cfg, "train.warmup_share"), "train.warmup_share",
                "a share of the budget needs train.max_steps or train.max_minutes");
  if (t.min_lr > t.lr)
    input_error(origin_of(cfg, "train.min_lr"), "train.min_lr",
                fmt::format("{} is above train.lr {}", t.min_lr, t.lr));
  if (m.tie_all && !cfg.tokenizer.shared)
    input_error(origin_of(cfg, "model.tie_all"), "model.tie_all",
                "true ties the source and target embeddings: it needs one vocabulary (tokenizer.shared: true)");
  if (m.tie_all && !m.tie_embeddings)
    input_error(origin_of(cfg, "model.tie_all"), "model.tie_all",
                "true ties the output projection too: model.tie_embeddings must not be false");
  if (cfg.model.max_positions < cfg.data.max_len + 2 ||
      cfg.model.max_positions < cfg.decode.max_len + 1)
    input_error(origin_of(cfg, "model.max_positions"), "model.max_positions",
                std::to_string(cfg.model.max_positions) +
                    " is shorter than data.max_len + 2 or decode.max_len + 1");
}

namespace {

// yaml-cpp reads bytes that are not UTF-8 as they are, and turns a NUL in
// a plain scalar into a stray byte 0xA0; its emitter writes either as
// U+FFFD, so such a value would change on its way through to_yaml() (a
// checkpoint's config.yaml). YAML allows neither: rejected up front.
void require_yaml_text(const std::string& text, const std::string& source) {
  const size_t invalid = utf8::first_invalid(text), nul = text.find('\0');
  const size_t bad = std::min(invalid, nul);
  if (bad == std::string::npos) return;
  const size_t line_start = bad == 0 ? std::string::npos : text.rfind('\n', bad - 1);
  const size_t column = bad - (line_start == std::string::npos ? 0 : line_start + 1);
  throw InputError(source + ":" + std::to_string(std::count(text.begin(), text.begin() + bad, '\n') + 1) +
                   (bad == nul ? ": NUL character" : ": not valid UTF-8") + " (byte " +
                   std::to_string(column + 1) + ")");
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source_name) {
  Config cfg;
  cfg.source_name = source_name;
  require_yaml_text(yaml_text, source_name);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    throw InputError(source_name + ":" + std::to_string(e.mark.line + 1) +
                     ": invalid YAML: " + e.msg);
  }
  load_into(cfg, root, source_name);
  validate(cfg);
  return cfg;
}

Config load_config(const std::string& path) {
  return parse_config(read_file(path, "config file"), path);
}

namespace {

// Parses one "key.path=value" into cfg (field checks only); `seen` as
// refuse_second_name's, over one command line's assignments.
void parse_assignment(Config& cfg, const std::string& assignment,
                      std::map<std::string, std::pair<std::string, std::string>>& seen) {
  const size_t invalid = utf8::first_invalid(assignment), nul = assignment.find('\0');
  if (std::min(invalid, nul) != std::string::npos)
    throw InputError(std::string(invalid < nul ? "--set: not valid UTF-8" : "--set: NUL character") +
                     " (byte " + std::to_string(std::min(invalid, nul) + 1) + ")");
  const std::string loc = "--set " + assignment;
  const auto eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw InputError(loc + ": expected key.path=value");
  const std::string path = assignment.substr(0, eq);
  const Field* f = find_field(path);
  if (!f) {
    const auto dot = path.find('.');
    const std::string section = path.substr(0, dot);
    const std::string known = known_keys(section);
    input_error(loc, path,
                known.empty() ? "unknown section" : "unknown key (known in " + section + ": " + known + ")");
  }
  refuse_second_name(seen, path, loc);
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    input_error(loc, path, "invalid value: " + e.msg);
  }
  f->parse(cfg, value, [&](const std::string& problem) { input_error(loc, path, problem); });
  cfg.origin[path] = loc;
}

}  // namespace

void apply_overrides(Config& cfg, const std::vector<std::string>& assignments) {
  // On a copy: rejected overrides leave cfg as it was. The cross-key checks
  // run once, after all of them, so their order does not matter.
  Config updated = cfg;
  std::map<std::string, std::pair<std::string, std::string>> seen;
  for (const auto& a : assignments) parse_assignment(updated, a, seen);
  validate(updated);
  cfg = std::move(updated);
}

void apply_override(Config& cfg, const std::string& assignment) { apply_overrides(cfg, {assignment}); }

std::string to_yaml(const Config& cfg) {
  YAML::Emitter e;
  e << YAML::BeginMap;
  std::string section;
  for (const auto& f : fields()) {
    if (f.retired) continue;
    const auto dot = f.path.find('.');
    const std::string sec = f.path.substr(0, dot);
    if (sec != section) {
      if (!section.empty()) e << YAML::EndMap;
      e << YAML::Key << sec << YAML::Value << YAML::BeginMap;
      section = sec;
    }
    e << YAML::Key << f.path.substr(dot + 1) << YAML::Value;
    f.emit(cfg, e);
  }
  e << YAML::EndMap << YAML::EndMap;
  return std::string(e.c_str()) + "\n";
}

std::vector<std::string> config_keys(const std::string& section) {
  std::vector<std::string> keys;
  for (const auto& f : fields())
    if (!f.retired && f.path.compare(0, section.size() + 1, section + ".") == 0)
      keys.push_back(f.path);
  return keys;
}

std::string config_value(const Config& cfg, const std::string& key) {
  const Field* f = find_field(key);
  if (f == nullptr || f->retired) throw std::logic_error("config_value: no key " + key);
  YAML::Emitter e;
  f->emit(cfg, e);
  return e.c_str();
}

}  // namespace nmt
