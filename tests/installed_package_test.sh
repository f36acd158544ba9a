#!/usr/bin/env bash
# The runtime as another project gets it: `cmake --install` into a prefix,
# examples/ configured and built out of nmt's tree with find_package(nmt),
# and the program run: it translates as `nmt translate` does, loads the
# prefix's libnmt.so and SentencePiece module, no LibTorch; and still does
# once the prefix is moved elsewhere.
# Usage: installed_package_test.sh NMT_BINARY BUILD_DIR SOURCE_DIR
set -u
nmt=$1
build=$2
src=$3
. "$(dirname "$0")/lib.sh"
make_temp_dir
tiny_config "$src" "$tmp" >"$tmp/tiny.yaml"
head -20 "$src/data/toy/valid.zh" >"$tmp/in.zh"
"$nmt" train --config "$tmp/tiny.yaml" --set train.max_steps=30 --set train.checkpoint_dir="$tmp/run" >"$tmp/train.log" 2>&1 ||
  bad "train: $(tail -2 "$tmp/train.log")"
"$nmt" translate --checkpoint "$tmp/run" --input "$tmp/in.zh" --beam 2 >"$tmp/nmt.en" 2>/dev/null || bad "nmt translate failed"

cmake --install "$build" --prefix "$tmp/prefix" >"$tmp/install.log" 2>&1 || bad "cmake --install: $(tail -3 "$tmp/install.log")"
for f in include/nmt/translator.h include/nmt/types.h include/nmt/errors.h include/nmt/export.h \
         lib/libnmt.so lib/nmt/libnmt_spm.so lib/cmake/nmt/nmtConfig.cmake lib/cmake/nmt/nmtTargets.cmake; do
  [ -e "$tmp/prefix/$f" ] && ok || bad "the install lacks $f"
done
# Nothing of the tree's private headers or of LibTorch is installed.
extra=$(find "$tmp/prefix" -type f | grep -vE '/include/nmt/(translator|types|errors|export)\.h$|/lib/libnmt\.so|/lib/nmt/libnmt_spm\.so$|/lib/cmake/nmt/' | head -3)
[ -z "$extra" ] && ok || bad "installed besides the API: $extra"

cmake -S "$src/examples" -B "$tmp/examples" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$tmp/configure.log" 2>&1 || bad "configuring examples/: $(tail -3 "$tmp/configure.log")"
cmake --build "$tmp/examples" >"$tmp/build.log" 2>&1 || bad "building examples/: $(tail -5 "$tmp/build.log")"
example=$tmp/examples/translate
translate_with() {  # translate_with OUT [ENV...]: the example on in.zh, beam 2; which SentencePiece module it loaded
  env "${@:2}" LD_DEBUG=files "$example" "$tmp/run" float32 2 <"$tmp/in.zh" >"$1" 2>"$1.log"
}
translate_with "$tmp/example.en" || bad "the example failed: $(grep -v '^ *[0-9]*:' "$tmp/example.en.log" | tail -2)"
cmp -s "$tmp/nmt.en" "$tmp/example.en" && ok || bad "the installed example translates otherwise than nmt translate"
ldd "$example" | grep -q "libnmt.so.0 => $tmp/prefix/lib/libnmt.so.0" && ok ||
  bad "libnmt.so not loaded from the prefix: $(ldd "$example" | grep libnmt)"
grep -q "file=$tmp/prefix/lib/nmt/libnmt_spm.so" "$tmp/example.en.log" && ok ||
  bad "libnmt_spm.so not loaded from the prefix: $(grep -o 'file=[^ ]*libnmt_spm[^ ]*' "$tmp/example.en.log" | head -1)"
torch=$(ldd "$example" | grep -cE 'libtorch|libc10')
[ "$torch" -eq 0 ] && ok || bad "the example loads LibTorch: $(ldd "$example" | grep -E 'libtorch|libc10' | head -2)"

# The prefix moved: its library finds its module beside itself.
mv "$tmp/prefix" "$tmp/moved"
translate_with "$tmp/moved.en" LD_LIBRARY_PATH="$tmp/moved/lib" ||
  bad "the example after the move: $(grep -v '^ *[0-9]*:' "$tmp/moved.en.log" | tail -2)"
cmp -s "$tmp/nmt.en" "$tmp/moved.en" && ok || bad "the moved install translates otherwise"
grep -q "file=$tmp/moved/lib/nmt/libnmt_spm.so" "$tmp/moved.en.log" && ok || bad "libnmt_spm.so not found in the moved prefix"
summary "installed package" "$(du -sh "$tmp/moved" | cut -f1) installed"
