/* Unit tests for heap (placeholder until written). */
#include "tests/unit/suites.h"
Suite *heap_suite(void) { return suite_create("heap"); }
