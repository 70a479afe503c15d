# bench/malloc.cmake — the malloc benchmark, built on pa_malloc and on the C
# library's malloc from one source (included at the end of CMakeLists.txt).
#
#   malloc-pairs       bench/malloc_pairs.c with bench/pa_as_malloc.h
#                      force-included: malloc/free are pa_malloc/pa_free. The
#                      target itself comes from CMakeLists.txt's bench/*.c glob
#                      (linked with pagealloc_static); seed000-frag likewise.
#   leaf-switch        bench/leaf_switch.c likewise: pa_free's frees moving
#                      between the page map's leaves.
#   malloc-pairs-libc  the same source, not linked with libpagealloc: it calls
#                      the C library's malloc, which LD_PRELOAD of jemalloc,
#                      tcmalloc or mimalloc replaces (tools/bench-malloc.sh).
#                      Always dynamically linked, even with PA_BENCH_STATIC:
#                      a static program cannot take a preloaded malloc.
if(NOT PA_BUILD_BENCH)
	return()
endif()

foreach(exe malloc-pairs leaf-switch)
	if(TARGET ${exe})
		target_compile_options(${exe} PRIVATE
			-include ${PROJECT_SOURCE_DIR}/bench/pa_as_malloc.h)
	endif()
endforeach()

add_executable(malloc-pairs-libc ${PROJECT_SOURCE_DIR}/bench/malloc_pairs.c)
target_link_libraries(malloc-pairs-libc PRIVATE Threads::Threads)

# cxx-pairs: C++ operator new + delete pairs for callgrind, each delete form
# (bench/cxx_pairs.cc); run it with LD_PRELOAD of libpagealloc-preload.so.
enable_language(CXX)
add_executable(cxx-pairs ${PROJECT_SOURCE_DIR}/bench/cxx_pairs.cc)
target_compile_options(cxx-pairs PRIVATE -fsized-deallocation) # clang before 19: off

# heap-arenas on mimalloc's heaps and jemalloc's arenas (bench/heap_arenas.c;
# heap-arenas itself, on pagealloc's heaps, comes from the bench/*.c glob),
# where Debian's libmimalloc-dev and libjemalloc-dev are installed.
find_path(PA_MIMALLOC_INCLUDE mimalloc.h)
find_library(PA_MIMALLOC_LIB NAMES mimalloc)
if(PA_MIMALLOC_INCLUDE AND PA_MIMALLOC_LIB)
	add_executable(heap-arenas-mimalloc ${PROJECT_SOURCE_DIR}/bench/heap_arenas.c)
	target_compile_definitions(heap-arenas-mimalloc PRIVATE ARENA_MIMALLOC)
	target_link_libraries(heap-arenas-mimalloc PRIVATE ${PA_MIMALLOC_LIB})
endif()
find_path(PA_JEMALLOC_INCLUDE jemalloc/jemalloc.h)
find_library(PA_JEMALLOC_LIB NAMES jemalloc)
if(PA_JEMALLOC_INCLUDE AND PA_JEMALLOC_LIB)
	add_executable(heap-arenas-jemalloc ${PROJECT_SOURCE_DIR}/bench/heap_arenas.c)
	target_compile_definitions(heap-arenas-jemalloc PRIVATE ARENA_JEMALLOC)
	target_link_libraries(heap-arenas-jemalloc PRIVATE ${PA_JEMALLOC_LIB})
endif()
