# tests/profile.cmake — heap profiles read back through the real client,
# `go tool pprof` (included from CMakeLists.txt's tests section, after
# tests/preload.cmake). tests/profile/ has the scripts and the programs;
# each script's opening comment says what it checks and why its numbers
# are what they are. The programs run on libpagealloc-preload.so and reach
# pa_prof_dump through a weak reference, as a preloaded program would
# (tests/profile/prof_prog.h).
#
#   profile_accuracy        accuracy.sh: each site of accuracy.c (64-byte and
#                           100,000-byte blocks kept, 256-byte ones churned,
#                           calloc'd, grown by realloc, and C++ `new`) is
#                           estimated within 10% at prof_sample=64K (inuse
#                           and alloc, bytes and objects); `new`'s first
#                           frame is its caller; no allocator frame is a
#                           first frame
#   profile_peaks           peaks.sh: peak profiles at exactly the heights
#                           the 10%-above-the-last rule gives for a heap that
#                           grows in 1 MiB steps, none on a regrowth below the
#                           last peak; prof_interval=16M profiles at each 16
#                           MiB allocated; one final profile, the last file
#   profile_diff_base       diff_base.sh: `-diff_base A B` between two
#                           pa_prof_dump files shows grow_here's 32 MiB
#                           (within 10%) and no other function
#   profile_leak_c, profile_leak_cxx
#                           leak.sh: `pagealloc run --heap-profile DIR` names
#                           the leaking function (leak_records;
#                           store::make_nodes, the caller of new) with its
#                           40 MiB (within 10%), leaves
#                           DIR/heap.PID.SEQ.final.pb.gz and its symbolized
#                           copy .final.sym.pb.gz (same totals), ends with the
#                           `go tool pprof -http=:` line for the copy; go tool
#                           pprof -top on the copy (with and without the
#                           binary) lists the function and -O2's main, which
#                           Go 1.19's pprof cannot name from the raw profile
#   heapprof_unit           tools/test_heapprof.py: heapprof.py's decoder,
#                           encoder, reports and symbolize (python3 unittest)
#   profile_threads_fork_dlopen
#                           threads_fork.sh: four threads sample while another
#                           loops dlopen/dlclose, then forks while they churn:
#                           no deadlock; the parent's final profile has
#                           thread_work (within 10%) and no child_only; each
#                           child's has child_only and the parent's thread_work
#   profile_unwritable      unwritable.sh: with an unwritable prof_prefix the
#                           program exits 0 with one warning line per attempted
#                           file, and no file is left
#   profile_signal          signal.sh: prof_signal=SIGUSR2 and a raise write a
#                           signal profile at the next sample
#   profile_first_large     first_large.sh: a thread's first allocations,
#                           large blocks before it has a cache, are sampled
#
# go missing fails a test (tools/setup-deps.sh installs golang-go); a test
# exits 77 (skipped, with a line saying why) only when another program it
# needs is not installed. Not built under PA_SANITIZE (no preload library).
if(NOT TARGET pagealloc_preload)
	return()
endif()
enable_language(CXX)

set(PA_PROF_DIR ${PROJECT_SOURCE_DIR}/tests/profile)
set(PA_PROF_PRELOAD $<TARGET_FILE:pagealloc_preload>)

function(pa_profile_test name)
	add_test(NAME ${name} COMMAND ${ARGN})
	set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60 LABELS profile)
endfunction()

# A program on the C library's malloc, which the preload replaces. -g
# whatever the build type, so that go tool pprof names the functions;
# without frame pointers, as Debian builds: the profiler's stacks come from
# the unwind tables.
function(pa_profile_program name)
	add_executable(${name} ${ARGN})
	target_link_libraries(${name} PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
	target_compile_options(${name} PRIVATE -g -fomit-frame-pointer)
	set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY
		${PROJECT_BINARY_DIR}/profile-tests)
endfunction()

pa_profile_program(profile_accuracy_prog ${PA_PROF_DIR}/accuracy.c ${PA_PROF_DIR}/accuracy_new.cc)
pa_profile_program(profile_peaks_prog ${PA_PROF_DIR}/peaks.c)
pa_profile_program(profile_first_large_prog ${PA_PROF_DIR}/first_large.c)
pa_profile_program(profile_diff_base_prog ${PA_PROF_DIR}/diff_base.c)
pa_profile_program(profile_leak_c_prog ${PA_PROF_DIR}/leak.c)
pa_profile_program(profile_leak_cxx_prog ${PA_PROF_DIR}/leak_cxx.cc)
pa_profile_program(profile_threads_fork_prog ${PA_PROF_DIR}/threads_fork.c)
pa_profile_program(profile_signal_prog ${PA_PROF_DIR}/signal.c)

pa_profile_test(profile_accuracy bash ${PA_PROF_DIR}/accuracy.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_accuracy_prog>)
pa_profile_test(profile_peaks bash ${PA_PROF_DIR}/peaks.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_peaks_prog>)
pa_profile_test(profile_first_large bash ${PA_PROF_DIR}/first_large.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_first_large_prog>)
pa_profile_test(profile_diff_base bash ${PA_PROF_DIR}/diff_base.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_diff_base_prog>)
if(EXISTS ${PROJECT_SOURCE_DIR}/tools/pagealloc.in) # configured at the end of CMakeLists.txt
	pa_profile_test(profile_leak_c bash ${PA_PROF_DIR}/leak.sh ${PROJECT_BINARY_DIR}/pagealloc
		$<TARGET_FILE:profile_leak_c_prog> leak_records leak_records)
	pa_profile_test(profile_leak_cxx bash ${PA_PROF_DIR}/leak.sh ${PROJECT_BINARY_DIR}/pagealloc
		$<TARGET_FILE:profile_leak_cxx_prog> "store::make_nodes(int)" "store::make_nodes(int)")
endif()
pa_profile_test(heapprof_unit python3 ${PROJECT_SOURCE_DIR}/tools/test_heapprof.py)
pa_profile_test(profile_threads_fork_dlopen bash ${PA_PROF_DIR}/threads_fork.sh
	${PA_PROF_PRELOAD} $<TARGET_FILE:profile_threads_fork_prog>)
pa_profile_test(profile_unwritable bash ${PA_PROF_DIR}/unwritable.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_peaks_prog>)
pa_profile_test(profile_signal bash ${PA_PROF_DIR}/signal.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_signal_prog>)
