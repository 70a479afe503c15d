# tests/fuzz/fuzz.cmake — the libFuzzer targets (included from CMakeLists.txt
# when PA_FUZZ is on; docs/fuzzing.md says how to run them).
#
#   fuzz_conf    tests/fuzz/fuzz_conf.c: the input is a PAGEALLOC_CONF string
#   fuzz_malloc  tests/fuzz/fuzz_malloc.c: the input is a program of malloc-
#                family calls, checked against a reference model
#
# Each links the static library, built with the sanitizers PA_SANITIZE names
# (ASan and UBSan unless said otherwise) and libFuzzer's coverage
# instrumentation; -fsanitize=fuzzer adds libFuzzer's main. The pa_ functions
# have names of their own, so the sanitizer's malloc (the harness's) and the
# allocator under test live side by side.
foreach(name fuzz_conf fuzz_malloc)
	add_executable(${name} ${PROJECT_SOURCE_DIR}/tests/fuzz/${name}.c)
	target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/src)
	target_link_libraries(${name} PRIVATE pagealloc_static)
	target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
	target_link_options(${name} PRIVATE -fsanitize=fuzzer)
endforeach()

# config.c's warnings reach stderr through os_write_stderr (msg.c, os.c):
# fuzz_conf takes them in its own __wrap_os_write_stderr to check that a
# refused entry writes exactly one line. (--wrap redirects calls between
# object files, which is how msg.c reaches os.c.)
target_link_options(fuzz_conf PRIVATE -Wl,--wrap=os_write_stderr)

# clang links the sanitizer runtimes into executables only, so the shared
# library's -z defs cannot hold in this build; the fuzzers do not need it.
set_target_properties(pagealloc PROPERTIES EXCLUDE_FROM_ALL ON)
