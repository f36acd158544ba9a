# The shell tests' helpers, tiny_config among them, are in lib.sh; this name
# stays for scripts that still source it (tests/export_test.sh).
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
