/*
 * hidden.h — PA_HIDDEN, for the allocator's global data declared in headers.
 *
 * -fvisibility=hidden hides what a file defines, but a variable declared
 * `extern` may still live in another shared object as far as the compiler
 * knows: each access first loads its address from the GOT (an instruction
 * the linker can only turn into a lea). Declared hidden, it is one
 * PC-relative load. pa_free reads three such globals and pa_malloc one.
 */
#ifndef PA_HIDDEN_H
#define PA_HIDDEN_H

#define PA_HIDDEN __attribute__((visibility("hidden")))

#endif
