#!/usr/bin/env bash
# tests/preload/matrix.sh — one real program, the same job run without and
# with libpagealloc-preload.so: the output must be the same, and the
# statistics report (stats_print=on) must show that the program's malloc
# was libpagealloc's.
#
#   matrix.sh JOB PRELOAD_SO [PROGRAM]
#   matrix.sh --list
#
# JOB is one of the job_* functions below (python3, perl, sqlite3, git, gxx,
# sort, sh_pipeline, make, xz, gzip, bzip2, tar, awk, find, grep, sed, du,
# diff, python3_threads, and ours: cxx_containers, threads and align_probe,
# which take the program's path as PROGRAM). Each job reads inputs that
# setup_JOB made beforehand (without the preload) and prints what it computed
# to stdout; every program it starts runs with the words of "${run[@]}" in
# front: `env` for the reference run, `env LD_PRELOAD=... PAGEALLOC_CONF=...`
# for the run on libpagealloc. Both runs happen in the same directory
# ($tmp/w, emptied in between), so paths in the output agree. Exits 77
# (skipped) when a program the job needs is missing.
#
# Also used by tools/bench-preload.sh: `matrix.sh --run JOB DIR PROGRAM
# ENV...` runs the job once in DIR with ENV in front, no comparison
# (PA_TIME_FILE: see run_job).
# The jobs quote their programs' own code in single quotes.
# shellcheck disable=SC2016
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=common.sh
. "$here/common.sh"

# ---- the jobs ------------------------------------------------------------------
# needs_JOB: the programs it needs; comms_JOB: the processes whose reports
# must show libpagealloc's heap; setup_JOB (optional): inputs into $in.

needs_python3() { echo /usr/bin/python3; }
comms_python3() { echo python3; }
job_python3() {
	"${run[@]}" /usr/bin/python3 -c '
import hashlib, json, random
rng = random.Random(20240601)
def make(depth):
    if depth == 0:
        return rng.choice([rng.random(), rng.randint(-10**9, 10**9), "s%x" % rng.getrandbits(40), None, True])
    if rng.random() < 0.5:
        return [make(depth - 1) for _ in range(rng.randint(0, 8))]
    return {"k%d" % rng.randint(0, 10**6): make(depth - 1) for _ in range(rng.randint(0, 8))}
doc = [make(5) for _ in range(60)]
text = json.dumps(doc, sort_keys=True)
again = json.loads(text)
assert again == doc
print("json bytes", len(text), hashlib.sha256(text.encode()).hexdigest())
nums = [rng.getrandbits(48) for _ in range(100000)]
nums.sort()
words = sorted("w%08x" % n for n in nums[::3])
print("sorted", nums[0], nums[50000], nums[-1], hashlib.sha256(" ".join(words).encode()).hexdigest())
d = {}
for i, n in enumerate(nums):
    d["key%d" % n] = (i, str(n) * (i % 7))
for i in range(0, 100000, 2):
    del d["key%d" % nums[i]]
h = hashlib.sha256()
for k in sorted(d):
    h.update(k.encode()); h.update(d[k][1].encode())
print("dict", len(d), h.hexdigest())
'
}

needs_python3_threads() { echo /usr/bin/python3; }
comms_python3_threads() { echo python3; }
job_python3_threads() {
	"${run[@]}" /usr/bin/python3 -c '
import hashlib, threading
from concurrent.futures import ThreadPoolExecutor
def work(seed):
    chunks = [bytes((seed * 31 + i * 7 + j) % 251 for j in range(i % 700 + 1)) for i in range(3000)]
    table = {}
    for i, c in enumerate(chunks):
        table.setdefault(len(c) % 97, []).append(c)
    h = hashlib.sha256()
    for k in sorted(table):
        for c in table[k]:
            h.update(c)
    return seed, h.hexdigest()
with ThreadPoolExecutor(max_workers=8) as ex:
    results = list(ex.map(work, range(16)))
for seed, digest in results:
    print(seed, digest)
print("threads seen", threading.active_count())
'
}

