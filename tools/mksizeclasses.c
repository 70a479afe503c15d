/*
 * mksizeclasses.c — generates the malloc size classes, src/sizeclass_table.h
 * and src/sizeclass_table.c, the way the Go runtime's mksizeclasses.go
 * generates sizeclasses.go.
 *
 *   mksizeclasses OUTDIR   write OUTDIR/sizeclass_table.h and OUTDIR/sizeclass_table.c
 *   mksizeclasses --table  print the table, one row per class, to stdout
 *
 * The generated files are committed; `build/mksizeclasses src` regenerates
 * them, and the CTest test sizeclass_generated (tools/sizeclass.cmake)
 * regenerates into the build tree and diffs, so they cannot go stale.
 *
 * The algorithm is Go's, with malloc's 16-byte minimum alignment in place of
 * Go's 8. Sizes are walked upwards in steps that grow with the size (16 up to
 * 128, then a size/8 step from each power of two, 256 from 2048), so the gap
 * between neighbouring classes, the space an object may waste inside its
 * slot, stays near 1/8 of the size. Each size gets the fewest pages whose
 * span leaves a tail of at most 1/8 unused. A size whose span has the same
 * pages and the same object count as its predecessor's replaces it: the
 * larger objects cost nothing. Last, each class grows to the largest multiple
 * of PA_SC_LARGE_DIV that still fits the same objects into the same pages.
 *
 * Every power of two from 16 to 8192 must stay a class: spans are 8 KiB
 * aligned, so an object at span_base + i * size is 2^k aligned whenever size
 * is a multiple of 2^k, and aligned allocation relies on that. Go's steps
 * never remove one (a power of two divides the page, so the next size has
 * fewer objects, and a span without tail cannot grow); the merge and grow
 * steps skip them regardless, and check_classes asserts it.
 *
 * Before writing anything the generator checks every property the malloc
 * layer relies on, and fails with a message naming the class if one breaks:
 * sizes increase in multiples of 16 up to PA_SC_MAX_SMALL, objects per span
 * fit the span's 512-object bitmaps, the lookup tables give the smallest
 * fitting class for every size, and div_magic divides exactly for every
 * offset inside a span.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

#define SC_PAGE ((uint32_t)PA_PAGE_SIZE) /* spans are runs of whole, page-aligned pages */
#define SC_MIN_ALIGN 16u    /* malloc returns 16-byte aligned memory: the first class and step */
#define SC_MAX_SMALL 32768u /* the last class (Go's maxSmallSize); larger objects are page runs */
#define SC_SMALL_MAX 1024u  /* sizes up to this look their class up by SC_SMALL_DIV bytes */
#define SC_SMALL_DIV SC_MIN_ALIGN
#define SC_LARGE_DIV 128u /* larger ones by 128: class sizes above SC_SMALL_MAX are multiples */
#define SC_MAX_OBJECTS_LIMIT 512u /* a span's per-object bitmaps hold 512 */
#define SC_MAX_CLASSES 256u       /* class numbers are uint8_t in the index tables */
#define SC_SMALL_LEN (SC_SMALL_MAX / SC_SMALL_DIV + 1)
#define SC_LARGE_LEN ((SC_MAX_SMALL - SC_SMALL_MAX) / SC_LARGE_DIV + 1)

struct sc_class {
	uint32_t size;   /* bytes per object; 0 for the unused class 0 */
	uint32_t npages; /* pages per span */
};

/* The classes, class 0 included, and the two size-to-class index tables. */
struct sc_table {
	struct sc_class c[SC_MAX_CLASSES];
	unsigned n;
	uint8_t small[SC_SMALL_LEN];
	uint8_t large[SC_LARGE_LEN];
};

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("mksizeclasses: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	exit(1);
}

static int is_pow2(uint32_t x)
{
	return x != 0 && (x & (x - 1)) == 0;
}

static uint32_t span_bytes(const struct sc_class *c)
{
	return c->npages * SC_PAGE;
}

static uint32_t objects(const struct sc_class *c)
{
	return span_bytes(c) / c->size;
}

static uint32_t tail_waste(const struct sc_class *c)
{
	return span_bytes(c) - objects(c) * c->size;
}

/* Go's divMagic: offset / size == offset * div_magic >> 32 for the offsets
 * inside a span, and the low 32 bits of the product are below div_magic
 * exactly when the offset is an object's start (pa_free's interior-pointer
 * check, span.h); check_classes proves both for every one. */
static uint32_t div_magic(const struct sc_class *c)
{
	return UINT32_MAX / c->size + 1;
}

