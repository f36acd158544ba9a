// See spm_shim.h for why SentencePiece lives behind this C interface.
#include "tokenizer/spm_shim.h"

#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

using Processor = sentencepiece::SentencePieceProcessor;

int copy_out(const std::string& s, char* out, int cap) {
  if (out && cap > 0) std::memcpy(out, s.data(), std::min<size_t>(s.size(), cap));
  return static_cast<int>(s.size());
}

void set_error(const std::string& msg, char* err, int err_cap) {
  if (!err || err_cap <= 0) return;
  const size_t n = std::min<size_t>(msg.size(), err_cap - 1);
  std::memcpy(err, msg.data(), n);
  err[n] = '\0';
}

template <typename LoadFn>
void* load_with(LoadFn load, char* err, int err_cap) {
  auto* sp = new Processor();
  const auto status = load(*sp);
  if (!status.ok()) {
    set_error(status.ToString(), err, err_cap);
    delete sp;
    return nullptr;
  }
  return sp;
}

}  // namespace

extern "C" {

void* nmt_spm_load(const char* path, char* err, int err_cap) {
  return load_with([path](Processor& sp) { return sp.Load(path); }, err, err_cap);
}

void* nmt_spm_load_bytes(const char* data, long size, char* err, int err_cap) {
  return load_with(
      [data, size](Processor& sp) {
        return sp.LoadFromSerializedProto(absl::string_view(data, static_cast<size_t>(size)));
      },
      err, err_cap);
}

void nmt_spm_free(void* handle) { delete static_cast<Processor*>(handle); }

int nmt_spm_encode(void* handle, const char* text, int* ids, int cap) {
  std::vector<int> v;
  static_cast<Processor*>(handle)->Encode(text, &v);
  for (int i = 0; i < cap && i < static_cast<int>(v.size()); ++i) ids[i] = v[i];
  return static_cast<int>(v.size());
}

int nmt_spm_decode(void* handle, const int* ids, int n, char* out, int cap) {
  std::string s;
  static_cast<Processor*>(handle)->Decode(std::vector<int>(ids, ids + n), &s);
  return copy_out(s, out, cap);
}

int nmt_spm_id_to_piece(void* handle, int id, char* out, int cap) {
  return copy_out(static_cast<Processor*>(handle)->IdToPiece(id), out, cap);
}

int nmt_spm_piece_to_id(void* handle, const char* piece) {
  const auto* sp = static_cast<Processor*>(handle);
  // PieceToId answers the unknown piece's id for a piece it lacks.
  const int id = sp->PieceToId(piece);
  return id == sp->unk_id() && sp->IdToPiece(id) != piece ? -1 : id;
}

int nmt_spm_vocab_size(void* handle) { return static_cast<Processor*>(handle)->GetPieceSize(); }

int nmt_spm_special_id(void* handle, int which) {
  const auto* sp = static_cast<Processor*>(handle);
  switch (which) {
    case 0: return sp->pad_id();
    case 1: return sp->unk_id();
    case 2: return sp->bos_id();
    case 3: return sp->eos_id();
  }
  return -1;
}

int nmt_spm_train(const char* args, char* err, int err_cap) {
  const auto status = sentencepiece::SentencePieceTrainer::Train(args);
  if (status.ok()) return 0;
  set_error(status.ToString(), err, err_cap);
  return 1;
}

}  // extern "C"
