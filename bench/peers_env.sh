#!/usr/bin/env bash
# Creates (once per machine) the virtual environment the peer benchmarks use
# and prints its python.
#   bench/peers_env.sh          the full set (bench/peers-requirements.txt):
#                               PyTorch 2.15, CTranslate2, sacreBLEU, ...
#   bench/peers_env.sh --light  without PyTorch (peers-light-requirements.txt):
#                               what the export round-trip test and the decode
#                               comparison need; seconds to install. A ready
#                               full environment serves as the light one.
#   --check                     install nothing: exit 1 unless ready.
# PyPI's torch for Linux is the CUDA build (several GB with its nvidia-*
# wheels; it runs on the CPU too), so the environments live outside any clone
# and are reused: NMT_PEERS_VENV (default ~/.cache/nmt/peers-venv) and
# NMT_PEERS_LIGHT_VENV (default ~/.cache/nmt/peers-light-venv). Re-run after a
# requirements file changes: it reinstalls only then.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
light=no check=no
for a in "$@"; do
  case $a in
    --light) light=yes ;;
    --check) check=yes ;;
    *) echo "peers_env: unknown argument '$a' (use --light, --check)" >&2; exit 2 ;;
  esac
done
full_venv=${NMT_PEERS_VENV:-$HOME/.cache/nmt/peers-venv}
light_venv=${NMT_PEERS_LIGHT_VENV:-$HOME/.cache/nmt/peers-light-venv}
stamp_of() { cat "$here/peers-light-requirements.txt" "$here/$1" | sha256sum | cut -d' ' -f1; }
full_want=$(stamp_of peers-requirements.txt)
light_want=$(stamp_of peers-light-requirements.txt)
ready() { [ -x "$1/bin/python" ] && [ "$(cat "$1/.requirements.sha256" 2>/dev/null)" = "$2" ]; }

if ready "$full_venv" "$full_want"; then echo "$full_venv/bin/python"; exit 0; fi
if [ $light = yes ] && ready "$light_venv" "$light_want"; then echo "$light_venv/bin/python"; exit 0; fi
if [ $light = yes ]; then venv=$light_venv req=peers-light-requirements.txt want=$light_want
else venv=$full_venv req=peers-requirements.txt want=$full_want; fi
[ $check = yes ] && { echo "peers_env: $venv is missing or out of date (run bench/peers_env.sh$([ $light = yes ] && echo " --light"))" >&2; exit 1; }

# pyenv's or the first python3 on PATH with venv support (3.10+).
py=${NMT_PEERS_PYTHON:-python3}
"$py" -c 'import sys, venv; sys.exit(sys.version_info < (3, 10))' ||
  { echo "peers_env: $py is older than 3.10 or lacks venv" >&2; exit 2; }
echo "peers_env: installing $req into $venv$([ $light = no ] && echo ' (torch is several GB; once per machine)')" >&2
rm -f "$venv/.requirements.sha256"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >&2
"$venv/bin/python" -m pip install -q -r "$here/$req" >&2
echo "$want" >"$venv/.requirements.sha256"
echo "$venv/bin/python"
