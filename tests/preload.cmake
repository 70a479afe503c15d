# tests/preload.cmake — tests of libpagealloc-preload.so and of the installed
# package (included from CMakeLists.txt's tests section). tests/preload/ has
# the scripts and programs; each script's opening comment says what it
# checks. Every test exits 77 (skipped, with a line saying why) when a
# program it needs is not installed.
#
#   preload_JOB             tests/preload/matrix.sh: a real program (python3,
#                           perl, sqlite3, git, g++, sort, sh, bash, make, xz,
#                           gzip, bzip2, tar, mawk, find, grep, sed, du, diff)
#                           or one of ours (cxx_containers, threads, and
#                           align_probe: glibc's aligned-allocation answers)
#                           gives the same output with and without the
#                           preload, and its heap report (stats_print=on)
#                           proves malloc was ours
#   preload_fork_deadlock_exit, preload_fork_deadlock__exit
#                           fork_deadlock.c: 2000 forks while four threads are
#                           inside malloc; children leave by exit or _exit
#   preload_bad_CASE        bad_pointer.c through the real entry points: one
#                           "pagealloc: FUNC(PTR): FAULT" line, PTR the pointer
#                           the program passed and FAULT the case's text
#                           (bad_pointer.sh's table), then SIGABRT
#   preload_thread_stats    thread_stats.c: pa_thread_stats through the preload
#                           (a weak reference) counts the C library's names
#   preload_valgrind_KIND, linked_valgrind_KIND
#                           valgrind.sh: memcheck through the client requests,
#                           preloaded and linked with pa_malloc (KIND: leak,
#                           uaf, clean; only_leaks_SIZE: three leaked blocks
#                           of SIZE bytes are a program's only allocations)
#   preload_addr_limit      addr_limit.sh: under ulimit -v from 64 MiB to 64 GiB a
#                           program gets at least 95% of the heap glibc gives it
#   preload_run_command     run_command.sh: the build tree's `pagealloc run`
#   install_pkgconfig, install_cmake, install_preload
#                           install_test.sh: cmake --install into a fresh
#                           prefix, then build and run against it
#
# The library is not built under PA_SANITIZE (the sanitizer runtime owns
# malloc there), and neither are these tests.
if(NOT TARGET pagealloc_preload)
	return()
endif()
enable_language(CXX)

set(PA_PT_DIR ${PROJECT_SOURCE_DIR}/tests/preload)
set(PA_PT_PRELOAD $<TARGET_FILE:pagealloc_preload>)

function(pa_preload_test name)
	add_test(NAME ${name} COMMAND ${ARGN})
	set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120 LABELS preload)
endfunction()

# ---- our programs ----------------------------------------------------------------
add_executable(preload_threads ${PA_PT_DIR}/threads.c)
add_executable(preload_cxx_containers ${PA_PT_DIR}/cxx_containers.cc)
add_executable(preload_fork_deadlock ${PA_PT_DIR}/fork_deadlock.c)
add_executable(preload_bad_pointer ${PA_PT_DIR}/bad_pointer.c)
add_executable(preload_addr_fill ${PA_PT_DIR}/addr_fill.c)
add_executable(preload_align_probe ${PA_PT_DIR}/align_probe.c)
add_executable(preload_thread_stats ${PA_PT_DIR}/thread_stats.c)
target_include_directories(preload_thread_stats PRIVATE ${PROJECT_SOURCE_DIR}/include)
# Its delete expressions call the sized forms (clang before 19 leaves them off).
target_compile_options(preload_cxx_containers PRIVATE -fsized-deallocation)
# Plain programs on the C library's malloc, which the preload replaces.
foreach(exe preload_threads preload_cxx_containers preload_fork_deadlock preload_bad_pointer
		preload_align_probe)
	target_link_libraries(${exe} PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
endforeach()
# The matrix finds their heap reports by the program's name.
set_target_properties(preload_threads PROPERTIES OUTPUT_NAME threads
	RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/preload-tests)
set_target_properties(preload_cxx_containers PROPERTIES OUTPUT_NAME cxx_containers
	RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/preload-tests)
set_target_properties(preload_align_probe PROPERTIES OUTPUT_NAME align_probe
	RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/preload-tests)

# memcheck names a fault's file and line only where the program has debug
# information: these programs get -g whatever the build type.
foreach(kind leak uaf clean only_leaks)
	add_executable(preload_valgrind_${kind} ${PA_PT_DIR}/valgrind_${kind}.c)
	target_link_libraries(preload_valgrind_${kind} PRIVATE Threads::Threads)
	add_executable(linked_valgrind_${kind} ${PA_PT_DIR}/valgrind_${kind}.c)
	target_compile_definitions(linked_valgrind_${kind} PRIVATE PA_LINKED)
	target_link_libraries(linked_valgrind_${kind} PRIVATE pagealloc_static)
	target_compile_options(preload_valgrind_${kind} PRIVATE -g)
	target_compile_options(linked_valgrind_${kind} PRIVATE -g)
endforeach()

# ---- the matrix --------------------------------------------------------------------
execute_process(COMMAND bash ${PA_PT_DIR}/matrix.sh --list
	OUTPUT_VARIABLE PA_PT_JOBS OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
	message(FATAL_ERROR "tests/preload/matrix.sh --list failed")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PA_PT_DIR}/matrix.sh)
