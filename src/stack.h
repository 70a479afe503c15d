/*
 * stack.h — the calling thread's stack, from the unwind tables, fast.
 *
 * Debian's binaries and most programs are built without frame pointers, so
 * a heap-profile sample (prof.h) walks the stack with the DWARF call-frame
 * information every x86-64 object carries in .eh_frame (for C++
 * exceptions): for each return address, the rule that gives the caller's
 * frame (its CFA, "canonical frame address": the stack pointer before the
 * call; the return address at CFA - 8; the caller's rbp saved at CFA + k,
 * or left alone). The object holding an address and its table come from
 * glibc's _dl_find_object (lock-free, no allocation: safe inside malloc,
 * while another thread is in dlopen, in a forked child); the table's
 * binary-search index (.eh_frame_hdr) gives the FDE, whose instructions
 * (and its CIE's) this file runs up to the address. The table's bytes are
 * read from the object's file (pread: nothing mapped, so a program that
 * never asks for a profile does not find the unwind tables of every
 * library its samples passed through in its RSS), or through the mapping
 * where the file is not the one mapped (stack.c).
 *
 * libgcc's _Unwind_Backtrace does the same in ~2,000 instructions a frame
 * (it tracks every register and runs every rule, each time): 4-5% of
 * wl-small's instructions at one sample per 512 KiB. Here the three rules
 * an unwind needs are cached per return address in a hashed table of
 * 64-bit words (one atomic load and store each: threads share it without a
 * lock), and so is the address where a walk ends; each entry is checked
 * against the object _dl_find_object finds for it, once per object the
 * walk passes into (~60 instructions), not per frame, and never for the
 * allocator's own, where every walk starts (stack.c). A frame seen before
 * then costs a few dozen instructions. The table starts at one page and
 * grows to 20 KiB only for a program whose samples see more return
 * addresses than that page holds.
 *
 * What is not handled ends the stack, never guesses: a CFA given by a
 * DWARF expression (signal frames, PLT entries), a CFA in a register
 * other than rsp or rbp, an address in no object or with no FDE (JIT code),
 * a return address whose rule is not "saved at CFA - 8" or is undefined
 * (the outermost frame: _start, clone), and a CFA that does not move up
 * the stack.
 *
 * C code that Go called through cgo: where the walk reaches Go's
 * runtime.asmcgocall (no unwind table: Go's code has none), it goes on into
 * the Go frames that made the call, by Go's frame pointers, once
 * asmcgocall's own instructions and the goroutine's saved state agree
 * (stack.c): a sample of malloc from C code called by Go names the Go
 * functions that called it.
 */
#ifndef PA_STACK_H
#define PA_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "hidden.h"

/* Walk the calling thread's stack from the caller of stack_capture: up to
 * max frames into pc[] (return addresses minus one: inside the call, as
 * pprof expects of a caller's frame) and fn[] (the start of each frame's
 * function, from its FDE). Returns the number of frames. */
unsigned stack_capture(uintptr_t *pc, uintptr_t *fn, unsigned max);

/* How many times, since the start, a walk looked up the object holding an
 * address (*objects) and read a rule from an unwind table rather than the
 * cache (*tables), and of those reads, how many read the object's file
 * (*from_file) rather than its mapping: for the tests. */
void stack_counts(uint64_t *objects, uint64_t *tables, uint64_t *from_file);

/* Read unwind tables from the objects' files (on, the default) or only
 * through their mappings (0): for the tests, which compare the two. */
void stack_read_files(int on);

/* The file of the object that holds pc (its link map's name: "" for the
 * main program) and its load bias in *base (pc - *base is the address
 * addr2line -e FILE takes); NULL when no object holds pc. Lock-free and
 * async-signal-safe (_dl_find_object). */
const char *stack_object(uintptr_t pc, uintptr_t *base);

/* How many entries the rule cache has now: 0 before the first capture,
 * then the small table's or the full one's (stack.c). For tests. */
size_t stack_cache_entries(void);

#endif
