# tools/sizeclass.cmake — the size-class generator and its regenerate-and-diff
# test (included from CMakeLists.txt).
#
# mksizeclasses (tools/mksizeclasses.c) writes src/sizeclass_table.h and
# src/sizeclass_table.c, which are committed. After changing the generator:
#   cmake --build build --target mksizeclasses && build/mksizeclasses src
# The test sizeclass_generated runs the generator into
# ${CMAKE_BINARY_DIR}/sizeclass-regen and fails, showing the diff, when the
# committed files differ from what it writes.

# A host tool: it takes the page size from src/layout.h and links nothing.
add_executable(mksizeclasses ${PROJECT_SOURCE_DIR}/tools/mksizeclasses.c)
target_include_directories(mksizeclasses PRIVATE ${PROJECT_SOURCE_DIR}/src)

if(PA_BUILD_TESTS)
	# sh -c SCRIPT sh GENERATOR OUTDIR SRCDIR; the script has no semicolons,
	# which CMake would take for list separators.
	set(_pa_sc_script [=[
gen=$1 out=$2 src=$3
rm -rf "$out" && mkdir -p "$out" && "$gen" "$out" || exit 1
status=0
for f in sizeclass_table.h sizeclass_table.c
do
	if ! diff -u "$src/$f" "$out/$f"
	then
		echo "src/$f is not what tools/mksizeclasses.c writes: run build/mksizeclasses src" >&2
		status=1
	fi
done
exit $status
]=])
	add_test(NAME sizeclass_generated
		COMMAND sh -c "${_pa_sc_script}" sh $<TARGET_FILE:mksizeclasses>
			${CMAKE_BINARY_DIR}/sizeclass-regen ${PROJECT_SOURCE_DIR}/src)
	unset(_pa_sc_script)
endif()
