/* Unit tests for ledger (placeholder until written). */
#include "tests/unit/suites.h"
Suite *ledger_suite(void) { return suite_create("ledger"); }