needs_perl() { echo perl; }
comms_perl() { echo perl; }
job_perl() {
	"${run[@]}" perl -e '
		my (%h, %inv);
		for my $i (1 .. 200000) {
			my $k = "k" . ($i * 7919 % 100003);
			$h{$k} .= chr(65 + $i % 26);
			push @{ $inv{length $h{$k}} }, $k if $i % 3 == 0;
		}
		delete $h{"k" . ($_ * 13 % 100003)} for 1 .. 20000;
		my $sum = 0;
		$sum = ($sum * 31 + unpack("%32C*", $_ . $h{$_})) % 4294967291 for sort keys %h;
		printf "keys %d inv %d sum %d\n", scalar(keys %h), scalar(keys %inv), $sum;
		my @big = map { [$_, "x" x ($_ % 300)] } 1 .. 50000;
		@big = sort { length($b->[1]) <=> length($a->[1]) || $a->[0] <=> $b->[0] } @big;
		print join(",", map { $_->[0] } @big[0 .. 9]), "\n";
	'
}

needs_sqlite3() { echo sqlite3; }
comms_sqlite3() { echo sqlite3; }
setup_sqlite3() {
	{
		echo "CREATE TABLE t (id INTEGER PRIMARY KEY, grp INTEGER, name TEXT, v REAL);"
		echo "BEGIN;"
		local i
		for ((i = 1; i <= 10000; i++)); do
			echo "INSERT INTO t (grp, name, v) VALUES ($((i * 7919 % 97)), 'name-$((i * 31 % 1009))-$i', $((i % 1000)).25);"
		done
		echo "COMMIT;"
		echo "CREATE INDEX t_grp ON t (grp);"
		echo "SELECT grp, count(*), sum(v), min(name), max(length(name)) FROM t GROUP BY grp ORDER BY grp;"
		echo "SELECT a.grp, count(*) FROM t a JOIN t b ON a.id = b.id + 1 AND a.grp = b.grp GROUP BY a.grp HAVING count(*) > 0 ORDER BY 2 DESC, 1 LIMIT 5;"
		echo "UPDATE t SET name = name || '-updated' WHERE id % 3 = 0;"
		echo "DELETE FROM t WHERE id % 5 = 0;"
		echo "VACUUM;"
		echo "SELECT count(*), sum(length(name)), total(v) FROM t;"
	} >"$in/load.sql"
}
job_sqlite3() {
	"${run[@]}" sqlite3 db.sqlite <"$in/load.sql"
	"${run[@]}" sqlite3 db.sqlite 'PRAGMA integrity_check; SELECT count(DISTINCT grp) FROM t;'
}

needs_git() { echo git; }
comms_git() { echo git; }
setup_git() {
	mkdir -p "$in/files"
	local i
	for ((i = 0; i < 300; i++)); do
		seq "$i" 3 $((i * 8 + 200)) | sed "s/^/file $i line /" >"$in/files/f$i.txt"
	done
}
job_git() {
	local g=("${run[@]}" git -c user.name=Test -c user.email=test@example.org
		-c init.defaultBranch=main -c gc.auto=0)
	export GIT_CONFIG_NOSYSTEM=1 HOME=$PWD
	export GIT_AUTHOR_DATE='2024-06-01T12:00:00Z' GIT_COMMITTER_DATE='2024-06-01T12:00:00Z'
	"${g[@]}" init -q repo
	cp -r "$in/files" repo/
	cd repo
	"${g[@]}" add -A
	"${g[@]}" commit -q -m "first: 300 generated files"
	local i
	for ((i = 0; i < 300; i += 7)); do
		echo "changed $i" >>"files/f$i.txt"
	done
	"${g[@]}" rm -q files/f1.txt files/f2.txt
	"${g[@]}" commit -q -a -m "second: change every seventh, drop two"
	"${g[@]}" log --format='%H %s' --stat | tail -n 5
	"${g[@]}" diff --shortstat HEAD~1 HEAD
	"${g[@]}" gc -q
	"${g[@]}" fsck --strict --no-progress
	"${g[@]}" count-objects -v | grep -E '^(count|in-pack|packs):'
	"${g[@]}" archive --format=tar HEAD | md5sum
	"${g[@]}" log --format='%H %s'
}