/* The largest power of two dividing the size, capped at the page: the
 * alignment every object of the class has. */
static uint32_t min_align(const struct sc_class *c)
{
	uint32_t a = c->size & -c->size;
	return a > SC_PAGE ? SC_PAGE : a;
}

/* Go's "max waste": a span full of objects one byte larger than the previous
 * class, as a fraction of the span, tail included. */
static double max_waste(const struct sc_class *c, const struct sc_class *prev)
{
	double used_slack = (double)(c->size - prev->size - 1) * objects(c);
	return (used_slack + tail_waste(c)) / span_bytes(c);
}

static void make_classes(struct sc_table *t)
{
	t->n = 1; /* class 0 is unused */
	uint32_t align = SC_MIN_ALIGN;
	for (uint32_t size = SC_MIN_ALIGN; size <= SC_MAX_SMALL; size += align) {
		/* Go also steps from 8 to 16 at size 32; malloc starts at 16. */
		if (is_pow2(size)) {
			if (size >= 2048)
				align = 256;
			else if (size >= 128)
				align = size / 8;
		}

		/* The fewest pages whose tail waste is at most 1/8 of the span. */
		uint32_t alloc = SC_PAGE;
		while (alloc % size > alloc / 8)
			alloc += SC_PAGE;
		struct sc_class c = {size, alloc / SC_PAGE};

		struct sc_class *prev = &t->c[t->n - 1];
		if (t->n > 1 && prev->npages == c.npages && objects(prev) == objects(&c) &&
		    !is_pow2(prev->size)) {
			prev->size = size;
			continue;
		}
		if (t->n == SC_MAX_CLASSES)
			die("more than %u classes: class numbers no longer fit uint8_t",
			    SC_MAX_CLASSES - 1);
		t->c[t->n++] = c;
	}

	/* The same objects in the same pages, each as large as the span allows,
	 * kept a multiple of SC_LARGE_DIV so the large index table still works. */
	for (unsigned i = 1; i < t->n; i++) {
		struct sc_class *c = &t->c[i];
		uint32_t grown = (span_bytes(c) / objects(c)) & ~(SC_LARGE_DIV - 1);
		if (grown > c->size && !is_pow2(c->size))
			c->size = grown;
	}
}

/* The smallest class whose objects hold n bytes (class 1 for n == 0). */
static unsigned class_for(const struct sc_table *t, uint32_t n)
{
	for (unsigned i = 1; i < t->n; i++)
		if (t->c[i].size >= n)
			return i;
	die("no class holds %u bytes", n);
	return 0;
}

/* Every n in a bucket of an index table has the class of the bucket's
 * largest n, because class sizes are multiples of the bucket width. */
static void make_index(struct sc_table *t)
{
	for (uint32_t i = 0; i < SC_SMALL_LEN; i++)
		t->small[i] = (uint8_t)class_for(t, i * SC_SMALL_DIV);
	for (uint32_t i = 0; i < SC_LARGE_LEN; i++)
		t->large[i] = (uint8_t)class_for(t, SC_SMALL_MAX + i * SC_LARGE_DIV);
}

/* What pa_size_to_class in the generated header computes. */
static unsigned lookup(const struct sc_table *t, uint32_t n)
{
	if (n <= SC_SMALL_MAX)
		return t->small[(n + SC_SMALL_DIV - 1) / SC_SMALL_DIV];
	return t->large[(n - SC_SMALL_MAX + SC_LARGE_DIV - 1) / SC_LARGE_DIV];
}

/* The most objects (pages == 0) or pages (pages == 1) of any class's span. */
static uint32_t max_of(const struct sc_table *t, int pages)
{
	uint32_t m = 0;
	for (unsigned i = 1; i < t->n; i++) {
		uint32_t v = pages ? t->c[i].npages : objects(&t->c[i]);
		if (v > m)
			m = v;
	}
	return m;
}

