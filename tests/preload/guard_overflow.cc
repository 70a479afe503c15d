// guard_overflow.cc — a C++ program that writes one byte past a 48-byte
// array from new[] (tests/preload/guard.sh runs it preloaded with
// guard_sample=1). It prints "pointer PTR" first, so the script can check
// the line names it.
#include <cstdio>

int main()
{
	char *volatile p = new char[48];
	std::printf("pointer %p\n", static_cast<void *>(p));
	std::fflush(stdout);
	p[48] = 1;
	delete[] p;
	return 0;
}
