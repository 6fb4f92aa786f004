# The snapshot reader's fuzz target, included from Makefile.am. It is built
# with clang and libFuzzer (AddressSanitizer and UndefinedBehaviorSanitizer
# too), from the same source lists as libcommon.a and ptfil-view, and is not
# part of `make all` or `make check`:
#
#   make fuzz            builds tests/fuzz/fuzz_snap
#   make fuzz-run        fuzzes for FUZZ_SECONDS over a writable copy of the seeds
#                        in tests/fuzz/corpus; fails on a crash, leak, timeout or
#                        excess memory, and says where the input that did it is
#   make fuzz-regress    runs every input in tests/fuzz/regress and the seeds once
#
# Override on the command line: make fuzz-run FUZZ_SECONDS=600 FUZZ_CC=clang-15.
# An input the fuzzer finds goes, once the bug is fixed and the input
# minimized (fuzz_snap -minimize_crash=1 INPUT), into tests/fuzz/regress/,
# where fuzz-regress and tests/e2e/test_fuzz_regress.py run it for good.

FUZZ_CC = clang
FUZZ_SECONDS = 60
FUZZ_CC_FLAGS = -std=gnu11 -g -O1 -fno-omit-frame-pointer -Wall -Wextra \
	-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
# Inputs past 64 KiB only slow the search; 10 s for one input is a hang; 2 GiB
# is twice what the reader may hold (SNAP_MAX_MEMORY) plus the sanitizers' share.
FUZZ_LIMITS = -rss_limit_mb=2048 -timeout=10 -max_len=65536
FUZZ_BIN = tests/fuzz/fuzz_snap$(EXEEXT)
FUZZ_WORK = tests/fuzz/run
FUZZ_SRCS = tests/fuzz/fuzz_snap.c $(libcommon_a_SOURCES) $(VIEW_SOURCES) \
	$(nodist_ptfil_view_SOURCES)

EXTRA_DIST += tests/fuzz/fuzz_snap.c tests/fuzz/snap.dict tests/fuzz/corpus tests/fuzz/regress

fuzz: $(FUZZ_BIN)

# One compile-and-link command: the sources come from the lists above, so a
# file added to libcommon.a or ptfil-view is fuzzed without touching this file.
# Generated sources are found in the build tree, the others in the source tree.
$(FUZZ_BIN): $(FUZZ_SRCS) config.h
	@$(MKDIR_P) tests/fuzz
	$(AM_V_CCLD)srcs=; \
	for f in $(FUZZ_SRCS); do \
	  case $$f in \
	    *.c) if test -f "$$f"; then srcs="$$srcs $$f"; else srcs="$$srcs $(srcdir)/$$f"; fi ;; \
	  esac; \
	done; \
	$(FUZZ_CC) $(FUZZ_CC_FLAGS) $(AM_CPPFLAGS) $(ZLIB_CFLAGS) -o $@ $$srcs $(ZLIB_LIBS)

fuzz-run: $(FUZZ_BIN)
	rm -rf $(FUZZ_WORK)
	$(MKDIR_P) $(FUZZ_WORK)/corpus $(FUZZ_WORK)/artifacts
	cp $(srcdir)/tests/fuzz/corpus/* $(FUZZ_WORK)/corpus/
	chmod u+w $(FUZZ_WORK)/corpus/*
	@echo "fuzz-run: fuzzing the snapshot reader for $(FUZZ_SECONDS) s (log: $(FUZZ_WORK)/fuzz.log)"
	@if ./$(FUZZ_BIN) $(FUZZ_LIMITS) -max_total_time=$(FUZZ_SECONDS) \
	    -dict=$(srcdir)/tests/fuzz/snap.dict -print_final_stats=1 \
	    -artifact_prefix=$(FUZZ_WORK)/artifacts/ $(FUZZ_WORK)/corpus \
	    >$(FUZZ_WORK)/fuzz.log 2>&1; then \
	  grep -E '^(Done |stat::average_exec_per_sec|stat::peak_rss_mb)' $(FUZZ_WORK)/fuzz.log; \
	  echo "fuzz-run: no crash, leak, hang or excess memory in $(FUZZ_SECONDS) s"; \
	else \
	  tail -n 80 $(FUZZ_WORK)/fuzz.log; \
	  echo "fuzz-run: FAILED; the input is in $(FUZZ_WORK)/artifacts/:"; \
	  ls -l $(FUZZ_WORK)/artifacts/; \
	  echo "fuzz-run: reproduce with ./$(FUZZ_BIN) $(FUZZ_WORK)/artifacts/FILE"; \
	  exit 1; \
	fi

fuzz-regress: $(FUZZ_BIN)
	./$(FUZZ_BIN) $(FUZZ_LIMITS) $(srcdir)/tests/fuzz/regress/* $(srcdir)/tests/fuzz/corpus/*

clean-local: clean-fuzz
clean-fuzz:
	rm -rf $(FUZZ_BIN) $(FUZZ_WORK)

.PHONY: fuzz fuzz-run fuzz-regress clean-fuzz
