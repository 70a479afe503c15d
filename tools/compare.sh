#!/usr/bin/env bash
# libpagealloc against glibc, jemalloc, tcmalloc and mimalloc on whole programs
# (bench/workloads/, issue 10; how to measure: /work/shared/BENCHMARKING.md):
#
#   tools/compare.sh [--quick] [--reps N] [--cycle-reps N] [--out DIR]
#
# Every workload program (build/wl-*: plain malloc/free/new/delete, nothing of
# ours linked) runs under each allocator: glibc as it is, the others through
# LD_PRELOAD (libpagealloc: build/libpagealloc-preload.so, no stats). In each
# of N repetitions (default 5; --cycle-reps for wl-cycle alone, default N),
# workload by workload, the allocators run one after the other, the order
# rotated each repetition. /usr/bin/time gives each run's wall time, CPU time
# (user+sys) and peak RSS; each program prints its own figures and checks its
# own result (a run that exits nonzero or prints no "ok" line is a failure).
# Reported: the median of each figure, and libpagealloc's ratio to each peer
# and to the best peer (lowest median) as the median of the ratios taken
# inside each repetition; then the targets, met or missed.
#
# --quick: 1 repetition at tiny sizes (each program's --quick), a smoke run of
# well under a minute that fails if any self-check fails or no table results.
#
# Output: DIR (default bench-results/compare, --quick: bench-results/compare-quick)
# gets raw.txt (one line per run), runs/ (each run's output), traces/ (RSS
# over time of wl-cycle and wl-service), compare.md and the plots. A full run
# without --out also writes docs/compare.md and docs/compare-*.png.
# Peers are installed from Debian when missing and running as root
# (libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0), likewise time and
# gnuplot-nox; without gnuplot the plots are skipped with a note.
# Takes about 15 minutes with the defaults on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

command_line="tools/compare.sh${*:+ $*}"
reps=5
cycle_reps=
quick=0
out=

usage() {
	sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--reps | --cycle-reps | --out)
		[ $# -ge 2 ] || usage
		case $1 in
		--reps) reps=$2 ;;
		--cycle-reps) cycle_reps=$2 ;;
		--out) out=$2 ;;
		esac
		shift
		;;
	*) usage ;;
	esac
	shift
done
[ $quick = 1 ] && reps=1 && cycle_reps=1
cycle_reps=${cycle_reps:-$reps}
for n in "$reps" "$cycle_reps"; do
	case $n in '' | *[!0-9]* | 0) usage ;; esac
done
write_docs=0
if [ -z "$out" ]; then
	if [ $quick = 1 ]; then
		out=bench-results/compare-quick
	else
		out=bench-results/compare
		write_docs=1
	fi
fi
rm -rf "${out:?}/runs" "${out:?}/traces" "${out:?}/bin"
mkdir -p "$out/runs" "$out/traces"

note() { echo "compare: $*" >&2; }

libdir=/usr/lib/x86_64-linux-gnu
declare -A so=([jemalloc]=$libdir/libjemalloc.so.2 [tcmalloc]=$libdir/libtcmalloc_minimal.so.4
	[mimalloc]=$libdir/libmimalloc.so.2 [pagealloc]=build/libpagealloc-preload.so)
declare -A pkg=([glibc]=libc6 [jemalloc]=libjemalloc2 [tcmalloc]=libtcmalloc-minimal4
	[mimalloc]=libmimalloc2.0)

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

# apt_install PKG...: install what is missing, as root; 1 if something still is.
apt_install() {
	local missing=() p
	for p in "$@"; do installed "$p" || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		note "not root, not installing ${missing[*]}"
		return 1
	fi
	note "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update >/dev/null 2>&1 &&
			apt-get install -y --no-install-recommends "${missing[@]}" >/dev/null 2>&1; } ||
		{ note "could not install ${missing[*]}" && return 1; }
}

notes=()
apt_install libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 || true
[ -x /usr/bin/time ] || apt_install time || true
if [ ! -x /usr/bin/time ]; then
	note "/usr/bin/time is missing (Debian package time) and could not be installed"
	exit 1
