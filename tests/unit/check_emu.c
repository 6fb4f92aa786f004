/* Unit tests for emu (placeholder until written). */
#include "tests/unit/suites.h"
Suite *emu_suite(void) { return suite_create("emu"); }
