// A plain C interface over SentencePiece, built as its own shared module
// (libnmt_spm.so) and loaded with dlmopen into a separate link-map namespace.
//
// Why: Debian's libsentencepiece embeds a private protobuf-lite whose symbols
// collide with the system libprotobuf that LibTorch loads; linked into one
// namespace, either copy ends up calling the other's internals and the
// process crashes at start-up or on the first model load. Only ints and
// caller-owned buffers cross this boundary (each namespace has its own heap).
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Returns a handle, or null with a message in err.
void* nmt_spm_load(const char* path, char* err, int err_cap);
// The same from a model file's bytes (size of them at data).
void* nmt_spm_load_bytes(const char* data, long size, char* err, int err_cap);
void nmt_spm_free(void* handle);
// Writes up to cap ids; returns how many the text has (call again if > cap).
int nmt_spm_encode(void* handle, const char* text, int* ids, int cap);
// Writes up to cap bytes (no terminator); returns the full length.
int nmt_spm_decode(void* handle, const int* ids, int n, char* out, int cap);
int nmt_spm_id_to_piece(void* handle, int id, char* out, int cap);
// The id of a piece, or -1 when the vocabulary lacks it.
int nmt_spm_piece_to_id(void* handle, const char* piece);
int nmt_spm_vocab_size(void* handle);
// which: 0 <pad>, 1 <unk>, 2 <start> (bos), 3 <end> (eos).
int nmt_spm_special_id(void* handle, int which);
// SentencePieceTrainer::Train(args); 0 on success, else a message in err.
int nmt_spm_train(const char* args, char* err, int err_cap);

#ifdef __cplusplus
}
#endif
