# The script and style sheets of ptfil-view's flame graph and HTML report are
# real files here, turned into C string constants (tools/assets/assets.c, in
# the build tree) by a sed script, so they can be edited, linted and diffed as
# what they are. Included from Makefile.am.
#
# Each line of an asset becomes one string literal with its newline: \ and "
# escaped, and ? too, so no "??" can ever read as a trigraph. The build fails
# if an asset holds "]]>" or "</script" (either would end the CDATA section or
# the <script> element it is embedded in) or "http" (the outputs are
# self-contained and must never reach the network).

PTFIL_ASSETS = \
	tools/assets/flame.js \
	tools/assets/flame.css \
	tools/assets/report.js \
	tools/assets/report.css

nodist_ptfil_view_SOURCES = tools/assets/assets.c
BUILT_SOURCES = tools/assets/assets.c
# CLEANFILES and EXTRA_DIST are set later in Makefile.am with '=', which
# automake does not allow after a '+=' here: these two lists serve the same end.
MOSTLYCLEANFILES = tools/assets/assets.c tools/assets/assets.c-t
dist_noinst_DATA = $(PTFIL_ASSETS)
noinst_HEADERS = tools/assets/assets.h

tools/assets/assets.c: $(PTFIL_ASSETS) $(srcdir)/tools/assets/assets.mk
	$(AM_V_GEN)$(MKDIR_P) tools/assets && \
	for f in $(PTFIL_ASSETS); do \
	  if grep -n -i -e ']]>' -e '</script' -e 'http' $(srcdir)/$$f; then \
	    echo "$$f: must not hold ']]>', '</script' or 'http' (see assets.mk)" >&2; exit 1; \
	  fi; \
	done && \
	{ echo '/* Generated from tools/assets by tools/assets/assets.mk: do not edit. */'; \
	  echo '#include "tools/assets/assets.h"'; \
	  for f in $(PTFIL_ASSETS); do \
	    name=`echo "$$f" | sed -e 's|.*/||' -e 's|[^A-Za-z0-9]|_|g'`; \
	    echo ''; \
	    echo "const char asset_$$name[] ="; \
	    sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/"/' -e 's/$$/\\n"/' $(srcdir)/$$f; \
	    echo '"";'; \
	  done; } >$@-t && mv -f $@-t $@
