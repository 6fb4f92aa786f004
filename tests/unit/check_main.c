/* Runs every unit suite; fork mode isolates tests (CK_FORK=no for a debugger). */
#include <stdlib.h>
#include "tests/unit/suites.h"
#include "common/error.h"

int main(void)
{
	error_set_progname("check_ptfil");
	SRunner *sr = srunner_create(snap_suite());
	srunner_add_suite(sr, maps_suite());
	srunner_add_suite(sr, sym_suite());
	srunner_add_suite(sr, ledger_suite());
	srunner_add_suite(sr, stacks_suite());
	srunner_add_suite(sr, emu_suite());
	srunner_add_suite(sr, heap_suite());
	srunner_add_suite(sr, refuse_suite());
	srunner_add_suite(sr, flame_suite());
	srunner_add_suite(sr, event_suite());
	srunner_add_suite(sr, hooks_suite());
	srunner_add_suite(sr, grow_suite());
	srunner_add_suite(sr, exits_suite());
	srunner_add_suite(sr, pylayout_suite());
	srunner_add_suite(sr, sigmask_suite());
	srunner_add_suite(sr, alloc_suite());
	srunner_add_suite(sr, pages_suite());
	srunner_add_suite(sr, fold_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
