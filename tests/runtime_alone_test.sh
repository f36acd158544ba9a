#!/usr/bin/env bash
# The runtime stands alone: examples/translate.cpp (nmt::Translator), linked
# against the shared runtime only (nmt::runtime, libnmt.so), translates a
# trained checkpoint exactly as `nmt translate` does, and neither it nor the
# library carries or loads anything of LibTorch or of the training code.
# Usage: runtime_alone_test.sh NMT_BINARY EXAMPLE_BINARY SOURCE_DIR
set -u
nmt=$1
example=$2
src=$3
. "$(dirname "$0")/lib.sh"
make_temp_dir
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
head -20 "$src/data/toy/valid.zh" >"$tmp/in.zh"

"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=30 --set train.checkpoint_dir="$tmp/run" >"$tmp/train.log" 2>&1 ||
  bad "train: $(tail -2 "$tmp/train.log")"
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/in.zh" >"$tmp/nmt.en" 2>/dev/null || bad "nmt translate failed"
"$example" "$tmp/run" <"$tmp/in.zh" >"$tmp/example.en" 2>"$tmp/example.log" || bad "example: $(tail -1 "$tmp/example.log")"
if [ "$(wc -l <"$tmp/example.en")" -eq 20 ] && cmp -s "$tmp/nmt.en" "$tmp/example.en"; then ok
else bad "the example's translations differ from nmt translate's"; fi
# Its options: a compute type and a beam, as nmt translate's flags give them.
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/in.zh" --compute-type int8 --beam 3 >"$tmp/nmt3.en" 2>/dev/null ||
  bad "nmt translate --compute-type int8 --beam 3 failed"
"$example" "$tmp/run" int8 3 <"$tmp/in.zh" >"$tmp/example3.en" 2>"$tmp/example3.log" ||
  bad "example int8 3: $(tail -1 "$tmp/example3.log")"
if [ "$(wc -l <"$tmp/example3.en")" -eq 20 ] && cmp -s "$tmp/nmt3.en" "$tmp/example3.en"; then ok
else bad "the example's int8 beam 3 differs from nmt translate --compute-type int8 --beam 3"; fi
"$example" "$tmp/run" int4 </dev/null 2>"$tmp/bad.log"
rc=$?
if [ $rc -eq 2 ] && grep -q "compute type: 'int4' is not one of: float32 | bf16 | int8 | auto" "$tmp/bad.log"; then ok
else bad "example int4: exit $rc, $(cat "$tmp/bad.log")"; fi

# No LibTorch library loaded, no LibTorch symbol asked for: the program and
# the library it loads (libnmt.so, found through ldd).
lib=$(ldd "$example" | awk '/libnmt\.so/ {print $3}')
[ -n "$lib" ] && [ -f "$lib" ] || bad "the example does not load libnmt.so: $(ldd "$example")"
torch_libs='libtorch|libc10|libcaffe2|libgomp-|libcudart|libnccl|libopencv|libavcodec'
for f in "$example" "$lib"; do
  libs=$(ldd "$f" | grep -cE "$torch_libs")
  syms=$(nm -D -C --undefined-only "$f" | grep -cE ' (at|c10|torch|caffe2)::')
  if [ "$libs" -eq 0 ] && [ "$syms" -eq 0 ]; then ok
  else bad "$(basename "$f"): $libs LibTorch libraries, $syms LibTorch symbols: $(ldd "$f" | grep -E "$torch_libs" | head -3)"; fi
done
# ... while nmt itself loads LibTorch (else the check above proves nothing).
if [ "$(ldd "$nmt" | grep -cE "$torch_libs")" -gt 0 ]; then ok; else bad "nmt loads no LibTorch library?"; fi
# The library exports its API only: nothing of the training code, the
# model's LibTorch modules or the kernels' internals.
exported=$(nm -D -C --defined-only "$lib" | grep -E ' [TDB] ' | grep -vE ' (nmt::(Translator|InputError|IoError|parse_|name_of)|typeinfo|vtable|std::)' | head -3)
if [ -z "$exported" ]; then ok; else bad "libnmt.so exports more than its API: $exported"; fi
count_libs() { ldd "$1" | grep -c '=>'; }
size_libs() { ldd "$1" | awk '/=>/ {print $3}' | xargs -r du -Lcb | tail -1 | cut -f1; }
echo "runtime alone: 20 lines identical to nmt translate (float32 greedy, int8 beam 3);" \
  "the example loads $(count_libs "$example") libraries ($(($(size_libs "$example") / 1000000)) MB)," \
  "nmt $(count_libs "$nmt") ($(($(size_libs "$nmt") / 1000000)) MB)"
summary "runtime alone"
