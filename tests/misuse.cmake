# tests/misuse.cmake — a third-party suite of heap-misuse programs
# (tests/misuse/, from GrapheneOS hardened_malloc's test/, MIT licence:
# tests/misuse/LICENSE), built as they are and run on the preload library
# by tools/misuse_suite.py, which sorts each program's end into caught,
# missed, crash (a signal with no allocator message) or false alarm.
#
#   misuse_default     the 30 misuse programs and 16 benign ones, default
#                      configuration: each ends as tests/misuse/expected.txt
#                      says for the default mode
#   misuse_guard_all   the same with guard_sample=1 (pagealloc run --guard-all)
#
# Included from tests/preload.cmake's directory level (needs the preload
# library, so not under PA_SANITIZE).
if(NOT TARGET pagealloc_preload)
	return()
endif()
enable_language(CXX)

set(PA_MU_DIR ${PROJECT_SOURCE_DIR}/tests/misuse)
file(GLOB PA_MU_SOURCES ${PA_MU_DIR}/*.c ${PA_MU_DIR}/*.cc)
foreach(src ${PA_MU_SOURCES})
	get_filename_component(name ${src} NAME_WE)
	add_executable(misuse_${name} ${src})
	# Built as the suite builds them (its Makefile: C23 for C, C++17 with
	# sized deallocation), without our warnings: the code is theirs.
	target_compile_options(misuse_${name} PRIVATE -w -O2
		$<$<COMPILE_LANGUAGE:CXX>:-std=c++17 -fsized-deallocation>)
	target_link_libraries(misuse_${name} PRIVATE Threads::Threads)
	set_target_properties(misuse_${name} PROPERTIES OUTPUT_NAME ${name}
		RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/misuse)
endforeach()

foreach(mode default guard_all)
	add_test(NAME misuse_${mode} COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/misuse_suite.py
		--dir ${PROJECT_BINARY_DIR}/misuse --preload $<TARGET_FILE:pagealloc_preload>
		--mode ${mode} --expect ${PA_MU_DIR}/expected.txt)
	set_tests_properties(misuse_${mode} PROPERTIES TIMEOUT 300)
endforeach()