fi
have_gnuplot=1
command -v gnuplot >/dev/null || apt_install gnuplot-nox || true
command -v gnuplot >/dev/null || {
	have_gnuplot=0
	notes+=("gnuplot could not be installed: no plots")
}

# ---- build ---------------------------------------------------------------------
# src/ may be mid-change: build what builds, and use a program or the preload
# library only if its target is up to date now (never a stale binary).
buildlog=$out/build.log
{
	cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
		cmake --build build -j "$(nproc)"
} >"$buildlog" 2>&1 || note "the full build failed (see $buildlog); building targets one by one"
workloads=(cycle seed000 service larson prodcons large small-1t small-2t cxx threads)
declare -A wl_exe=([small-1t]=wl-small [small-2t]=wl-small)
declare -A wl_args=([small-1t]=threads=1 [small-2t]=threads=2)
declare -A built=()
for w in "${workloads[@]}"; do
	exe=${wl_exe[$w]:-wl-$w}
	[ -n "${built[$exe]:-}" ] && continue
	if cmake --build build -j "$(nproc)" --target "$exe" >>"$buildlog" 2>&1; then
		built[$exe]=1
	else
		note "build/$exe did not build (see $buildlog)"
		exit 1
	fi
done
allocs=(glibc)
for p in jemalloc tcmalloc mimalloc; do
	if [ -e "${so[$p]}" ]; then
		allocs+=("$p")
	else
		notes+=("$p: ${so[$p]} missing (${pkg[$p]}): not measured")
	fi
done
# Others may rebuild build/ while this runs: run copies taken now.
mkdir -p "$out/bin"
for exe in "${!built[@]}"; do cp "build/$exe" "$out/bin/"; done
if cmake --build build -j "$(nproc)" --target pagealloc_preload >>"$buildlog" 2>&1; then
	cp build/libpagealloc-preload.so "$out/bin/"
	so[pagealloc]=$out/bin/libpagealloc-preload.so
	allocs+=(pagealloc)
else
	notes+=("pagealloc: build/libpagealloc-preload.so did not build (src/ mid-change?): not measured")
fi

version_of() {
	case $1 in
	pagealloc)
		echo "libpagealloc-preload.so, build/ of $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include preload 2>/dev/null || echo ' + uncommitted changes in src/ include/ preload/')"
		;;
	*) dpkg-query -W -f="${pkg[$1]} \${Version}" "${pkg[$1]}" 2>/dev/null || echo unknown ;;
	esac
}
for a in "${allocs[@]}"; do note "$a: $(version_of "$a")"; done

# ---- runs -------------------------------------------------------------------------
raw=$out/raw.txt
: >"$raw"
failures=0
timeout_s=$([ $quick = 1 ] && echo 30 || echo 600)

# run_one REP WORKLOAD ALLOC: one timed run, one line in raw.txt.
run_one() {
	local rep=$1 w=$2 a=$3 exe=${wl_exe[$2]:-wl-$2} base=$out/runs/$2-$3-$1
	local cmd=("$out/bin/$exe")
	[ $quick = 1 ] && cmd+=(--quick)
	case $w in cycle | service) cmd+=(--trace "$out/traces/$w-$a-$rep.txt") ;; esac
	[ -n "${wl_args[$w]:-}" ] && cmd+=("${wl_args[$w]}")
	local pre=()
	[ "$a" != glibc ] && pre=(env "LD_PRELOAD=${so[$a]}")
	local rc=0
	timeout "$timeout_s" /usr/bin/time -f '%e %U %S %M' -o "$base.time" \
		"${pre[@]}" "${cmd[@]}" >"$base.out" 2>"$base.err" || rc=$?
	local line t
	line=$(grep -m1 "^$exe ok" "$base.out" | sed "s/^$exe ok//") || true
	t=$(tail -1 "$base.time" 2>/dev/null) || true
	if [ $rc -ne 0 ] || [ -z "$line" ] || ! [[ $t =~ ^[0-9.]+\ [0-9.]+\ [0-9.]+\ [0-9]+$ ]]; then
		failures=$((failures + 1))
		note "FAILED: $w on $a (rep $rep, exit $rc): $(tail -1 "$base.err" 2>/dev/null)"
		echo "rep=$rep wl=$w alloc=$a fail=1 rc=$rc" >>"$raw"
		return
	fi
	read -r wall user sys maxrss <<<"$t"
	echo "rep=$rep wl=$w alloc=$a wall_s=$wall cpu_s=$(awk -v u="$user" -v s="$sys" \
		'BEGIN { printf "%.2f", u + s }') maxrss_mib=$(awk -v k="$maxrss" \
		'BEGIN { printf "%.1f", k / 1024 }')$line" >>"$raw"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s)
