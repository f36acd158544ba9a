#include "decode/torch_decoding.h"

#include <torch/torch.h>

#include <algorithm>
#include <cstring>

#include "checkpoint/checkpoint.h"
#include "data/dataset.h"
#include "model/build.h"
#include "model/parameter_table.h"
#include "runtime/cpu_decoding_model.h"
#include "runtime/translator_impl.h"
#include "tokenizer/special_ids.h"
#include "tokenizer/tokenizer.h"
#include "util/cpu_features.h"
#include "util/device.h"
#include "util/errors.h"

namespace nmt {

namespace {

// A running batch's slots as LibTorch tensors on the model's device: per
// decoder layer, self_kv [rows, positions, 2C] and cross_kv [rows, S, 2C].
class TorchDecoderState final : public runtime::DecoderState {
 public:
  TorchDecoderState(Transformer model, c10::Device device)
      : model_(std::move(model)), device_(device), output_table_(model_->step_output_table()) {}

  void resize(int64_t rows, int64_t positions, int64_t src, int64_t rows_in_use, int64_t cross_in_use) override {
    torch::NoGradGuard no_grad;
    rows = std::max(rows, rows_), positions = std::max(positions, positions_), src = std::max(src, src_);
    if (rows == rows_ && positions == positions_ && src == src_) return;
    const int64_t width = 2 * model_->options().d_model();
    const auto opts = torch::TensorOptions(torch::kFloat).device(device_);
    std::vector<LayerCache> next;
    for (int64_t l = 0; l < model_->options().decoder_layers(); ++l) {
      LayerCache c{torch::zeros({rows, positions, width}, opts), torch::zeros({rows, src, width}, opts)};
      const int64_t keep = std::min(rows_in_use, rows_), cross = std::min(cross_in_use, rows_);
      if (!slots_.empty() && keep > 0 && positions_ > 0)
        c.self_kv.narrow(0, 0, keep).narrow(1, 0, positions_).copy_(slots_[l].self_kv.narrow(0, 0, keep));
      if (!slots_.empty() && cross > 0 && src_ > 0)
        c.cross_kv.narrow(0, 0, cross).narrow(1, 0, src_).copy_(slots_[l].cross_kv.narrow(0, 0, cross));
      next.push_back(std::move(c));
    }
    slots_ = std::move(next);
    rows_ = rows, positions_ = positions, src_ = src;
  }
  int64_t rows() const override { return rows_; }
  int64_t positions() const override { return positions_; }
  int64_t source_positions() const override { return src_; }

  void add_sources(const std::vector<std::vector<int64_t>>& sources, const std::vector<int64_t>& cross_slots) override {
    torch::NoGradGuard no_grad;
    auto [src, src_len] = make_source_batch(sources);
    src = src.to(device_), src_len = src_len.to(device_);
    const torch::Tensor memory = model_->encode(src, src_len);  // [n, S, C]
    // Only the cross-attention keys/values are taken from it.
    const DecoderCache added = model_->start_decoding(memory, src_len, 1, /*output_table=*/false);
    const int64_t width = src.size(1);
    const torch::Tensor index = torch::tensor(cross_slots, torch::kLong).to(device_);
    for (size_t l = 0; l < slots_.size(); ++l)
      slots_[l].cross_kv.narrow(1, 0, width).index_copy_(0, index, added.layers[l].cross_kv);
  }

  float* step(int64_t n, const int64_t* tokens, const int64_t* positions, const int64_t* cross_rows,
              const int64_t* src_lengths) override {
    torch::NoGradGuard no_grad;
    int64_t max_position = 0, max_src = 0;
    for (int64_t r = 0; r < n; ++r) max_position = std::max(max_position, positions[r]), max_src = std::max(max_src, src_lengths[r]);
    // The rows in use, as views of the slots (writes land in the slots).
    DecoderCache cache;
    for (LayerCache& c : slots_) cache.layers.push_back({c.self_kv.narrow(0, 0, n), c.cross_kv.narrow(1, 0, max_src)});
    const auto ids = [](const int64_t* v, int64_t k) { return torch::tensor(std::vector<int64_t>(v, v + k), torch::kLong); };
    cache.src_lengths = ids(src_lengths, n).to(device_);
    cache.cross_rows = ids(cross_rows, n);
    cache.output_weight_t = output_table_;
    const torch::Tensor logits = model_->decode_step(ids(tokens, n).to(device_), ids(positions, n).to(device_),
                                                          max_position, cache)
                                     .to(torch::kCPU, torch::kFloat)
                                     .contiguous();  // [n, V]
    logits_.assign(logits.data_ptr<float>(), logits.data_ptr<float>() + logits.numel());
    return logits_.data();
  }

  void copy_row(int64_t to, int64_t from, int64_t positions) override {
    torch::NoGradGuard no_grad;
    for (LayerCache& c : slots_) c.self_kv[to].narrow(0, 0, positions).copy_(c.self_kv[from].narrow(0, 0, positions));
  }