string(REPLACE "\n" ";" PA_PT_JOBS "${PA_PT_JOBS}")
foreach(job ${PA_PT_JOBS})
	set(program "")
	if(TARGET preload_${job})
		set(program $<TARGET_FILE:preload_${job}>)
	endif()
	pa_preload_test(preload_${job} bash ${PA_PT_DIR}/matrix.sh ${job} ${PA_PT_PRELOAD} ${program})
endforeach()

# ---- fork while threads are inside malloc ---------------------------------------
pa_preload_test(preload_fork_deadlock_exit env LD_PRELOAD=${PA_PT_PRELOAD}
	PA_EXPECT_MALLOC=libpagealloc-preload.so $<TARGET_FILE:preload_fork_deadlock> 2000 exit)
pa_preload_test(preload_fork_deadlock__exit env LD_PRELOAD=${PA_PT_PRELOAD}
	PA_EXPECT_MALLOC=libpagealloc-preload.so $<TARGET_FILE:preload_fork_deadlock> 2000 _exit)
# A hang is a child's SIGALRM death after 10 s (fork_deadlock.c); the run as a
# whole takes 55-98 s in the Debug build on a 2-core CI machine, and timed
# out at 120 s once (2026-11-29) while the other tests ran beside it.
set_tests_properties(preload_fork_deadlock_exit preload_fork_deadlock__exit PROPERTIES TIMEOUT 360)

# ---- bad pointers: case and the function the line must name ------------------------
foreach(case_func free_stack:free free_mmap:free free_static:free double_free:free
		double_free_large:free realloc_freed:realloc free_interior:free
		"delete_static:free|operator delete" "delete_sized_wrong:operator delete"
		"delete_array_sized_wrong:operator delete\\[\\]"
		"delete_aligned_sized_wrong:operator delete" "delete_sized_large_wrong:operator delete"
		"delete_sized_twice:operator delete" "delete_sized_smaller:operator delete"
		"delete_sized_large_smaller:operator delete" write_after_free:malloc)
	string(REPLACE ":" ";" parts "${case_func}")
	list(GET parts 0 case)
	list(GET parts 1 func)
	pa_preload_test(preload_bad_${case} bash ${PA_PT_DIR}/bad_pointer.sh ${PA_PT_PRELOAD}
		$<TARGET_FILE:preload_bad_pointer> ${case} "${func}")
endforeach()

# ---- the calling thread's figures, exported by the preload -------------------------
pa_preload_test(preload_thread_stats env LD_PRELOAD=${PA_PT_PRELOAD}
	PA_EXPECT_MALLOC=libpagealloc-preload.so $<TARGET_FILE:preload_thread_stats>)

# ---- valgrind memcheck -------------------------------------------------------------
foreach(kind leak uaf clean)
	pa_preload_test(preload_valgrind_${kind} bash ${PA_PT_DIR}/valgrind.sh preload
		${PA_PT_PRELOAD} $<TARGET_FILE:preload_valgrind_${kind}> ${kind})
	pa_preload_test(linked_valgrind_${kind} bash ${PA_PT_DIR}/valgrind.sh linked -
		$<TARGET_FILE:linked_valgrind_${kind}> ${kind})
endforeach()
# A small block, one of a few pages, a large one, and one over a chunk.
foreach(size 64 1000 100000 5000000)
	pa_preload_test(preload_valgrind_only_leaks_${size} bash ${PA_PT_DIR}/valgrind.sh preload
		${PA_PT_PRELOAD} $<TARGET_FILE:preload_valgrind_only_leaks> only_leaks ${size})
	pa_preload_test(linked_valgrind_only_leaks_${size} bash ${PA_PT_DIR}/valgrind.sh linked -
		$<TARGET_FILE:linked_valgrind_only_leaks> only_leaks ${size})
endforeach()

# ---- an address-space limit ------------------------------------------------------
pa_preload_test(preload_addr_limit bash ${PA_PT_DIR}/addr_limit.sh ${PA_PT_PRELOAD}
	$<TARGET_FILE:preload_addr_fill>)
# 30-51 s in CI's runs; it timed out at 120 s once (2026-11-29) beside a
# `ctest -j2` and a benchmark on the 2-vCPU machine (24.6 s alone after).
set_tests_properties(preload_addr_limit PROPERTIES TIMEOUT 360)

