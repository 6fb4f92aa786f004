/* Unit tests for maps (placeholder until written). */
#include "tests/unit/suites.h"
Suite *maps_suite(void) { return suite_create("maps"); }
