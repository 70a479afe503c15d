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

pa_profile_test(profile_accuracy bash ${PA_PROF_DIR}/accuracy.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_accuracy_prog>)
pa_profile_test(profile_peaks bash ${PA_PROF_DIR}/peaks.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_peaks_prog>)
pa_profile_test(profile_first_large bash ${PA_PROF_DIR}/first_large.sh ${PA_PROF_PRELOAD}
	$<TARGET_FILE:profile_first_large_prog>)
