/*
 * accuracy_new.cc — accuracy.c's C++ site: new_nodes makes n nodes with
 * `new` and keeps them in keep[]. A sample's first frame must be new_nodes,
 * the caller of operator new, not operator new itself (the allocator trims
 * its own frames, preload/new_delete.cc lists them).
 */
#include <cstddef>

#include "prof_prog.h"

namespace
{
struct Node {
	Node *next;
	char payload[120];
};
static_assert(sizeof(Node) == 128, "accuracy.c's NODE_SIZE");
} // namespace

extern "C" PROG_NOINLINE void *new_nodes(void **keep, size_t n)
{
	Node *prev = nullptr;
	for (size_t i = 0; i < n; i++) {
		Node *node = new Node;
		node->next = prev;
		node->payload[0] = static_cast<char>(i);
		keep[i] = node;
		prev = node;
	}
	return prev;
}
