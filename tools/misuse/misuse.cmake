# tools/misuse/misuse.cmake — a third-party suite of heap-misuse programs,
# kept out of this repository: GrapheneOS hardened_malloc's test/ programs
# (MIT licence), built from a checkout the user gives with
# -DPA_MISUSE_SUITE=PATH (the repository's root: PATH/test/*.c and *.cc)
# and run on the preload library by tools/misuse_suite.py, which sorts each
# program's end into caught, missed, crash (a signal with no allocator
# message) or false alarm. Without PA_MISUSE_SUITE nothing is built: the
# test command needs no network and carries no third-party source.
#
# Each program named in tools/misuse/expected.txt is copied into the build
# tree with its includes of hardened_malloc's own headers ("../util.h",
# "../include/h_malloc.h") replaced by tools/misuse/misuse.h (ours), so it
# builds against any allocator, and compiled as the suite's Makefile does
# (C23 for C, C++17 with sized deallocation), without our warnings.
#
#   misuse_default     the 30 misuse programs and 16 benign ones, default
#                      configuration: each ends as expected.txt says
#   misuse_guard_all   the same with guard_sample=1 (pagealloc run --guard-all)
#
# Included from CMakeLists.txt's test section (needs the preload library,
# so not under PA_SANITIZE).
if(NOT PA_MISUSE_SUITE OR NOT TARGET pagealloc_preload)
	return()
endif()
if(NOT EXISTS ${PA_MISUSE_SUITE}/test/double_free_small.c)
	message(FATAL_ERROR "PA_MISUSE_SUITE=${PA_MISUSE_SUITE}: no test/double_free_small.c there "
		"(a checkout of https://github.com/GrapheneOS/hardened_malloc is expected)")
endif()
enable_language(CXX)

set(PA_MU_OURS ${PROJECT_SOURCE_DIR}/tools/misuse)
set(PA_MU_OUT ${PROJECT_BINARY_DIR}/misuse-src)
file(STRINGS ${PA_MU_OURS}/expected.txt PA_MU_LINES REGEX "^[a-z]")
foreach(line ${PA_MU_LINES})
	string(REGEX MATCH "^[a-z0-9_]+" name "${line}")
	set(src "")
	foreach(ext c cc)
		if(EXISTS ${PA_MISUSE_SUITE}/test/${name}.${ext})
			set(src ${PA_MISUSE_SUITE}/test/${name}.${ext})
			set(out ${PA_MU_OUT}/${name}.${ext})
		endif()
	endforeach()
	if(src STREQUAL "")
		message(FATAL_ERROR "PA_MISUSE_SUITE: test/${name}.c or .cc is missing")
	endif()
	file(READ ${src} text)
	string(REPLACE "#include \"../util.h\"" "#include \"misuse.h\"" text "${text}")
	string(REPLACE "#include \"../include/h_malloc.h\"" "#include \"misuse.h\"" text "${text}")
	file(WRITE ${out} "${text}")
	add_executable(misuse_${name} ${out})
	target_include_directories(misuse_${name} PRIVATE ${PA_MU_OURS} ${PA_MISUSE_SUITE}/test)
	target_compile_options(misuse_${name} PRIVATE -w -O2
		$<$<COMPILE_LANGUAGE:CXX>:-std=c++17 -fsized-deallocation>)
	target_link_libraries(misuse_${name} PRIVATE Threads::Threads)
	set_target_properties(misuse_${name} PROPERTIES OUTPUT_NAME ${name}
		RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/misuse)
endforeach()

foreach(mode default guard_all)
	add_test(NAME misuse_${mode} COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/misuse_suite.py
		--dir ${PROJECT_BINARY_DIR}/misuse --preload $<TARGET_FILE:pagealloc_preload>
		--mode ${mode} --expect ${PA_MU_OURS}/expected.txt)
	set_tests_properties(misuse_${mode} PROPERTIES TIMEOUT 300)
endforeach()