# ---- the pagealloc command and the installed package ------------------------------
if(EXISTS ${PROJECT_SOURCE_DIR}/tools/pagealloc.in) # configured at the end of CMakeLists.txt
	pa_preload_test(preload_run_command bash ${PA_PT_DIR}/run_command.sh
		${PROJECT_BINARY_DIR}/pagealloc)
endif()
foreach(mode pkgconfig cmake preload)
	pa_preload_test(install_${mode} bash ${PA_PT_DIR}/install_test.sh ${PROJECT_BINARY_DIR}
		${mode})
	# One at a time: `cmake --install` writes the build tree's pagealloc.pc
	# with its prefix, and two installs to different prefixes at once (ctest
	# -j2) left one reading the other's libdir.
	set_tests_properties(install_${mode} PROPERTIES RESOURCE_LOCK pa_install_tree)
endforeach()

# ---- guarded sampling: a one-byte overflow caught, C (malloc) and C++ (new[]) ----
#   preload_guard_c, preload_guard_cxx, preload_guard_run (pagealloc run --guard-all)
#                           guard.sh: with guard_sample=1 a write one byte past
#                           a block dies of SIGSEGV after one
#                           "pagealloc: heap-buffer-overflow at ..." line
#   preload_guard_freed_CASE guard_freed.sh: a guarded block read after free or
#                           delete[], or deleted with a wrong size: one line,
#                           every stack from the program's own frame
add_executable(preload_guard_c ${PA_PT_DIR}/guard_overflow.c)
# Its report symbolized (pagealloc run) names main's line: -O0 -g, every build type.
target_compile_options(preload_guard_c PRIVATE -O0 -g)
add_executable(preload_guard_cxx ${PA_PT_DIR}/guard_overflow.cc)
pa_preload_test(preload_guard_c bash ${PA_PT_DIR}/guard.sh ${PA_PT_PRELOAD}
	$<TARGET_FILE:preload_guard_c> 32)
pa_preload_test(preload_guard_cxx bash ${PA_PT_DIR}/guard.sh ${PA_PT_PRELOAD}
	$<TARGET_FILE:preload_guard_cxx> 48)
# A guarded block misused after its free (free, delete[]) or deleted with a
# wrong size: the line word for word, every stack from the program's frame.
add_executable(preload_guard_freed ${PA_PT_DIR}/guard_freed.cc)
target_compile_options(preload_guard_freed PRIVATE -fsized-deallocation)
set_target_properties(preload_guard_freed PROPERTIES OUTPUT_NAME guard_freed)
foreach(case free delete sized)
	pa_preload_test(preload_guard_freed_${case} bash ${PA_PT_DIR}/guard_freed.sh ${PA_PT_PRELOAD}
		$<TARGET_FILE:preload_guard_freed> ${case})
endforeach()
# The same through `pagealloc run --guard-all`.
pa_preload_test(preload_guard_run bash ${PA_PT_DIR}/guard.sh ${PA_PT_PRELOAD}
	$<TARGET_FILE:preload_guard_c> 32 ${PROJECT_BINARY_DIR}/pagealloc)

