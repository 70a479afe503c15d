# bench/malloc.cmake — the malloc benchmark, built on pa_malloc and on the C
# library's malloc from one source (included at the end of CMakeLists.txt).
#
#   malloc-pairs       bench/malloc_pairs.c with bench/pa_as_malloc.h
#                      force-included: malloc/free are pa_malloc/pa_free. The
#                      target itself comes from CMakeLists.txt's bench/*.c glob
#                      (linked with pagealloc_static); seed000-frag likewise.
#   malloc-pairs-libc  the same source, not linked with libpagealloc: it calls
#                      the C library's malloc, which LD_PRELOAD of jemalloc,
#                      tcmalloc or mimalloc replaces (tools/bench-malloc.sh).
#                      Always dynamically linked, even with PA_BENCH_STATIC:
#                      a static program cannot take a preloaded malloc.
if(NOT PA_BUILD_BENCH)
	return()
endif()

if(TARGET malloc-pairs)
	target_compile_options(malloc-pairs PRIVATE
		-include ${PROJECT_SOURCE_DIR}/bench/pa_as_malloc.h)
endif()

add_executable(malloc-pairs-libc ${PROJECT_SOURCE_DIR}/bench/malloc_pairs.c)
target_link_libraries(malloc-pairs-libc PRIVATE Threads::Threads)

# cxx-pairs: C++ operator new + delete pairs for callgrind, each delete form
# (bench/cxx_pairs.cc); run it with LD_PRELOAD of libpagealloc-preload.so.
enable_language(CXX)
add_executable(cxx-pairs ${PROJECT_SOURCE_DIR}/bench/cxx_pairs.cc)
target_compile_options(cxx-pairs PRIVATE -fsized-deallocation) # clang before 19: off
