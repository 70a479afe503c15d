/*
 * leak_cxx.cc — a C++ program that leaks with `new`, for profile_leak_cxx
 * (leak.sh): under `pagealloc run --heap-profile DIR --prof-sample 64K`,
 * store::make_nodes leaks 40 MiB (160 nodes of 256 KiB, each from `new
 * Node`); everything else (strings, vectors, a map) is freed. Its first
 * frame in the profile must be store::make_nodes, the caller of operator
 * new. It writes its pid on stdout, for the final profile's name.
 *
 * make_nodes is in a namespace on purpose: Debian 12's go tool pprof (Go
 * 1.19, cmd/pprof's own DWARF reader) names a function by the DW_AT_name
 * of its DIE only, and the out-of-line DIE of a namespace or class member
 * has none (a DW_AT_specification instead), so on the raw profile it shows
 * as [profile_leak_cxx_prog]. heapprof.py (addr2line -C) names it, in the
 * leak report and in the symbolized copy (.sym.pb.gz) that go tool pprof
 * reads the names from.
 */
#include <cstdio>
#include <map>
#include <string>
#include <unistd.h>
#include <vector>

#include "prof_prog.h"

struct Node {
	Node *next;
	char body[256 * 1024 - sizeof(Node *)];
};

Node *volatile leaked; // a list the program forgets

namespace store
{

PROG_NOINLINE void make_nodes(int n)
{
	for (int i = 0; i < n; i++) {
		Node *node = new Node;
		node->next = leaked;
		node->body[0] = static_cast<char>(i);
		leaked = node;
	}
}

} // namespace store

PROG_NOINLINE size_t churn_strings()
{
	size_t sum = 0;
	for (int round = 0; round < 64; round++) {
		std::map<int, std::string> m;
		std::vector<std::vector<char>> v;
		for (int i = 0; i < 1024; i++) {
			m[i] = std::string(100 + i, 'x');
			v.emplace_back(static_cast<size_t>(1000 + i * 8), 'y');
		}
		for (auto &kv : m)
			sum += kv.second.size();
		sum += v.size();
	}
	return sum;
}

int main()
{
	size_t sum = churn_strings();
	store::make_nodes(160);
	sum += churn_strings();
	leaked = nullptr; // forgotten: 40 MiB leaked
	char line[64];
	int len = std::snprintf(line, sizeof(line), "%ld\n", static_cast<long>(getpid()));
	if (sum == 0)
		return 2;
	return write(1, line, static_cast<size_t>(len)) == len ? 0 : 1;
}