needs_gxx() { echo g++; }
comms_gxx() { echo g++ cc1plus as ld prog; }
setup_gxx() {
	cat >"$in/prog.cc" <<-'EOF'
		#include <iostream>
		#include <map>
		#include <stdexcept>
		#include <string>
		#include <vector>
		static int parse(const std::string &s) {
			if (s.empty() || s[0] == 'x')
				throw std::invalid_argument("bad token '" + s + "'");
			return std::stoi(s);
		}
		int main() {
			std::map<std::string, std::vector<int>> groups;
			int bad = 0;
			for (int i = 0; i < 20000; i++) {
				std::string tok = (i % 11 == 0 ? "x" : "") + std::to_string(i * 37 % 1000);
				try {
					groups["g" + std::to_string(i % 13)].push_back(parse(tok));
				} catch (const std::invalid_argument &e) {
					bad++;
				}
			}
			long sum = 0;
			for (auto &kv : groups)
				for (int v : kv.second)
					sum += v * static_cast<long>(kv.first.size());
			std::cout << groups.size() << " groups, " << bad << " bad, sum " << sum << '\n';
		}
	EOF
}
job_gxx() {
	cp "$in/prog.cc" .
	"${run[@]}" g++ -std=c++17 -O2 -g -frandom-seed=prog -o prog prog.cc
	md5sum prog
	"${run[@]}" ./prog
}

needs_sort() { echo sort; }
comms_sort() { echo sort; }
setup_sort() {
	awk 'BEGIN { x = 12345; for (i = 0; i < 100000; i++) {
		x = (x * 1103515245 + 12345) % 2147483648
		printf "%08x,%d,line %d\n", x, x % 1000, i } }' >"$in/lines"
}
job_sort() {
	# A small buffer: sort spills to temporary files and merges them, in
	# two threads.
	"${run[@]}" sort --parallel=2 -S 1M -T . "$in/lines" | md5sum
	"${run[@]}" sort -t, -k2,2n -k1,1r "$in/lines" | md5sum
	"${run[@]}" sort -u -t, -k2,2 "$in/lines" | sed -n '1,3p'
}

# dash leaves by _exit and writes no report; its children prove that the
# preload reached them through fork and exec.
needs_sh_pipeline() { echo sh seq sort head awk sed tac tr wc; }
comms_sh_pipeline() { echo seq awk tac; }
job_sh_pipeline() {
	"${run[@]}" sh -c 'seq 1 20000 | sort -r | head -5
		seq 1 100000 | awk "{ s += \$1 } END { print s }"
		for i in 1 2 3; do echo "$i" | sed "s/^/line /"; done | tac
		x=$(seq 1 500 | tr "\n" " " | wc -c); echo "chars $x"'
}

