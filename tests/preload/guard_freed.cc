/*
 * guard_freed.cc — guarded blocks freed, then misused, through the preload
 * library's real entry points (tests/preload/guard_freed.sh runs it with
 * guard_sample=1). It prints "pointer PTR" first, so the script can check
 * the line names it.
 *
 *   guard_freed free     malloc(16), free, then read its first byte
 *   guard_freed delete   new char[16], delete[], then read its first byte
 *   guard_freed sized    new char (1 byte), then operator delete(p, 8)
 */
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

namespace
{
char *volatile launder;

void announce(void *p)
{
	std::printf("pointer %p\n", p);
	std::fflush(stdout);
}
} // namespace

int main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	if (std::strcmp(argv[1], "free") == 0) {
		launder = static_cast<char *>(std::malloc(16));
		announce(launder);
		std::free(launder);
		return launder[0];
	}
	if (std::strcmp(argv[1], "delete") == 0) {
		launder = new char[16];
		announce(launder);
		delete[] launder;
		return launder[0];
	}
	if (std::strcmp(argv[1], "sized") == 0) {
		launder = new char;
		announce(launder);
		::operator delete(launder, 8);
		return 0;
	}
	return 2;
}
