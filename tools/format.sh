#!/usr/bin/env bash
# The one formatter (.clang-format, clang-format 14 from Debian 12) over every
# C and C++ source of the tree.
#   tools/format.sh          reformat in place
#   tools/format.sh --check  change nothing; fail, naming the files, if any is off
set -euo pipefail
cd "$(dirname "$0")/.."

mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc')
if [ "${1:-}" = --check ]; then
	clang-format --dry-run --Werror "${files[@]}"
else
	clang-format -i "${files[@]}"
fi
