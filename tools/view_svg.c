/* Placeholder: the SVG flame graph (being written). */
#include "tools/view.h"
#include "common/error.h"

int view_svg(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
	     const struct view_options *o)
{
	(void)out; (void)a; (void)b; (void)f; (void)o;
	return error("--svg is not written yet");
}
