/* Unit tests for snap (placeholder until written). */
#include "tests/unit/suites.h"
Suite *snap_suite(void) { return suite_create("snap"); }
