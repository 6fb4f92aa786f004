/* The Check suites, one per module, chained by check_main.c. */
#ifndef PTFIL_SUITES_H
#define PTFIL_SUITES_H
#include <check.h>
Suite *snap_suite(void);
Suite *maps_suite(void);
Suite *sym_suite(void);
Suite *ledger_suite(void);
Suite *stacks_suite(void);
Suite *emu_suite(void);
Suite *heap_suite(void);
Suite *refuse_suite(void);
Suite *flame_suite(void);
Suite *event_suite(void);
Suite *hooks_suite(void);
Suite *grow_suite(void);
Suite *exits_suite(void);
Suite *pylayout_suite(void);
Suite *sigmask_suite(void);
Suite *alloc_suite(void);
Suite *pages_suite(void);
Suite *fold_suite(void);
#endif
