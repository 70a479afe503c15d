#include <stdlib.h>

#include "test_util.h"

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"

OPTNONE int main(void) {
    char *p = malloc(16);
    if (!p) {
        return 1;
    }
    free(p + 1);
    return 0;
}
