/* Unit tests for sym (placeholder until written). */
#include "tests/unit/suites.h"
Suite *sym_suite(void) { return suite_create("sym"); }