needs_bash() { echo bash sort; }
comms_bash() { echo bash; }
job_bash() {
	"${run[@]}" bash -c 'declare -A h
		for ((i = 0; i < 20000; i++)); do h[k$((i * 7919 % 10007))]+=$((i % 10)); done
		s=0; for k in "${!h[@]}"; do s=$(( (s + ${#h[$k]} * ${#k}) % 1000003 )); done
		echo "keys ${#h[@]} sum $s"
		a=(); for ((i = 0; i < 5000; i++)); do a+=("item $i $((i * i % 97))"); done
		printf "%s\n" "${a[@]}" | sort -k3,3n -k2,2n | tail -n 2
		x=$(for i in {1..200}; do echo "$i"; done | (while read -r n; do echo $((n * 2)); done) | tail -n 1)
		echo "subshell $x"'
}

needs_make() { echo make; }
comms_make() { echo make; }
setup_make() {
	{
		printf 'parts := $(addsuffix .part,$(addprefix p,$(shell seq 1 40)))\n'
		printf 'all: total\n'
		printf 'p%%.part:\n\t@seq 1 $* | awk '"'"'{ s += $$1 } END { print "$*", s }'"'"' > $@\n'
		printf 'total: $(parts)\n\t@cat $(sort $(parts)) | sort -n > $@\n'
		printf 'sub:\n\t@$(MAKE) --no-print-directory -f $(firstword $(MAKEFILE_LIST)) total\n'
	} >"$in/Makefile"
}
job_make() {
	"${run[@]}" make -s -j2 -f "$in/Makefile" sub
	md5sum total
	head -n 3 total
}

needs_xz() { echo xz; }
comms_xz() { echo xz; }
setup_xz() { setup_sort; }
job_xz() {
	"${run[@]}" xz -T2 --block-size=1MiB -6 -c "$in/lines" >lines.xz
	md5sum lines.xz
	"${run[@]}" xz -d -c lines.xz | md5sum
	"${run[@]}" xz -l lines.xz | tail -n 1
}

needs_gzip() { echo gzip; }
comms_gzip() { echo gzip; }
setup_gzip() { setup_sort; }
job_gzip() {
	"${run[@]}" gzip -9 -n -c "$in/lines" >lines.gz
	md5sum lines.gz
	"${run[@]}" gzip -d -c lines.gz | md5sum
}

needs_bzip2() { echo bzip2; }
comms_bzip2() { echo bzip2; }
setup_bzip2() { setup_sort; }
job_bzip2() {
	"${run[@]}" bzip2 -9 -c "$in/lines" >lines.bz2
	md5sum lines.bz2
	"${run[@]}" bzip2 -d -c lines.bz2 | md5sum
}

needs_tar() { echo tar; }
comms_tar() { echo tar; }
setup_tar() { setup_git; }
job_tar() {
	"${run[@]}" tar --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner \
		-C "$in" -cf files.tar files
	md5sum files.tar
	"${run[@]}" tar -tvf files.tar | sed -n '1,3p'
	mkdir out
	"${run[@]}" tar -C out -xf files.tar
	cat out/files/* | md5sum
}

needs_awk() { echo mawk; }
comms_awk() { echo mawk; }
setup_awk() { setup_sort; }
job_awk() {
	# Associative arrays, split, sprintf, string concatenation.
	"${run[@]}" mawk -F, '{ n[$2]++; s[$2] = s[$2] substr($1, 1, 2); t += length($3) }
		END { for (k in n) printf "%s %d %d\n", k, n[k], length(s[k]); print "total", t }' \
		"$in/lines" | sort -n | md5sum
	"${run[@]}" mawk '{ split($0, a, ","); w[a[1] % 7 ""] = w[a[1] % 7 ""] " " a[2] }
		END { for (k in w) print k, length(w[k]) }' "$in/lines" | sort
}

needs_find() { echo find; }
comms_find() { echo find; }
setup_find() { setup_git; }
job_find() {
	"${run[@]}" find "$in/files" -type f -size +1k -printf '%s %f\n' | sort | md5sum
	"${run[@]}" find "$in" -name 'f1*.txt' -newer "$in/files/f0.txt" -o -name 'f2?.txt' -print |
		sed "s|$in/||" | sort | sed -n '1,5p'
	"${run[@]}" find "$in" -type f | wc -l
}

needs_grep() { echo grep; }
comms_grep() { echo grep; }
setup_grep() {
	setup_sort
	awk 'BEGIN { for (i = 0; i < 300; i++) printf "%04x\n", i * 97 % 65536 }' >"$in/patterns"
}
job_grep() {
	"${run[@]}" grep -c -E '^[0-9a-f]{2}(ab|cd|ef)' "$in/lines"
	"${run[@]}" grep -F -f "$in/patterns" "$in/lines" | md5sum
	"${run[@]}" grep -o -P '(?<=,)[0-9]{3}(?=,line 9)' "$in/lines" | sort | uniq -c | sort -rn | sed -n '1,3p'
}

needs_sed() { echo sed; }
comms_sed() { echo sed; }
setup_sed() { setup_sort; }
job_sed() {
	"${run[@]}" sed -E 's/^([0-9a-f]{4})([0-9a-f]{4}),([0-9]+),(.*)$/\4 \3 \2\1/; /5 [0-9]+ a/d' \
		"$in/lines" | md5sum
	"${run[@]}" sed -n '$=' "$in/lines"
}

needs_du() { echo du; }
comms_du() { echo du; }
setup_du() { setup_git; }
job_du() {
	"${run[@]}" du -a -b "$in/files" | sed "s|$in/||" | sort -k2 | md5sum
	"${run[@]}" du -s -b "$in/files" | cut -f1
}

needs_diff() { echo diff; }
comms_diff() { echo diff; }
setup_diff() {
	setup_sort
	awk -F, 'NR % 17 != 0 { if (NR % 29 == 0) $2 = "changed"; print }' OFS=, "$in/lines" >"$in/lines2"
}
job_diff() {
	# diff exits 1 when the files differ, 2 on trouble.
	{ "${run[@]}" diff -u --label a --label b "$in/lines" "$in/lines2" || [ $? = 1 ]; } | md5sum
	"${run[@]}" diff "$in/lines" "$in/lines2" | grep -c '^[<>]' || true
}

# Ours: the program's path is the third argument.
comms_cxx_containers() { echo cxx_containers; }
job_cxx_containers() { "${run[@]}" "$program"; }
comms_threads() { echo threads; }
job_threads() { "${run[@]}" "$program"; }
# glibc's aligned-allocation answers are the version's (2.38 refuses some
# that 2.36 takes): libpagealloc gives 2.36's.
setup_align_probe() {
	[ "$(getconf GNU_LIBC_VERSION)" = "glibc 2.36" ] ||
		skip "align_probe compares with glibc 2.36, this is $(getconf GNU_LIBC_VERSION)"
}
comms_align_probe() { echo align_probe; }
job_align_probe() { "${run[@]}" "$program"; }

jobs_all() {
	declare -F | sed -n 's/^declare -f job_//p'
}

# ---- running one job -----------------------------------------------------------

# With PA_TIME_FILE set, every program the job starts runs under
# /usr/bin/time, which appends "wall user system maxrss_kib" to that file.
run_job() { # job dir env... (stdout: the job's output)
	local job=$1 dir=$2
	shift 2
	run=(env "$@")
	if [ -n "${PA_TIME_FILE:-}" ]; then
		run=(/usr/bin/time -a -o "$PA_TIME_FILE" -f '%e %U %S %M' env "$@")
	fi
	rm -rf "$dir"
	mkdir -p "$dir"
	(cd "$dir" && "job_$job")
}

if [ "${1:-}" = --list ]; then
	jobs_all
	exit 0
fi

if [ "${1:-}" = --run ]; then # --run JOB DIR PROGRAM ENV...: one run, for tools/bench-preload.sh
	job=$2 dir=$3 program=$4
	shift 4
	in=$dir.in
	if [ ! -d "$in" ]; then
		mkdir -p "$in"
		if declare -F "setup_$job" >/dev/null; then "setup_$job"; fi
	fi
	run_job "$job" "$dir/w" "$@"
	exit
fi

if [ $# -lt 2 ]; then
	sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
fi
job=$1
PA_PRELOAD=$2
program=${3:-}
declare -F "job_$job" >/dev/null || fail "no job '$job' (matrix.sh --list)"
[ -f "$PA_PRELOAD" ] || fail "no preload library at $PA_PRELOAD"
if declare -F "needs_$job" >/dev/null; then
	# shellcheck disable=SC2046
	need_programs $("needs_$job")
elif [ ! -x "$program" ]; then
	fail "job $job needs the path of its program as the third argument"
fi

make_tmp
in=$tmp/in
mkdir -p "$in" "$tmp/stats"
if declare -F "setup_$job" >/dev/null; then "setup_$job"; fi

# Each run in the background, then `wait`: a job run on the left of || would
# have errexit off (bash ignores -e there), so a failing program inside it
# would go unnoticed.
ref_status=0
run_job "$job" "$tmp/w" >"$tmp/ref.out" 2>"$tmp/ref.err" &
wait $! || ref_status=$?
mapfile -t penv < <(preload_env "$tmp/stats")
pre_status=0
run_job "$job" "$tmp/w" "${penv[@]}" >"$tmp/pre.out" 2>"$tmp/pre.err" &
wait $! || pre_status=$?

if [ $ref_status != 0 ]; then
	cat "$tmp/ref.err" >&2
	fail "$job: the reference run (without the preload) exited with $ref_status"
fi
if [ $pre_status != 0 ]; then
	echo "stderr of the run with the preload:" >&2
	head -n 40 "$tmp/pre.err" >&2
	fail "$job: the run with the preload exited with $pre_status (without it: 0)"
fi
[ -s "$tmp/ref.out" ] || fail "$job: the reference run printed nothing"
expect_same "$tmp/ref.out" "$tmp/pre.out" "$job"
if grep -q '^pagealloc: ' "$tmp/pre.err"; then
	grep '^pagealloc: ' "$tmp/pre.err" | sed -n '1,10p' >&2
	fail "$job: libpagealloc printed messages with the preload"
fi
# shellcheck disable=SC2046
stats_check "$tmp/stats" $("comms_$job")
echo "PASS: $job: $(wc -l <"$tmp/ref.out") lines the same without and with the preload;" \
	"$(find "$tmp/stats" -type f | wc -l) process(es) reported libpagealloc's heap"
