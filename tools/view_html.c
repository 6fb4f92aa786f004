/* Placeholder: the HTML report (being written). */
#include "tools/view.h"
#include "common/error.h"

int view_html(FILE *out, const struct snap *a, const struct snap *b, const struct flame *f,
	      const struct view_options *o)
{
	(void)out; (void)a; (void)b; (void)f; (void)o;
	return error("--html is not written yet");
}
