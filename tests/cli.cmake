# tests/cli.cmake — tests of the `pagealloc` command (tools/pagealloc*.py),
# included from CMakeLists.txt's tests section.
#
#   cli_draw                tools/test_pagealloc_draw.py: the canvas's PNG
#                           read back pixel for pixel (rects, Bresenham lines,
#                           the bitmap font), its SVG elements, one-line
#                           errors, read_png's filters
add_test(NAME cli_draw COMMAND python3 ${PROJECT_SOURCE_DIR}/tools/test_pagealloc_draw.py)
set_tests_properties(cli_draw PROPERTIES TIMEOUT 120 LABELS cli)
