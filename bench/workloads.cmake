# bench/workloads.cmake — the side-by-side workloads of tools/compare.sh
# (included at the end of CMakeLists.txt; issue 10).
#
# bench/workloads/wl_NAME.c or wl_NAME.cc becomes the program wl-NAME. They
# call plain malloc/free/new/delete and link nothing of libpagealloc (Threads
# and libdl only), so one binary runs on glibc and, with LD_PRELOAD, on
# jemalloc, tcmalloc, mimalloc and libpagealloc-preload.so. Always dynamically
# linked (a static program cannot take a preloaded malloc), and not built with
# PA_SANITIZE: a sanitizer's own malloc would stand in front of every peer's.
if(NOT PA_BUILD_BENCH OR PA_SANITIZE)
	return()
endif()

file(GLOB PA_WL_SOURCES CONFIGURE_DEPENDS
	${PROJECT_SOURCE_DIR}/bench/workloads/wl_*.c
	${PROJECT_SOURCE_DIR}/bench/workloads/wl_*.cc)
foreach(src ${PA_WL_SOURCES})
	if(src MATCHES "\\.cc$")
		enable_language(CXX)
	endif()
	get_filename_component(exe ${src} NAME_WE) # wl_cycle
	string(REPLACE "_" "-" exe ${exe})         # wl-cycle
	add_executable(${exe} ${src})
	target_link_libraries(${exe} PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
	# The compiler may drop a malloc whose result is only freed, or pair a
	# new with a delete: these programs measure exactly those calls.
	target_compile_options(${exe} PRIVATE -fno-builtin-malloc -fno-builtin-free)
endforeach()

# Not a workload: wl-large's block sequence on a model page heap (first fit
# against best fit), quoted in docs/design.md.
add_executable(model-large ${PROJECT_SOURCE_DIR}/bench/workloads/model_large.c)
