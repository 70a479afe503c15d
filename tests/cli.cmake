# tests/cli.cmake — tests of the `pagealloc` command (tools/pagealloc.in,
# tools/pagealloc_*.py), included from CMakeLists.txt's tests section.
#
#   cli_draw                tools/test_pagealloc_draw.py: the canvas's PNG
#                           read back pixel for pixel (rects, Bresenham lines,
#                           the bitmap font), its SVG elements, one-line
#                           errors, read_png's filters
#   cli_serve               tools/test_pagealloc_serve.py: pagealloc serve's
#                           parameters (pid, comm, the query string, --listen)
#                           refused with their exact lines, the story's lines
#                           read into figures, the exposition's escaping, the
#                           laggards a scrape does not wait for
#   cli_usage               tools/test_pagealloc_cli.py UsageTest: each usage
#                           error one exact line, then the usage, status 2;
#                           help CMD is CMD --help; version
#   cli_run                 RunTest: run's PAGEALLOC_CONF and LD_PRELOAD, exit
#                           statuses 3, 127, 128+N with the signal's line,
#                           SIGPIPE at its default, signals to the command
#                           alone ignored, Ctrl-C kills CMD only, --map's files
#   cli_timeline            TimelineTest: run --timeline of live_target: rows,
#                           exact heap_alloc growth between its readies, the
#                           plot's PNG and `pagealloc plot`'s SVG
add_test(NAME cli_draw COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/test_pagealloc_draw.py)
set_tests_properties(cli_draw PROPERTIES TIMEOUT 120 LABELS cli)
add_test(NAME cli_serve COMMAND /usr/bin/python3 -S
	${PROJECT_SOURCE_DIR}/tools/test_pagealloc_serve.py)
set_tests_properties(cli_serve PROPERTIES TIMEOUT 120 LABELS cli)

# The command and live_target come with the preload library (tests/preload.cmake).
if(TARGET live_target AND EXISTS ${PROJECT_SOURCE_DIR}/tools/pagealloc.in)
	foreach(case_class usage:UsageTest run:RunTest timeline:TimelineTest)
		string(REPLACE ":" ";" parts ${case_class})
		list(GET parts 0 case)
		list(GET parts 1 class)
		add_test(NAME cli_${case} COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/test_pagealloc_cli.py
			${PROJECT_BINARY_DIR}/pagealloc $<TARGET_FILE:live_target> ${class})
		set_tests_properties(cli_${case} PROPERTIES TIMEOUT 120 LABELS cli)
	endforeach()
endif()