static void check_class(const struct sc_table *t, unsigned i)
{
	const struct sc_class *c = &t->c[i], *prev = &t->c[i - 1];
	if (c->size <= prev->size)
		die("class %u: size %u does not exceed class %u's %u", i, c->size, i - 1,
		    prev->size);
	if (c->size % SC_MIN_ALIGN != 0)
		die("class %u: size %u is not a multiple of %u", i, c->size, SC_MIN_ALIGN);
	if (c->size > SC_SMALL_MAX && c->size % SC_LARGE_DIV != 0)
		die("class %u: size %u above %u is not a multiple of %u", i, c->size, SC_SMALL_MAX,
		    SC_LARGE_DIV);
	if (c->npages > UINT16_MAX || objects(c) == 0)
		die("class %u: %u pages hold %u objects of %u bytes", i, c->npages, objects(c),
		    c->size);
	if (objects(c) > SC_MAX_OBJECTS_LIMIT)
		die("class %u: %u objects per span, more than the %u a span's bitmaps hold", i,
		    objects(c), SC_MAX_OBJECTS_LIMIT);
	if (tail_waste(c) > span_bytes(c) / 8)
		die("class %u: tail waste %u is more than 1/8 of %u", i, tail_waste(c),
		    span_bytes(c));
	uint64_t magic = div_magic(c);
	for (uint64_t off = 0; off < span_bytes(c); off++)
		if ((off * magic) >> 32 != off / c->size ||
		    ((uint32_t)(off * magic) < magic) != (off % c->size == 0))
			die("class %u: div_magic %#x divides offset %u by %u wrongly", i,
			    (unsigned)magic, (unsigned)off, c->size);
}

static void check_classes(const struct sc_table *t)
{
	if (t->c[t->n - 1].size != SC_MAX_SMALL)
		die("the last class is %u bytes, not %u", t->c[t->n - 1].size, SC_MAX_SMALL);
	for (unsigned i = 1; i < t->n; i++)
		check_class(t, i);
	for (uint32_t p = SC_MIN_ALIGN; p <= SC_PAGE; p *= 2)
		if (t->c[class_for(t, p)].size != p)
			die("%u is not a class: aligned allocations of %u need it", p, p);
	for (uint32_t n = 0; n <= SC_MAX_SMALL; n++)
		if (lookup(t, n) != class_for(t, n))
			die("the index tables give class %u for %u bytes, want %u", lookup(t, n), n,
			    class_for(t, n));
}

/* ---- output ------------------------------------------------------------------ */

/* The table in Go's format, every line starting with prefix. */
static void print_table(FILE *f, const struct sc_table *t, const char *prefix)
{
	fprintf(f, "%s%5s  %8s  %10s  %7s  %10s  %9s  %9s\n", prefix, "class", "bytes/obj",
	        "bytes/span", "objects", "tail waste", "max waste", "min align");
	for (unsigned i = 1; i < t->n; i++) {
		const struct sc_class *c = &t->c[i];
		fprintf(f, "%s%5u  %8u  %10u  %7u  %10u  %8.2f%%  %9u\n", prefix, i, c->size,
		        span_bytes(c), objects(c), tail_waste(c), 100 * max_waste(c, &t->c[i - 1]),
		        min_align(c));
	}
}

/* The opening comment: what the file is, how it is made, then the table. */
static void print_banner(FILE *f, const struct sc_table *t, const char *name, const char *what)
{
	fprintf(f,
	        "/*\n"
	        " * %s — %s\n"
	        " *\n"
	        " * Generated by tools/mksizeclasses.c; do not edit. Regenerate with\n"
	        " * `build/mksizeclasses src` (the test sizeclass_generated diffs this file\n"
	        " * against a fresh run).\n"
	        " *\n"
	        " * Objects of up to PA_SC_MAX_SMALL bytes are rounded up to the smallest class\n"
	        " * that holds them (pa_size_to_class) and live in spans of `pages` pages,\n"
	        " * `objects` to a span, object i at span_base + i * size. Spans are page\n"
	        " * aligned, so every object is aligned to the largest power of two dividing\n"
	        " * its size, up to a page (min align); every power of two from 16 to 8192 is\n"
	        " * a class. tools/mksizeclasses.c says how the classes are chosen.\n"
	        " *\n"
	        " * The table is in the format of Go's sizeclasses.go: tail waste is the\n"
	        " * unused end of a span; max waste is the share of the span lost when every\n"
	        " * object is one byte larger than the class below, tail included.\n"
	        " */\n",
	        name, what);
	print_table(f, t, "// ");
	fputc('\n', f);
}