  void release() override {
    slots_.clear();
    logits_ = {};
    rows_ = positions_ = src_ = 0;
  }

  int64_t vocab() const override { return model_->options().tgt_vocab(); }

 private:
  Transformer model_;
  c10::Device device_;
  torch::Tensor output_table_;  // the output projection laid out for a step's few rows (CPU float32)
  std::vector<LayerCache> slots_;
  int64_t rows_ = 0, positions_ = 0, src_ = 0;
  std::vector<float> logits_;
};

runtime::AttentionMap to_map(const torch::Tensor& layer) {
  const torch::Tensor t = layer[0].to(torch::kCPU, torch::kFloat).contiguous();  // [H, Tq, Tk]
  runtime::AttentionMap m;
  m.heads = t.size(0), m.rows = t.size(1), m.cols = t.size(2);
  m.values.assign(t.data_ptr<float>(), t.data_ptr<float>() + t.numel());
  return m;
}

}  // namespace

TorchDecodingModel::TorchDecodingModel(Transformer model, c10::Device device, std::string description)
    : model_(std::move(model)), device_(device), shape_(model_shape(*model_)), description_(std::move(description)) {}

std::unique_ptr<runtime::DecoderState> TorchDecodingModel::new_state() const {
  return std::make_unique<TorchDecoderState>(model_, device_);
}

void TorchDecodingModel::use_threads(int threads) const {
  if (at::get_num_threads() != threads) at::set_num_threads(threads);
}

std::vector<std::vector<double>> TorchDecodingModel::score(const std::vector<std::vector<int64_t>>& sources,
                                                           const std::vector<std::vector<int64_t>>& targets) const {
  torch::NoGradGuard no_grad;
  const int64_t b = static_cast<int64_t>(sources.size());
  std::vector<std::vector<double>> out(static_cast<size_t>(b));
  if (b == 0) return out;
  int64_t s = 1, t = 1;
  for (int64_t r = 0; r < b; ++r) {
    s = std::max<int64_t>(s, static_cast<int64_t>(sources[static_cast<size_t>(r)].size()));
    t = std::max<int64_t>(t, static_cast<int64_t>(targets[static_cast<size_t>(r)].size()) + 1);
  }
  // src: [B, S]; tgt_in: <start> y1 .. yn, [B, T]; labels: y1 .. yn <end>
  std::vector<int64_t> src(static_cast<size_t>(b * s), kPadId), tgt_in(static_cast<size_t>(b * t), kPadId);
  std::vector<int64_t> src_len(static_cast<size_t>(b)), tgt_len(static_cast<size_t>(b));
  for (int64_t r = 0; r < b; ++r) {
    const auto& x = sources[static_cast<size_t>(r)];
    const auto& y = targets[static_cast<size_t>(r)];
    std::copy(x.begin(), x.end(), src.begin() + r * s);
    tgt_in[static_cast<size_t>(r * t)] = kStartId;
    std::copy(y.begin(), y.end(), tgt_in.begin() + r * t + 1);
    // An empty source still needs one key to attend to: <end> stands in,
    // as decoding does for an empty line.
    src_len[static_cast<size_t>(r)] = std::max<int64_t>(1, static_cast<int64_t>(x.size()));
    if (x.empty()) src[static_cast<size_t>(r * s)] = kEndId;
    tgt_len[static_cast<size_t>(r)] = static_cast<int64_t>(y.size()) + 1;
  }
  const auto ids = [&](std::vector<int64_t>& v, int64_t cols) {
    return torch::tensor(v, torch::kLong).view({b, cols}).to(device_);
  };
  const torch::Tensor logits = model_->forward(ids(src, s), torch::tensor(src_len, torch::kLong).to(device_),
                                               ids(tgt_in, t), torch::tensor(tgt_len, torch::kLong).to(device_));
  const torch::Tensor logp = torch::log_softmax(logits.to(torch::kDouble), -1).cpu();  // [B, T, V]
  const auto acc = logp.accessor<double, 3>();
  for (int64_t r = 0; r < b; ++r) {
    const auto& y = targets[static_cast<size_t>(r)];
    for (size_t k = 0; k <= y.size(); ++k)
      out[static_cast<size_t>(r)].push_back(acc[r][static_cast<int64_t>(k)][k < y.size() ? y[k] : kEndId]);
  }
  return out;
}

runtime::AttentionMaps TorchDecodingModel::attention(const std::vector<int64_t>& src,
                                                     const std::vector<int64_t>& hyp) const {
  torch::NoGradGuard no_grad;
  runtime::AttentionMaps out;
  if (src.empty()) return out;
  std::vector<int64_t> tgt_in{kStartId};
  tgt_in.insert(tgt_in.end(), hyp.begin(), hyp.end());
  auto [src_t, src_len] = make_source_batch({src});
  const auto long_opts = torch::TensorOptions(torch::kLong).device(device_);
  const torch::Tensor tgt_t = torch::tensor(tgt_in, long_opts).unsqueeze(0);
  const AttentionMaps maps = model_->attention_maps(src_t.to(device_), src_len.to(device_), tgt_t,
                                                    torch::full({1}, tgt_t.size(1), long_opts));
  for (const torch::Tensor& m : maps.encoder_self) out.encoder_self.push_back(to_map(m));
  for (const torch::Tensor& m : maps.decoder_self) out.decoder_self.push_back(to_map(m));
  for (const torch::Tensor& m : maps.cross) out.cross.push_back(to_map(m));
  return out;
}

runtime::WeightSet weight_views(const Transformer& model, std::shared_ptr<const void> storage) {
  runtime::WeightSet w;
  w.storage = std::move(storage);
  const auto view = [](const std::string& name, const at::Tensor& t) {
    if (!t.device().is_cpu() || t.scalar_type() != at::kFloat || !t.is_contiguous())
      throw InputError("the runtime reads float32 weights on the CPU; " + name + " is " +
                       std::string(c10::toString(t.scalar_type())) + " on " + t.device().str());
    return runtime::TensorView{t.sizes().vec(), t.data_ptr<float>()};
  };
  for (const ParamEntry& e : parameter_table(*model)) w.tensors.emplace(e.name, view(e.name, e.tensor));
  const auto buffers = model->named_buffers();
  const at::Tensor* positions = buffers.find(kPositionsName);
  if (positions == nullptr) throw std::logic_error("weight_views: the model has no position table");
  w.tensors.emplace(kPositionsName, view(kPositionsName, *positions));
  return w;
}

void install_torch_runtime() {
  runtime::TorchSupport s;
  s.resolve_device = [](Device requested, const std::string& what) {
    return resolve_device(requested, what).is_cuda() ? Device::kCuda : Device::kCpu;
  };
  s.load_weights = [](const CheckpointFiles& files, const ModelShape& shape) {
    Transformer model = build_model(shape);
    load_model_weights(model, files.at("model.pt"), files.path("model.pt"));
    model->eval();
    // The views keep the model (their memory) alive.
    auto holder = std::make_shared<Transformer>(model);
    return weight_views(model, holder);
  };
  s.make_model = [](const CheckpointFiles& files, const Config& config, const ModelShape& shape, Device device,
                    AttentionBackend backend, ops::ComputeType type, int threads) {
    Transformer model = build_model(shape);
    load_model_weights(model, files.at("model.pt"), files.path("model.pt"));
    const c10::Device where = device == Device::kCuda ? c10::Device(c10::kCUDA) : c10::Device(c10::kCPU);
    model->to(where);
    model->eval();
    model->set_attention_backend(backend);
    set_threads(threads);
    std::string description;
    if (where.is_cuda()) {
      const bool bf16 = type == ops::ComputeType::kBf16;
      model->set_matmul_dtype(bf16 ? at::kBFloat16 : at::kFloat);
      description = std::string("LibTorch on ") + where.str() + ": " + (bf16 ? "bf16" : "float32") + ", " +
                    ops::backend_name(backend) + " attention";
    } else {
      description = "LibTorch op by op on the CPU: float32, torch attention (the reference; --attention flash or "
                    "naive runs the runtime's kernels)";
    }
    (void)config;
    return std::shared_ptr<const runtime::DecodingModel>(
        std::make_shared<TorchDecodingModel>(model, where, std::move(description)));
  };
  runtime::install_torch_support(std::move(s));
}

std::unique_ptr<runtime::Engine> training_engine(Transformer model, const c10::Device& device,
                                                 const Tokenizer& source, const Tokenizer& target,
                                                 const DecodeOptions& defaults, int threads) {
  std::shared_ptr<const runtime::DecodingModel> decoding;
  const ops::AttentionBackend backend = model->attention_backend();
  if (device.is_cpu() && backend != ops::AttentionBackend::kTorch && model->matmul_dtype() == at::kFloat) {
    runtime::CpuModelOptions o;
    o.packed = false;  // views: the weights change between evaluations
    o.naive_attention = backend == ops::AttentionBackend::kNaive;
    decoding = std::make_shared<runtime::CpuDecodingModel>(
        std::make_shared<const runtime::CpuModel>(model_shape(*model), weight_views(model), o, "the model in training"));
  } else {
    decoding = std::make_shared<TorchDecodingModel>(model, device, "LibTorch on " + device.str());
  }
  // The tokenizers are the caller's (they outlive the engine).
  const auto borrowed = [](const Tokenizer& t) { return std::shared_ptr<const Tokenizer>(&t, [](const Tokenizer*) {}); };
  return std::make_unique<runtime::Engine>(std::move(decoding), borrowed(source), borrowed(target), defaults, threads);
}

}  // namespace nmt