# ---- the live file and `pagealloc stat` -------------------------------------------
#   live_stat_figures       tests/live/stat.sh: stat, --json and --watch read
#                           live_target while it runs: exact figure changes
#                           for 8 large blocks and 1000 small ones, the story,
#                           file modes 0600/0700, the file gone at exit
#   live_stat_errors        stat.sh: this shell's pid, no such pid, planted
#                           stale files (removed), live=off, another user's pid
#   live_stat_profile       stat.sh: pagealloc profile PID -o FILE while it
#                           runs: gzip, read by go tool pprof, its 2 MiB live
#   live_stat_python3       stat.sh: python3 on the preload, read while it
#                           runs: a 10 MiB bytearray is one large object more
#                           and exactly its pages more large bytes
#   live_stat_linked        stat.sh: live_target_linked (-lpagealloc, its
#                           blocks pa_malloc's, no preload): the same exact
#                           changes as live_stat_figures
#   live_stat_static        stat.sh, the linked case: live_target linked
#                           -static with libpagealloc-preload.a (malloc is
#                           ours, no preload; live.o comes in only because
#                           malloc_names.o names it): the same changes
add_executable(live_target ${PROJECT_SOURCE_DIR}/tests/live/live_target.c)
add_executable(live_target_linked ${PROJECT_SOURCE_DIR}/tests/live/live_target.c)
target_compile_definitions(live_target_linked PRIVATE LIVE_TARGET_LINKED)
target_include_directories(live_target_linked PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(live_target_linked PRIVATE pagealloc)
foreach(case figures errors profile python3)
	pa_preload_test(live_stat_${case} bash ${PROJECT_SOURCE_DIR}/tests/live/stat.sh
		${PA_PT_PRELOAD} $<TARGET_FILE:live_target>
		${PROJECT_SOURCE_DIR}/tools/pagealloc_stat.py ${case})
endforeach()
pa_preload_test(live_stat_linked bash ${PROJECT_SOURCE_DIR}/tests/live/stat.sh
	${PA_PT_PRELOAD} $<TARGET_FILE:live_target_linked>
	${PROJECT_SOURCE_DIR}/tools/pagealloc_stat.py linked)
# A fully static program needs the C library's libc.a (libc6-dev has it).
include(CheckCSourceCompiles)
set(CMAKE_REQUIRED_LINK_OPTIONS -static)
check_c_source_compiles("int main(void) { return 0; }" PA_CAN_LINK_STATIC)
unset(CMAKE_REQUIRED_LINK_OPTIONS)
if(PA_CAN_LINK_STATIC)
	add_executable(live_target_static ${PROJECT_SOURCE_DIR}/tests/live/live_target.c)
	target_link_options(live_target_static PRIVATE -static)
	target_link_libraries(live_target_static PRIVATE pagealloc_preload_static Threads::Threads)
	pa_preload_test(live_stat_static bash ${PROJECT_SOURCE_DIR}/tests/live/stat.sh
		${PA_PT_PRELOAD} $<TARGET_FILE:live_target_static>
		${PROJECT_SOURCE_DIR}/tools/pagealloc_stat.py linked)
endif()

#   live_serve_prometheus   tests/live/serve_check.py: a real Prometheus scrapes
#                           `pagealloc serve` each second; its query API's
#                           pagealloc_heap_alloc_bytes of live_target is stat
#                           --json's exactly at each step (+2 MiB + 64000, then
#                           -1 MiB freed); the series goes after a SIGKILL
#   live_serve_pprof        go tool pprof -raw of /debug/pprof/heap?pid=N: 1 MiB
#                           live at live_target's sites; 429 within
#                           --profile-interval
#   live_serve_exposition   promtool check metrics passes; stat's heap_alloc,
#                           two nodes' series (numa_fake=2), the 64-byte class
#   live_serve_errors       each bad request a 4xx and one line (paths, pids,
#                           parameters, another user's process), still serving
foreach(case prometheus pprof exposition errors)
	pa_preload_test(live_serve_${case} /usr/bin/python3 -S
		${PROJECT_SOURCE_DIR}/tests/live/serve_check.py ${PA_PT_PRELOAD}
		$<TARGET_FILE:live_target> ${PROJECT_BINARY_DIR}/pagealloc ${case})
endforeach()

# ---- the heap map and `pagealloc map` ----------------------------------------------
#   live_map                tests/live/map_check.py: map_target holds seed 000's
#                           keep-every-512th heap; `pagealloc map PID` gives
#                           exact cells (each kept object's page a 16-byte span
#                           with 1 object of 512 in use, the large blocks' pages,
#                           the freed one cached, the freed array released)
#                           and the PNG's and SVG's pixels and rectangles of them;
#                           the map at exit (map_prefix), and through
#                           `pagealloc run --map F.svg`
add_executable(map_target ${PROJECT_SOURCE_DIR}/tests/live/map_target.c)
pa_preload_test(live_map /usr/bin/python3 -S ${PROJECT_SOURCE_DIR}/tests/live/map_check.py
	${PA_PT_PRELOAD} $<TARGET_FILE:map_target> ${PROJECT_SOURCE_DIR}/tools
	${PROJECT_BINARY_DIR}/pagealloc)
#   live_map_reader         tools/test_pagealloc_map.py: map files built from a
#                           table: read_map's records and totals, each kind's
#                           colour in the PNG's cells and the SVG's rects and
#                           tooltips, one-line errors for files that are not
#                           whole maps, the usage
pa_preload_test(live_map_reader /usr/bin/python3 -S ${PROJECT_SOURCE_DIR}/tools/test_pagealloc_map.py)

# ---- a container's memory limit: tests/container/limit.sh ----------------------------
#   container_limit_auto    cycle.c in cgroups the test makes (80 MiB): glibc's
#                           malloc and libpagealloc with no limit are killed,
#                           memory_limit=auto is not, and follows the limit
#                           lowered while it runs (skips unless root with a
#                           writable memory cgroup)
add_executable(container_cycle ${PROJECT_SOURCE_DIR}/tests/container/cycle.c)
pa_preload_test(container_limit_auto bash ${PROJECT_SOURCE_DIR}/tests/container/limit.sh
	$<TARGET_FILE:container_cycle> ${PA_PT_PRELOAD} ${PROJECT_SOURCE_DIR}/tools/pagealloc_stat.py)
