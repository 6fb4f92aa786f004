/* Unit tests for stacks (placeholder until written). */
#include "tests/unit/suites.h"
Suite *stacks_suite(void) { return suite_create("stacks"); }
