module github.com/libpagealloc/pagealloc

go 1.19