for ((r = 1; r <= reps; r++)); do
	for w in "${workloads[@]}"; do
		[ "$w" = cycle ] && [ "$r" -gt "$cycle_reps" ] && continue
		n=${#allocs[@]}
		for ((i = 0; i < n; i++)); do
			a=${allocs[$(((i + r - 1) % n))]}
			note "rep $r/$reps: wl-$w on $a"
			run_one "$r" "$w" "$a"
		done
	done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
elapsed=$(($(date +%s) - start))

# ---- tables -------------------------------------------------------------------------
# One awk program over raw.txt. Per workload and allocator, the median of each
# numeric figure; ratios are pagealloc/peer inside each repetition, medianed.
# Figures: wall_s, cpu_s, maxrss_mib from time(1); the program's keys ending
# in _s, _mib or _ratio (lower is better for all of them; not rates, _per_s).
tables() {
	awk -v allocs="${allocs[*]}" -v wls="${workloads[*]}" -v mode="$1" '
	function median(s, n, i, j, t, v) {
		n = split(s, v, " ")
		if (n == 0) return ""
		for (i = 2; i <= n; i++)
			for (j = i; j > 1 && v[j - 1] + 0 > v[j] + 0; j--) {
				t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
			}
		return n % 2 ? v[(n + 1) / 2] + 0 : (v[n / 2] + v[n / 2 + 1]) / 2
	}
	function fmt(x) {
		if (x == "") return "-"
		return x >= 100 ? sprintf("%.0f", x) : x >= 10 ? sprintf("%.1f", x) : sprintf("%.2f", x)
	}
	# the peer with the lowest median of key k on workload w
	function best(w, k, a, b, bv, m) {
		b = ""
		for (a = 1; a <= na; a++) {
			if (al[a] == "pagealloc") continue
			m = median(vals[w, k, al[a]])
			if (m != "" && (b == "" || m < bv)) { b = al[a]; bv = m }
		}
		return b
	}
	# median over repetitions of pagealloc / peer p
	function ratio(w, k, p, r, s) {
		s = ""
		for (r = 1; r <= nrep; r++)
			if (((w, k, "pagealloc", r) in byrep) && ((w, k, p, r) in byrep) &&
			    byrep[w, k, p, r] + 0 > 0)
				s = s " " byrep[w, k, "pagealloc", r] / byrep[w, k, p, r]
		return median(s)
	}
	function pct(x) { return sprintf("%+.0f%%", (x - 1) * 100) }
	{
		delete f
		for (i = 1; i <= NF; i++) {
			eq = index($i, "=")
			f[substr($i, 1, eq - 1)] = substr($i, eq + 1)
		}
		w = f["wl"]; a = f["alloc"]; r = f["rep"] + 0
		if (r > nrep) nrep = r
		if ("fail" in f) { failed[w, a]++; next }
		runs[w, a]++
		for (i = 1; i <= NF; i++) {
			k = substr($i, 1, index($i, "=") - 1)
			if (k !~ /(_s|_mib|_ratio)$/ || k ~ /_per_s$/) continue
			if (!((w, k) in haskey)) { haskey[w, k] = 1; keys[w] = keys[w] " " k }
			vals[w, k, a] = vals[w, k, a] " " f[k]
			byrep[w, k, a, r] = f[k]
		}
	}
	END {
		na = split(allocs, al, " ")
		nw = split(wls, wl, " ")
		has_pa = 0
		for (a = 1; a <= na; a++) if (al[a] == "pagealloc") has_pa = 1
		if (mode == "main") {
			split("wall_s cpu_s maxrss_mib", metric, " ")
			split("wall time (s)|CPU time, user+sys (s)|peak RSS (MiB)", title, "|")
			for (m = 1; m <= 3; m++) {
				k = metric[m]
				printf "\n### %s\n\n", title[m]
				printf "Median of the repetitions; in brackets pagealloc/peer, the median of the in-repetition ratios.\n\n"
				printf "| workload |"
				for (a = 1; a <= na; a++) printf " %s |", al[a]
				printf " best peer | pagealloc/best |\n|---|"
				for (a = 1; a <= na + 2; a++) printf "---:|"
				printf "\n"
				for (i = 1; i <= nw; i++) {
					w = wl[i]
					printf "| wl-%s |", w
					for (a = 1; a <= na; a++) {
						x = median(vals[w, k, al[a]])
						cell = fmt(x)
						if (has_pa && al[a] != "pagealloc" && x != "" && ratio(w, k, al[a]) != "")
							cell = cell " (" sprintf("%.2f", ratio(w, k, al[a])) ")"
						if ((w, al[a]) in failed) cell = cell " FAILED x" failed[w, al[a]]
						printf " %s |", cell
					}
					b = best(w, k)
					rb = has_pa && b != "" ? ratio(w, k, b) : ""
					printf " %s | %s |\n", b == "" ? "-" : b, rb == "" ? "-" : sprintf("**%.2f**", rb)
				}
			}
		} else if (mode == "detail") {
			for (i = 1; i <= nw; i++) {
				w = wl[i]
				nk = split(keys[w], kk, " ")
				any = 0
				for (j = 1; j <= nk; j++) if (kk[j] !~ /^(wall_s|cpu_s|maxrss_mib)$/) any = 1
				if (!any) continue
				printf "\n### wl-%s\n\n| figure |", w
				for (a = 1; a <= na; a++) printf " %s |", al[a]
				printf " best peer | pagealloc/best |\n|---|"
				for (a = 1; a <= na + 2; a++) printf "---:|"
				printf "\n"
				for (j = 1; j <= nk; j++) {
					k = kk[j]
					if (k ~ /^(wall_s|cpu_s|maxrss_mib)$/) continue
					printf "| %s |", k
					for (a = 1; a <= na; a++) printf " %s |", fmt(median(vals[w, k, al[a]]))
					b = best(w, k)
					rb = has_pa && b != "" ? ratio(w, k, b) : ""
					printf " %s | %s |\n", b == "" ? "-" : b, rb == "" ? "-" : sprintf("%.2f", rb)
				}
			}
		} else if (mode == "targets") {
			if (!has_pa) { print "- pagealloc was not measured: no target can be judged."; exit }
			met = 0; missed = 0
			for (i = 1; i <= nw; i++) {
				w = wl[i]
				if ((w, "pagealloc") in failed) {
					printf "- wl-%s: **FAILED** on pagealloc (%d run(s)); see runs/\n", w, failed[w, "pagealloc"]
					missed++
					continue
				}
				b = best(w, "wall_s"); rb = ratio(w, "wall_s", b)
				if (rb != "") {
					ok = rb <= 1.1
					printf "- wl-%s time: pagealloc/%s = %.2f (target <= 1.10): %s\n", w, b, rb,
						ok ? "met" : "**missed** by " pct(rb / 1.1)
					ok ? met++ : missed++
				}
				b = best(w, "maxrss_mib"); rb = ratio(w, "maxrss_mib", b)
				if (rb != "") {
					ok = rb <= 1.0
					printf "- wl-%s peak RSS: pagealloc %s MiB, best peer %s %s MiB, ratio %.2f (target <= 1.00): %s\n",
						w, fmt(median(vals[w, "maxrss_mib", "pagealloc"])), b,
						fmt(median(vals[w, "maxrss_mib", b])), rb, ok ? "met" : "**missed** by " pct(rb)
					ok ? met++ : missed++
				}
			}
			nk = split(keys["cycle"], kk, " ")
			for (j = 1; j <= nk; j++) {
				if (kk[j] !~ /^pause[0-9]+_ratio$/) continue
				x = median(vals["cycle", kk[j], "pagealloc"])
				if (x == "") continue
				ok = x <= 1.25
				printf "- wl-cycle %s (RSS/live at the end of the pause after free phase %s): pagealloc %.2f (target <= 1.25): %s\n",
					kk[j], substr(kk[j], 6, index(kk[j], "_") - 6), x, ok ? "met" : "**missed** by " pct(x / 1.25)
				ok ? met++ : missed++
			}
			nk = split(keys["seed000"], kk, " ")
			for (j = 1; j <= nk; j++) {
				if (kk[j] !~ /^step[0-9]+_mib$/) continue
				x = median(vals["seed000", kk[j], "pagealloc"])
				g = median(vals["seed000", kk[j], "glibc"])
				if (x == "" || g == "") continue
				ok = x <= g
				printf "- wl-seed000 %s: pagealloc %.2f MiB, glibc %.2f MiB (target <= glibc): %s\n",
					kk[j], x, g, ok ? "met" : "**missed** by " sprintf("%.2f MiB (%s)", x - g, pct(x / g))
				ok ? met++ : missed++
			}
			printf "\n**%d target(s) met, %d missed.**\n", met, missed
		}
	}' "$raw"
}

# ---- plots ------------------------------------------------------------------------
plots=()
plot_traces() { # WORKLOAD TITLE PNG: RSS over time of repetition 1, every allocator
	local w=$1 title=$2 png=$3 series=() a f
	for a in "${allocs[@]}"; do
		f=$out/traces/$w-$a-1.txt
		[ -s "$f" ] && series+=("'$f' using (\$1/1000):(\$2/1048576) with lines lw 2 title '$a'")
	done
	[ ${#series[@]} -gt 0 ] || return 0
	f=$out/traces/$w-glibc-1.txt
	[ -s "$f" ] && series+=("'$f' using (\$1/1000):(\$3/1048576) with lines dt 2 lc rgb 'black' title 'live bytes'")
	local IFS=,
	gnuplot <<-EOF
		set terminal pngcairo size 1000,560 noenhanced
		set output '$png'
		set title '$title'
		set xlabel 'time (s)'
		set ylabel 'RSS (MiB)'
		set key outside right
		set grid
		plot ${series[*]}
	EOF
	plots+=("$png")
}
plot_ratios() { # PNG: pagealloc / best peer per workload, time and peak RSS
	local png=$1 data=$out/ratios.dat
	tables main | awk '
		/^### / { m++ }
		/^\| wl-/ { gsub(/\*/, ""); n = split($0, c, "|"); v[m, $2] = c[n - 1] + 0; if (m == 1) order[++nw] = $2 }
		END { for (i = 1; i <= nw; i++) { w = order[i]; gsub(/ /, "", w); printf "%s %s %s\n", w, v[1, order[i]], v[3, order[i]] } }' >"$data"
	[ -s "$data" ] || return 0
	gnuplot <<-EOF
		set terminal pngcairo size 1000,480 noenhanced
		set output '$png'
		set title 'pagealloc / best peer (median of in-repetition ratios; below 1 is better)'
		set style data histograms
		set style histogram clustered gap 1
		set style fill solid 0.8
		set xtics rotate by -30
		set grid ytics
		set yrange [0:*]
		plot '$data' using 2:xtic(1) title 'wall time', '' using 3 title 'peak RSS', 1.1 with lines dt 2 lc rgb 'red' title 'time target 1.1', 1 with lines dt 3 lc rgb 'black' title 'RSS target 1.0'
	EOF
	plots+=("$png")
}
if [ $have_gnuplot = 1 ]; then
	plot_traces cycle "wl-cycle: RSS over time (repetition 1)" "$out/compare-cycle.png" ||
		notes+=("gnuplot failed on the wl-cycle plot")
	plot_traces service "wl-service: RSS over time (repetition 1)" "$out/compare-service.png" ||
		notes+=("gnuplot failed on the wl-service plot")
	if [[ " ${allocs[*]} " == *" pagealloc "* ]]; then
		plot_ratios "$out/compare-ratios.png" || notes+=("gnuplot failed on the ratio plot")
	fi
fi

# ---- report -------------------------------------------------------------------------
report=$out/compare.md
{
	echo "# libpagealloc and its peers on whole programs"
	echo
	echo "Generated by \`$command_line\` ($(basename "$0"), $elapsed s of runs); rerun it to regenerate."
	echo "Workloads: bench/workloads/ (each file's opening comment says what it does)."
	echo
	echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
	echo "- machine: nproc $(nproc), $(lscpu | awk -F: '/Model name/ { gsub(/^ +/, "", $2); print $2; exit }'), $(awk '/MemTotal/ { printf "%.0f GiB RAM", $2 / 1048576 }' /proc/meminfo), kernel $(uname -r)"
	echo "- compiler: $(cc --version | head -1)"
	echo "- repetitions: $reps$([ "$cycle_reps" != "$reps" ] && echo " (wl-cycle: $cycle_reps)")$([ $quick = 1 ] && echo ', --quick sizes')"
	echo "- load average (1, 5, 15 min) before: $load_before; after: $load_after"
	for a in "${allocs[@]}"; do echo "- $a: $(version_of "$a")$([ "$a" != glibc ] && echo " (LD_PRELOAD=${so[$a]})")"; done
	for n in "${notes[@]}"; do echo "- note: $n"; done
	[ $failures -gt 0 ] && echo "- **$failures run(s) FAILED** (exit status or self-check): see $out/runs/"
	echo
	echo "## Targets"
	echo
	echo "pagealloc's median wall time <= 1.1x the best peer's and its peak RSS <= the best peer's,"
	echo "for every workload; wl-cycle RSS/live <= 1.25 at the end of each 5 s pause after a free"
	echo "phase; wl-seed000 RSS <= glibc's at every step. Ratios: median of in-repetition ratios."
	echo
	tables targets
	echo
	echo "Why each missed target is missed (profiled), what was tried, and what would close it:"
	echo "docs/design.md (What is not done yet), with the measurements in docs/benchmarks.md"
	echo "sections 7-10. Single runs on this shared 2-vCPU VM move by 5-10% and more (wl-prodcons"
	echo "is bimodal), so a ratio within that of its target can flip between runs."
	echo
	echo "## Time and memory (from /usr/bin/time)"
	tables main
	echo
	echo "## Each workload's own figures (medians; lower is better)"
	echo
	echo "wl-cycle: pauseN_ratio = RSS / live bytes at the end of pause N, settleN_s = seconds until"
	echo "RSS/live <= 1.25 (the pause length if never). wl-seed000: RSS (MiB) at each point after"
	echo "malloc_trim(0) where the allocator has one (glibc, pagealloc; not jemalloc, tcmalloc,"
	echo "mimalloc). wl-service: steady = mean RSS over the second half. wl-threads: RSS while all"
	echo "threads idle, at once (idle0) and after 2 s (idle), and after they exited (exit)."
	tables detail
	if [ ${#plots[@]} -gt 0 ]; then
		echo
		echo "## Plots"
		echo
		for p in "${plots[@]}"; do echo "![$(basename "$p" .png)]($(basename "$p"))"; done
	fi
} >"$report"
cat "$report"

if [ $write_docs = 1 ]; then
	cp "$report" docs/compare.md
	for p in "${plots[@]}"; do cp "$p" docs/; done
	note "wrote docs/compare.md$([ ${#plots[@]} -gt 0 ] && echo " and ${#plots[@]} plot(s) in docs/")"
fi

# The smoke run's checks: every self-check passed and there is a table.
if [ $failures -gt 0 ]; then
	note "$failures run(s) failed"
	exit 1
fi
if ! grep -q '^| wl-' "$report"; then
	note "no table in $report"
	exit 1
fi