static void write_header(FILE *f, const struct sc_table *t)
{
	print_banner(f, t, "sizeclass_table.h",
	             "the malloc size classes and the size-to-class lookup.");
	fprintf(f,
	        "#ifndef PA_SIZECLASS_TABLE_H\n"
	        "#define PA_SIZECLASS_TABLE_H\n"
	        "\n"
	        "#include <stddef.h>\n"
	        "#include <stdint.h>\n"
	        "\n"
	        "#include \"hidden.h\"\n"
	        "\n"
	        "/* Classes, the unused class 0 included. */\n"
	        "#define PA_SC_NUM_CLASSES %u\n"
	        "/* The largest small object; larger ones are runs of whole pages. */\n"
	        "#define PA_SC_MAX_SMALL %u\n"
	        "/* The most objects in one span, of any class. */\n"
	        "#define PA_SC_MAX_OBJECTS %u\n"
	        "/* The most pages in one span, of any class. */\n"
	        "#define PA_SC_MAX_PAGES %u\n"
	        "\n"
	        "/* Sizes up to PA_SC_SMALL_MAX look their class up by PA_SC_SMALL_DIV bytes,\n"
	        " * larger ones by PA_SC_LARGE_DIV bytes above PA_SC_SMALL_MAX. */\n"
	        "#define PA_SC_SMALL_MAX %u\n"
	        "#define PA_SC_SMALL_DIV %u\n"
	        "#define PA_SC_LARGE_DIV %u\n"
	        "\n"
	        "struct pa_sizeclass {\n"
	        "\tuint32_t size;      /* bytes per object */\n"
	        "\tuint16_t pages;     /* pages per span */\n"
	        "\tuint16_t objects;   /* objects per span: pages * PA_PAGE_SIZE / size */\n"
	        "\tuint32_t div_magic; /* offset / size == (uint64_t)offset * div_magic >> 32 for\n"
	        "\t                       every offset in the span */\n"
	        "};\n"
	        "\n"
	        "extern const struct pa_sizeclass pa_sizeclasses[PA_SC_NUM_CLASSES] PA_HIDDEN;\n"
	        "extern const uint8_t pa_sc_index_small[PA_SC_SMALL_MAX / PA_SC_SMALL_DIV + 1] "
	        "PA_HIDDEN;\n"
	        "extern const uint8_t\n"
	        "    pa_sc_index_large[(PA_SC_MAX_SMALL - PA_SC_SMALL_MAX) / PA_SC_LARGE_DIV + 1] "
	        "PA_HIDDEN;\n"
	        "\n"
	        "/* The sizes whose class is c: lo[c] <= n < lo[c] + width[c] (class 1 from 0;\n"
	        " * class 0, large objects, none). A sized free checks its size against its\n"
	        " * block's class in one compare, n - lo[c] >= width[c] (unsigned) meaning\n"
	        " * another class; the two arrays in one object, so that one base register\n"
	        " * addresses both. */\n"
	        "struct pa_sc_sizes {\n"
	        "\tuint64_t lo[PA_SC_NUM_CLASSES];\n"
	        "\tuint64_t width[PA_SC_NUM_CLASSES];\n"
	        "};\n"
	        "extern const struct pa_sc_sizes pa_sc_sizes PA_HIDDEN;\n"
	        "\n"
	        "/* The smallest class whose objects hold n bytes, 1 <= n <= PA_SC_MAX_SMALL\n"
	        " * (n == 0 gives class 1). */\n"
	        "static inline unsigned pa_size_to_class(size_t n)\n"
	        "{\n"
	        "\tif (n <= PA_SC_SMALL_MAX)\n"
	        "\t\treturn pa_sc_index_small[(n + PA_SC_SMALL_DIV - 1) / PA_SC_SMALL_DIV];\n"
	        "\treturn pa_sc_index_large[(n - PA_SC_SMALL_MAX + PA_SC_LARGE_DIV - 1) / "
	        "PA_SC_LARGE_DIV];\n"
	        "}\n"
	        "\n"
	        "#endif\n",
	        t->n, SC_MAX_SMALL, max_of(t, 0), max_of(t, 1), SC_SMALL_MAX, SC_SMALL_DIV,
	        SC_LARGE_DIV);
}

/*
 * An index table, 16 entries to a line, each line ending in a comment with
 * the sizes it covers: entry i serves the sizes in (base + (i - 1) * div,
 * base + i * div]. The layout is clang-format's own (columns padded to their
 * widest number, comments aligned), so tools/format.sh --check passes.
 */
#define SC_INDEX_COLUMNS 16u

static void write_index(FILE *f, const char *decl, const uint8_t *v, unsigned len, uint32_t base,
                        uint32_t div)
{
	int width[SC_INDEX_COLUMNS] = {0};
	for (unsigned i = 0; i < len; i++) {
		int w = snprintf(NULL, 0, "%u", v[i]);
		if (w > width[i % SC_INDEX_COLUMNS])
			width[i % SC_INDEX_COLUMNS] = w;
	}
	fprintf(f, "%s = {\n", decl);
	for (unsigned row = 0; row < len; row += SC_INDEX_COLUMNS) {
		unsigned end = row + SC_INDEX_COLUMNS < len ? row + SC_INDEX_COLUMNS : len;
		fputs("    ", f);
		for (unsigned col = 0; col < SC_INDEX_COLUMNS; col++) {
			/* Every column but the last is followed by a space; past
			 * the end of a short row only the padding remains. */
			int pad = width[col] + (col + 1 < SC_INDEX_COLUMNS);
			if (row + col < end)
				pad -= fprintf(f, "%u", v[row + col]);
			fprintf(f, "%s%*s", row + col < end ? "," : " ", pad, "");
		}
		/* The sizes that reach this row (sizes <= base take the small
		 * table, so the large table's entry 0 serves none). */
		uint32_t lo = row == 0 && base == 0 ? 0 : base + (row == 0 ? 0 : row - 1) * div + 1;
		fprintf(f, " /* %u-%u */\n", lo, base + (end - 1) * div);
	}
	fputs("};\n", f);
}

static void write_source(FILE *f, const struct sc_table *t)
{
	print_banner(f, t, "sizeclass_table.c",
	             "the malloc size classes and the size-to-class index tables.");
	fprintf(
	    f,
	    "#include \"sizeclass_table.h\"\n"
	    "\n"
	    "#include \"layout.h\"\n"
	    "\n"
	    "_Static_assert(PA_PAGE_SIZE == %u, \"page size changed: build/mksizeclasses src\");\n"
	    "\n"
	    "const struct pa_sizeclass pa_sizeclasses[PA_SC_NUM_CLASSES] = {\n",
	    SC_PAGE);
	fputs("    [0] = {0, 0, 0, 0},\n", f);
	for (unsigned i = 1; i < t->n; i++) {
		const struct sc_class *c = &t->c[i];
		fprintf(f, "    [%u] = {%u, %u, %u, %#x},\n", i, c->size, c->npages, objects(c),
		        div_magic(c));
	}
	fputs("};\n\n", f);
	/* One class a line, [c] = {lo, width} of each array: clang-format left out. */
	fputs("// clang-format off\nconst struct pa_sc_sizes pa_sc_sizes = {\n    .lo = {\n", f);
	for (unsigned i = 0; i < t->n; i++)
		fprintf(f, "        [%u] = %u,\n", i, i <= 1 ? 0 : t->c[i - 1].size + 1);
	fputs("    },\n    .width = {\n", f);
	for (unsigned i = 0; i < t->n; i++)
		fprintf(f, "        [%u] = %u,\n", i,
		        i == 0   ? 0
		        : i == 1 ? t->c[i].size + 1
		                 : t->c[i].size - t->c[i - 1].size);
	fputs("    },\n};\n// clang-format on\n\n", f);
	write_index(f, "const uint8_t pa_sc_index_small[PA_SC_SMALL_MAX / PA_SC_SMALL_DIV + 1]",
	            t->small, SC_SMALL_LEN, 0, SC_SMALL_DIV);
	fputc('\n', f);
	write_index(f,
	            "const uint8_t pa_sc_index_large[(PA_SC_MAX_SMALL - PA_SC_SMALL_MAX) / "
	            "PA_SC_LARGE_DIV + 1]",
	            t->large, SC_LARGE_LEN, SC_SMALL_MAX, SC_LARGE_DIV);
}

static void write_file(const char *dir, const char *name, const struct sc_table *t,
                       void (*write)(FILE *, const struct sc_table *))
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
		die("%s/%s: path too long", dir, name);
	FILE *f = fopen(path, "w");
	if (f == NULL)
		die("%s: %s", path, strerror(errno));
	write(f, t);
	if (ferror(f) || fclose(f) != 0)
		die("%s: write failed: %s", path, strerror(errno));
}

int main(int argc, char **argv)
{
	if (argc != 2 || argv[1][0] == '\0')
		die("usage: mksizeclasses OUTDIR | mksizeclasses --table");

	static struct sc_table t;
	make_classes(&t);
	make_index(&t);
	check_classes(&t);

	if (strcmp(argv[1], "--table") == 0) {
		print_table(stdout, &t, "");
		printf("\n%u size classes (PA_SC_NUM_CLASSES %u with the unused class 0)\n",
		       t.n - 1, t.n);
		return 0;
	}
	write_file(argv[1], "sizeclass_table.h", &t, write_header);
	write_file(argv[1], "sizeclass_table.c", &t, write_source);
	return 0;
}
